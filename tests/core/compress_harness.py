"""Drive the pure compress workflow in-process, and seed 000's sequential algorithm as a reference.

Model answers are a function ``answer(bodies, sample_id, run) -> passed`` of the rendered section
bodies, so both algorithms see the same answers for the same prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from optiflow.core.actions import Fail, Finish
from optiflow.core.compress.report import Modification, OptimizationReport, RejectedModification
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.compress.workflow import CompressWorkflow
from optiflow.core.evaluation import EvalResult, summarize
from optiflow.core.sections import SectionPath
from optiflow.core.step import EvalTarget, SectionEdit, Step, StepResults

Bodies = Mapping[SectionPath, str]
Answer = Callable[[Bodies, str, int], bool | None]
"""passed or not; None: the call errored (after retries)."""


def words(text: str) -> int:
    return len(text.split())


def bodies_of(spec: CompressSpec, target: EvalTarget) -> dict[SectionPath, str]:
    bodies = {s.path: s.body for s in spec.prompt.sections}
    for ov in target.overrides:
        bodies[ov.path] = ov.body
    return bodies


def run_workflow(
    spec: CompressSpec,
    answer: Answer,
    edits: Mapping[SectionPath, str],
    *,
    job_id: str = "job1",
) -> tuple[OptimizationReport | str, list[Step]]:
    """Run to the end; return the report (or the Fail error) and the steps taken."""
    wf = CompressWorkflow(spec, job_id)
    tr = wf.start(words)
    state, action = tr.state, tr.action
    steps: list[Step] = []
    while isinstance(action, Step):
        steps.append(action)
        evals: list[EvalResult] = []
        for target in action.targets:
            bodies = bodies_of(spec, target)
            regressed = False
            for run in target.run_indices:
                for sid in target.sample_ids:
                    eid = target.experiment.id
                    if regressed:
                        evals.append(EvalResult(experiment_id=eid, sample_id=sid, run=run, skipped=True))
                        continue
                    ok = answer(bodies, sid, run)
                    if ok is None:
                        evals.append(
                            EvalResult(experiment_id=eid, sample_id=sid, run=run, error="503 overloaded")
                        )
                    else:
                        evals.append(
                            EvalResult(experiment_id=eid, sample_id=sid, run=run, passed=ok, score=float(ok))
                        )
                    if target.guard is not None and sid in target.guard and not ok:
                        regressed = True
        proposed = tuple(
            SectionEdit(
                path=p,
                original_hash=spec.prompt.section(p).hash,
                proposed_body=edits.get(p, spec.effective_body(p)),
                original_tokens=words(spec.effective_body(p)),
                proposed_tokens=words(edits.get(p, spec.effective_body(p))),
            )
            for p in action.propose
        )
        tr = wf.advance(state, StepResults(step=action, evals=tuple(evals), edits=proposed))
        state, action = tr.state, tr.action
    if isinstance(action, Fail):
        return action.error, steps
    assert isinstance(action, Finish)
    assert isinstance(action.report, OptimizationReport)
    return action.report, steps


def seed_reference(
    spec: CompressSpec, answer: Answer, edits: Mapping[SectionPath, str]
) -> tuple[float, list[Modification], list[RejectedModification], int]:
    """Seed 000's ``_optimize`` written out sequentially; returns (baseline rate, mods, rejected, calls)."""
    calls = 0
    ids = spec.dataset.ids()
    base_bodies = {s.path: s.body for s in spec.prompt.sections}

    def run_multi(bodies: Bodies) -> tuple[float, frozenset[str]]:
        nonlocal calls
        results = []
        for run in range(spec.eval_runs):
            for sid in ids:
                calls += 1
                ok = answer(bodies, sid, run)
                results.append(
                    EvalResult(
                        experiment_id="x",
                        sample_id=sid,
                        run=run,
                        passed=bool(ok),
                        error=None if ok is not None else "error",
                    )
                )
        s = summarize(results, ids)
        return s.pass_rate, s.consistently_passed

    base_rate, base_passed = run_multi(base_bodies)
    mutable = [s for s in spec.prompt.sections if not s.frozen and words(s.body) >= spec.min_section_tokens]
    mutable.sort(key=lambda s: -words(s.body))
    mods: list[Modification] = []
    rejected: list[RejectedModification] = []
    for s in mutable:
        body = edits.get(s.path, s.body)
        reduction = words(s.body) - words(body)
        if reduction <= 0:
            continue
        rate, passed = run_multi({**base_bodies, s.path: body})
        count = len(base_passed - passed)
        if count == 0:
            mods.append(
                Modification(
                    section_path=s.path,
                    original_hash=s.hash,
                    proposed_body=body,
                    token_reduction=reduction,
                    baseline_pass_rate=base_rate,
                    candidate_pass_rate=rate,
                )
            )
        else:
            rejected.append(
                RejectedModification(section_path=s.path, token_reduction=reduction, regression_count=count)
            )
    if len(mods) > 1:
        _, passed = run_multi({**base_bodies, **{m.section_path: m.proposed_body for m in mods}})
        if base_passed - passed:
            accepted: list[Modification] = []
            for m in sorted(mods, key=lambda m: -m.token_reduction):
                trial = [*accepted, m]
                _, passed = run_multi({**base_bodies, **{x.section_path: x.proposed_body for x in trial}})
                count = len(base_passed - passed)
                if count == 0:
                    accepted.append(m)
                else:
                    rejected.append(
                        RejectedModification(
                            section_path=m.section_path,
                            token_reduction=m.token_reduction,
                            regression_count=count,
                            stage="greedy",
                        )
                    )
            mods = accepted
    return base_rate, mods, rejected, calls
