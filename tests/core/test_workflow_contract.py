"""The workflow contract, run against every job kind (as tests/stores/test_contract.py is run
against every store): what the driver relies on without looking inside a workflow's state.

- state and actions round-trip through JSON (the checkpoint and the pending action);
- the job's step number only goes up, and each step's trials and progress key name that step;
- the run ends with a ``Finish`` whose report is the kind's own type, round-tripping as a
  :data:`~optiflow.core.actions.Report`;
- ``advance`` is deterministic: the same state and results give the same transition.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from optiflow.core import kinds
from optiflow.core.actions import ACTION, REPORT, Finish
from optiflow.core.compress.report import OptimizationReport
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.dataset import Dataset, Sample
from optiflow.core.evaluation import EvalResult
from optiflow.core.measure.report import MeasureDocument
from optiflow.core.measure.spec import MeasureSpec
from optiflow.core.measure.workflow import MeasureWorkflow
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.core.optimize.workflow import OptimizeWorkflow
from optiflow.core.prompt import Prompt, Section
from optiflow.core.step import EvalTarget, RewriteReply, SectionEdit, Step, StepResults
from optiflow.core.workflow import Transition, Workflow

from .optimize.conftest import spec_of
from .optimize.harness import FakeClock

FILLER = " ".join(["filler"] * 12)
PROMPT = Prompt(
    ns="t",
    key="p",
    sections=(
        Section(path=("intro",), body="You are a bot. " + FILLER, frozen=True),
        Section(path=("a",), body="rule_a rule_b " + FILLER + " " + FILLER),
        Section(path=("b",), body="rule_b " + FILLER),
        Section(path=("c",), body="rule_c " + FILLER),
    ),
)
DATASET = Dataset(samples=tuple(Sample(id=s, input=s, expected=s) for s in ("a", "b", "c", "x")))


def passes(prompt: Prompt, target: EvalTarget, sample_id: str) -> bool:
    """A sample passes when ``rule_<its id>`` is in a section the target renders."""
    bodies = {s.path: s.body for s in prompt.sections} | {o.path: o.body for o in target.overrides}
    return any(f"rule_{sample_id}" in body for body in bodies.values())


def respond(prompt: Prompt, step: Step) -> StepResults:
    """The step's results as a deterministic model would give them: every evaluation, a shorter
    body per proposed section (the one for ``a`` drops a rule: a regression), a reply per rewrite."""
    evals = tuple(
        EvalResult(
            experiment_id=t.experiment.id,
            sample_id=sid,
            run=run,
            passed=(ok := passes(prompt, t, sid)),
            score=float(ok),
            prompt_tokens=100,
            completion_tokens=5,
            latency_ms=10.0,
        )
        for t in step.targets
        for run in t.run_indices
        for sid in t.sample_ids
    )
    edits = tuple(
        SectionEdit(
            path=path,
            original_hash=prompt.section(path).hash,
            proposed_body=(body := " ".join(w for w in prompt.section(path).body.split() if w != "filler")),
            original_tokens=len(prompt.section(path).body.split()),
            proposed_tokens=len(body.split()),
        )
        for path in step.propose
    )
    rewrites = tuple(RewriteReply(id=r.id, text=r.current + " rule_c") for r in step.rewrites)
    return StepResults(step=step, evals=evals, edits=edits, rewrites=rewrites)


@dataclass
class Kind:
    name: str
    report_type: type
    make: Callable[[], Workflow[Any]]
    prompt: Prompt


def _compress() -> Workflow[Any]:
    spec = CompressSpec.model_validate(
        {
            "prompt": PROMPT,
            "dataset": DATASET,
            "check": {"type": "contains"},
            "model": {"model": "optiflow/sim"},
            "strategy": {"type": "rule"},
            "eval_runs": 2,
            "min_section_tokens": 5,
            "require_sensitivity": False,
        }
    )
    return kinds.workflow_for(spec, "job1")


def _measure() -> Workflow[Any]:
    spec = MeasureSpec(
        prompt=PROMPT, dataset=DATASET, check={"type": "contains"}, model={"model": "optiflow/sim"}, runs=3
    )
    return MeasureWorkflow(spec, "job1", clock=FakeClock())


def _optimize() -> Workflow[Any]:
    spec = spec_of(
        optimizer={"type": "llm_rewrite", "model": {"model": "optiflow/sim"}},
        treatment={"sections": ["rules"]},
    )
    return OptimizeWorkflow(spec, "job1", clock=FakeClock())


KINDS = [
    Kind("compress", OptimizationReport, _compress, PROMPT),
    Kind("measure", MeasureDocument, _measure, PROMPT),
    Kind("optimize", OptimizationHistory, _optimize, spec_of().prompt),
]


def run(kind: Kind) -> list[tuple[Transition[Any], StepResults | None]]:
    """Every transition of a run to the end, with the results each one answered."""
    wf = kind.make()
    tr = wf.start(lambda text: len(text.split()))
    out: list[tuple[Transition[Any], StepResults | None]] = [(tr, None)]
    while isinstance(tr.action, Step):
        assert len(out) < 50, "the workflow does not end"
        results = respond(kind.prompt, tr.action)
        tr = wf.advance(wf.load_state(tr.state.model_dump(mode="json")), results)
        out.append((tr, results))
    return out


@pytest.fixture(params=KINDS, ids=[k.name for k in KINDS])
def kind(request: pytest.FixtureRequest) -> Kind:
    case: Kind = request.param
    return case


def test_state_and_actions_round_trip_through_json(kind: Kind) -> None:
    wf = kind.make()
    for tr, _ in run(kind):
        assert wf.load_state(tr.state.model_dump(mode="json")) == tr.state
        assert ACTION.validate_json(ACTION.dump_json(tr.action)) == tr.action


def test_step_numbers_only_go_up_and_name_their_step(kind: Kind) -> None:
    transitions = run(kind)
    indices = [tr.step_index for tr, _ in transitions]
    assert indices == sorted(indices) and len(set(indices)) == len(indices), indices
    for tr, results in transitions[1:]:
        assert results is not None
        assert all(t.step_index == results.step.index for t in tr.trials)
        assert f"progress:{results.step.index + 1}" in {e.key for e in tr.events}
        assert len({e.key for e in tr.events}) == len(tr.events)


def test_the_run_ends_with_a_typed_report(kind: Kind) -> None:
    final, _ = run(kind)[-1]
    assert isinstance(final.action, Finish), final.action
    report = final.action.report
    assert isinstance(report, kind.report_type) and report.kind == kind.name
    assert REPORT.validate_json(REPORT.dump_json(report)) == report
    assert final.ends


def test_advance_is_deterministic(kind: Kind) -> None:
    transitions = run(kind)
    for (before, _), (_, results) in itertools.pairwise(transitions):
        assert results is not None
        once = kind.make().advance(before.state, results)
        twice = kind.make().advance(before.state, results)
        assert once == twice
