"""Every job ends: each workflow's step bound (computed from its spec) holds under any scenario
drawn here, and a workflow that would pass it fails with ``step_bound_exceeded`` instead of
looping. (Compress is drawn with the seed-000 scenarios in ``test_seed000_differential``.)"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optiflow.core.actions import Fail, Finish
from optiflow.core.compress.workflow import CompressWorkflow
from optiflow.core.dataset import Dataset
from optiflow.core.evaluation import EvalResult
from optiflow.core.measure.spec import MeasureSpec
from optiflow.core.measure.workflow import MeasureWorkflow
from optiflow.core.step import RewriteRequest, SectionEdit, Step, StepResults
from optiflow.core.workflow import StepBoundError, bounded

from .compress_harness import words
from .optimize.conftest import PROMPT, SAMPLES, spec_of
from .optimize.harness import Bodies, Params, ScriptedOptimizer, run_optimize
from .test_compress_workflow import make_spec

EXAMPLES = max(int(os.environ.get("OPTIFLOW_SEED000_EXAMPLES", "500")) // 5, 50)
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def by_rules(bodies: Bodies, params: Params, sid: str, run: int) -> bool:
    return int(sid[1:]) < bodies[("rules",)].count("rule_") + int(
        float(str(params.get("temperature", 0))) < 0.5
    )


@st.composite
def optimize_specs(draw: st.DrawFn) -> tuple[Any, ScriptedOptimizer | None, bool]:
    iterations = draw(st.integers(1, 6))
    termination: dict[str, Any] = {"max_iterations": iterations}
    if draw(st.booleans()):
        termination["no_improvement"] = draw(st.integers(1, 4))
    splits = draw(st.booleans())
    changes: dict[str, Any] = {"termination": termination}
    if splits:
        samples = tuple(
            s.model_copy(update={"split": ("train", "val", "test")[i % 3]}) for i, s in enumerate(SAMPLES)
        )
        changes.update(splits=True, dataset=Dataset(name="ds", samples=samples))
    kind = draw(st.sampled_from(("scripted", "grid", "rewrite")))
    if kind == "rewrite":
        changes.update(
            treatment={"sections": ["rules"]},
            optimizer={"type": "llm_rewrite", "model": {"model": "optiflow/sim"}, "max_length": 60},
        )
        return spec_of(**changes), None, True
    if kind == "grid":
        return spec_of(**changes), None, False
    # a scripted optimizer that never stops on its own, proposing new, duplicate or invalid configs
    generations = [
        [
            {
                "sections": {
                    "rules": draw(st.sampled_from(("rule_a rule_b", "rule_a", "rule_c rule_d rule_e")))
                }
            }
            if draw(st.booleans())
            else {"params": {"temperature": draw(st.sampled_from((0.0, 0.3, 0.9)))}}
            for _ in range(draw(st.integers(0, 3)))
        ]
        for _ in range(30)
    ]
    return spec_of(**changes), ScriptedOptimizer(generations), False


def add_rule(request: RewriteRequest) -> str:
    return f"{request.current} rule_v{request.variant}g{len(request.iterations)}"


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=IN_CI,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(drawn=optimize_specs())
def test_no_optimize_job_exceeds_its_step_bound(drawn: tuple[Any, ScriptedOptimizer | None, bool]) -> None:
    spec, optimizer, rewrites = drawn
    run = run_optimize(spec, by_rules, rewrite=add_rule if rewrites else None, optimizer=optimizer)
    assert run.workflow is not None
    assert len(run.steps) <= run.workflow.max_steps
    assert isinstance(run.action, Finish | Fail)
    if isinstance(run.action, Fail):
        assert run.action.code != StepBoundError.code, run.action.error


@settings(max_examples=50, deadline=None, derandomize=IN_CI, database=None)
@given(runs=st.integers(1, 8))
def test_a_measure_job_is_one_step(runs: int) -> None:
    spec = MeasureSpec.model_validate(
        {
            "prompt": PROMPT,
            "dataset": Dataset(samples=SAMPLES),
            "check": {"type": "contains"},
            "model": {"model": "optiflow/sim"},
            "runs": runs,
        }
    )
    wf = MeasureWorkflow(spec, "m1")
    tr = wf.start()
    assert isinstance(tr.action, Step) and wf.max_steps == 1
    evals = tuple(
        EvalResult(experiment_id=wf.experiment_id, sample_id=sid, run=r, passed=True, score=1.0)
        for r in range(runs)
        for sid in spec.sample_ids()
    )
    after = wf.advance(tr.state, StepResults(step=tr.action, evals=evals))
    assert isinstance(after.action, Finish)


def test_a_step_past_the_bound_fails_the_job_with_a_stable_code() -> None:
    step = Step(index=7, name="greedy-3")
    assert bounded(step, 8, "why") is step
    failed = bounded(step, 7, "1 + 1 round(s) x (6 mutable section(s) + 1)")
    assert isinstance(failed, Fail) and failed.code == "step_bound_exceeded"
    assert failed.error == (
        "step_bound_exceeded: the job would start step 8 (greedy-3) but its spec allows at most 7 "
        "(1 + 1 round(s) x (6 mutable section(s) + 1)); it fails instead of looping"
    )


def test_a_compress_job_whose_evaluations_never_land_fails_at_its_bound() -> None:
    """Every set's evaluations skipped without a regression (a broken scratch): strict asks for
    the runs again and again; the bound ends the job."""
    spec = make_spec(fail_fast=False, gate={"mode": "strict"})
    wf = CompressWorkflow(spec, "j")
    tr = wf.start(words)
    state, action = tr.state, tr.action
    steps = 0
    while isinstance(action, Step):
        steps += 1
        assert steps <= 100, "the job does not end"
        evals = tuple(
            EvalResult(experiment_id=t.experiment.id, sample_id=sid, run=r, passed=True, score=1.0)
            if action.index == 0
            else EvalResult(experiment_id=t.experiment.id, sample_id=sid, run=r, skipped=True, reason="lost")
            for t in action.targets
            for r in t.run_indices
            for sid in t.sample_ids
        )
        edits = tuple(_edit(spec, p) for p in action.propose)
        tr = wf.advance(state, StepResults(step=action, evals=evals, edits=edits))
        state, action = tr.state, tr.action
    assert isinstance(action, Fail) and action.code == "step_bound_exceeded", action
    assert steps == wf.max_steps == 1 + 1 * (4 + 1)


def _edit(spec: Any, path: Any) -> SectionEdit:
    body = spec.effective_body(path)
    short = body.split()[0]
    return SectionEdit(
        path=path,
        original_hash=spec.prompt.section(path).hash,
        proposed_body=short,
        original_tokens=words(body),
        proposed_tokens=words(short),
    )
