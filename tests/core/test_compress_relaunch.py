"""A compress step launched again after a crash (pure workflow).

When a killed worker loses a step's chord, recovery launches the step again and its evaluations
meet the fail-fast marks the lost chord wrote: every evaluation of a marked candidate comes back
skipped for its mark, and the answer that set the mark is back only if it was cached (an error is
never cached). The workflow must read the skip as the mark's witness: the candidate is rejected
in that step, never given another round (which the mark skips again, up to the step bound).
"""

from __future__ import annotations

import pytest

from optiflow.core.actions import Fail, Finish
from optiflow.core.compress.report import OptimizationReport
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.compress.workflow import FAIL_FAST_SKIP, CompressWorkflow
from optiflow.core.dataset import Dataset, Sample
from optiflow.core.evaluation import EvalResult
from optiflow.core.prompt import Prompt, Section
from optiflow.core.step import SectionEdit, Step, StepResults

FILLER = " ".join(["filler"] * 30)
PROMPT = Prompt(
    ns="t",
    key="p",
    sections=(
        Section(path=("a",), body="rule_a " + FILLER),
        Section(path=("b",), body="rule_b " + FILLER + " more"),
    ),
)
SAMPLES = ("a", "b", "x")
EDITS = {("a",): "rule_a short", ("b",): "short"}  # b's edit drops its rule: rejected


def words(text: str) -> int:
    return len(text.split())


def spec(gate: str) -> CompressSpec:
    return CompressSpec.model_validate(
        {
            "prompt": PROMPT,
            "dataset": Dataset(samples=tuple(Sample(id=s, input=s, expected=s) for s in SAMPLES)),
            "check": {"type": "contains"},
            "model": {"model": "optiflow/sim"},
            "strategy": {"type": "rule"},
            "eval_runs": 2,
            "min_section_tokens": 5,
            "gate": {"mode": gate},
            "fail_fast": True,
        }
    )


def run(sp: CompressSpec, *, lost_at: str | None) -> tuple[OptimizationReport | str, list[str]]:
    """Run the workflow; at the step named ``lost_at`` every evaluation of a guarded experiment
    that regresses comes back skipped for its mark, as in a step launched again after a crash
    whose failing answer was not cached."""
    wf = CompressWorkflow(sp, "job1")
    tr = wf.start(words)
    state, action, names = tr.state, tr.action, []
    while isinstance(action, Step):
        names.append(action.name)
        evals = []
        for t in action.targets:
            bodies = {s.path: s.body for s in sp.prompt.sections} | {o.path: o.body for o in t.overrides}
            eid = t.experiment.id
            answers = [
                (sid, r, any(f"rule_{sid}" in b for b in bodies.values()))
                for r in t.run_indices
                for sid in t.sample_ids
            ]
            marked = t.guard is not None and any(sid in t.guard and not ok for sid, _, ok in answers)
            for sid, r, ok in answers:
                if marked and action.name == lost_at:
                    evals.append(
                        EvalResult(
                            experiment_id=eid, sample_id=sid, run=r, skipped=True, reason=FAIL_FAST_SKIP
                        )
                    )
                else:
                    evals.append(
                        EvalResult(experiment_id=eid, sample_id=sid, run=r, passed=ok, score=float(ok))
                    )
        edits = tuple(
            SectionEdit(
                path=p,
                original_hash=sp.prompt.section(p).hash,
                proposed_body=EDITS[p],
                original_tokens=words(sp.prompt.section(p).body),
                proposed_tokens=words(EDITS[p]),
            )
            for p in action.propose
        )
        tr = wf.advance(state, StepResults(step=action, evals=tuple(evals), edits=edits))
        state, action = tr.state, tr.action
    if isinstance(action, Fail):
        return action.error, names
    assert isinstance(action, Finish) and isinstance(action.report, OptimizationReport)
    return action.report, names


@pytest.mark.parametrize("gate", ["strict", "auto", "paired"])
@pytest.mark.parametrize("lost_at", ["ablation", "candidates"])
def test_a_candidate_whose_evaluations_all_came_back_skipped_by_its_mark_is_rejected_in_that_step(
    gate: str, lost_at: str
) -> None:
    sp = spec(gate)
    want, want_steps = run(sp, lost_at=None)
    got, got_steps = run(sp, lost_at=lost_at)
    assert isinstance(want, OptimizationReport) and isinstance(got, OptimizationReport), (want, got)
    assert lost_at in got_steps  # the step really was one the marks emptied
    assert got_steps == want_steps  # not one step more
    assert [m.section_path for m in got.modifications] == [m.section_path for m in want.modifications]
    assert [(r.section_path, r.stage) for r in got.rejected] == [
        (r.section_path, r.stage) for r in want.rejected
    ]
    assert got.ablation is not None and got.ablation.noticed
