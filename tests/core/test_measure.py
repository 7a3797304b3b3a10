"""The measure workflow: one experiment N runs -> a baseline document; Wilson interval, percentiles."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from optiflow.core.actions import Fail, Finish
from optiflow.core.dataset import Dataset, Sample
from optiflow.core.evaluation import EvalResult
from optiflow.core.measure.report import MeasureDocument, fails_below, percentile, wilson_interval
from optiflow.core.measure.spec import MeasureSpec
from optiflow.core.measure.workflow import MeasureWorkflow
from optiflow.core.overrides import SectionOverride
from optiflow.core.prompt import Prompt, Section
from optiflow.core.step import Step, StepResults

PROMPT = Prompt(ns="t", key="p", sections=(Section(path=("a",), body="rule"),))
DATASET = Dataset(
    samples=tuple(
        Sample(id=f"s{i}", input="q", expected="x", split="test" if i >= 8 else "train") for i in range(10)
    )
)
AT = datetime(2026, 1, 16, tzinfo=UTC)


def spec(**changes: Any) -> MeasureSpec:
    data: dict[str, Any] = {
        "name": "nightly",
        "prompt": PROMPT,
        "dataset": DATASET,
        "check": {"type": "contains"},
        "model": {"model": "optiflow/sim", "params": {"temperature": 0.1}},
        "runs": 3,
    }
    data.update(changes)
    return MeasureSpec.model_validate(data)


def test_wilson_interval_known_values() -> None:
    i = wilson_interval(8, 10)
    assert (round(i.lower, 4), round(i.upper, 4)) == (0.4902, 0.9433)
    assert i.confidence == 0.95
    zero = wilson_interval(0, 20)
    assert zero.lower == 0.0 and round(zero.upper, 4) == 0.1611
    full = wilson_interval(20, 20)
    assert round(full.lower, 4) == 0.8389 and full.upper == 1.0
    wide = wilson_interval(8, 10, confidence=0.99)
    assert wide.lower < i.lower and wide.upper > i.upper
    assert wilson_interval(0, 0).lower == 0.0 and wilson_interval(0, 0).upper == 1.0
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


def test_percentile_interpolates_like_numpy() -> None:
    xs = [float(x) for x in range(1, 101)]
    assert percentile(xs, 50) == 50.5
    assert percentile(xs, 95) == pytest.approx(95.05)
    assert percentile(xs, 99) == pytest.approx(99.01)
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None


def results(
    step: Step, *, failing: frozenset[str] = frozenset(), error: str | None = None
) -> list[EvalResult]:
    (target,) = step.targets
    out = []
    for run in range(target.runs):
        for n, sid in enumerate(target.sample_ids):
            ok = sid not in failing and not (sid == "s0" and run == 1)
            out.append(
                EvalResult(
                    experiment_id=target.experiment.id,
                    sample_id=sid,
                    run=run,
                    passed=ok and error is None,
                    score=float(ok),
                    prompt_tokens=100,
                    completion_tokens=20,
                    cost=0.001,
                    latency_ms=100.0 + 10 * n + run,
                    ttft_ms=50.0,
                    error=error,
                )
            )
    return out


def test_measure_step_and_document() -> None:
    s = spec(
        tag="prod",
        baseline_overrides=(
            SectionOverride(path=("a",), expected_hash=PROMPT.sections[0].hash, body="rule!"),
        ),
        baseline_model_params={"model": "optiflow/other", "top_p": 0.5},
        fail_below=0.9,
    )
    wf = MeasureWorkflow(s, "job9", clock=lambda: AT)
    tr = wf.start()
    state, step = tr.state, tr.action
    assert isinstance(step, Step) and step.name == "measure"
    (target,) = step.targets
    assert target.experiment.overrides_tag == "opt-job9-measure" and target.experiment.parent_tag == "prod"
    assert target.runs == 3 and target.sample_ids == DATASET.ids()
    assert target.overrides[0].body == "rule!" and target.model_params == {
        "model": "optiflow/other",
        "top_p": 0.5,
    }
    assert MeasureWorkflow.load_state(state.model_dump(mode="json")) == state
    assert isinstance(step, Step)
    tr = wf.advance(state, StepResults(step=step, evals=tuple(results(step, failing=frozenset({"s9"})))))
    state, action = tr.state, tr.action
    assert isinstance(action, Finish) and isinstance(action.report, MeasureDocument)
    doc = action.report
    assert (doc.samples, doc.runs, doc.evaluations, doc.passed, doc.errors) == (10, 3, 30, 26, 0)
    assert doc.pass_rate == pytest.approx(26 / 30)
    assert doc.wilson == wilson_interval(26, 30)
    assert doc.run_pass_rates == (0.9, 0.8, 0.9)
    assert doc.consistently_passed == 8 and doc.failing_samples == ("s0", "s9")
    assert (doc.total_tokens, doc.mean_tokens) == (3600, 120.0)
    assert doc.total_cost == pytest.approx(0.03) and doc.mean_cost == pytest.approx(0.001)
    assert doc.latency_ms.p50 == pytest.approx(146.0) and doc.latency_ms.p99 is not None
    assert doc.ttft_ms.p95 == 50.0
    assert (doc.model, doc.model_params) == ("optiflow/other", {"temperature": 0.1, "top_p": 0.5})
    assert doc.measured_at == AT
    assert fails_below(doc, 0.9) and not fails_below(doc, 0.6)
    assert doc.failed  # the spec's fail_below
    assert MeasureDocument.model_validate(doc.model_dump(mode="json")) == doc
    assert state.phase == "done"


def test_fails_below_is_the_lower_bound() -> None:
    wf = MeasureWorkflow(spec(), "j", clock=lambda: AT)
    step = wf.start().action
    assert isinstance(step, Step)
    action = wf.advance(wf.start().state, StepResults(step=step, evals=tuple(results(step)))).action
    assert isinstance(action, Finish) and isinstance(action.report, MeasureDocument)
    doc = action.report
    assert doc.pass_rate == pytest.approx(29 / 30)
    assert doc.wilson.lower < 0.95 < doc.pass_rate  # a pass rate above the bar is not enough
    assert fails_below(doc, 0.95)
    assert not doc.failed  # no fail_below in the spec


def test_one_split_only() -> None:
    s = spec(split="test")
    step = MeasureWorkflow(s, "j").start().action
    assert isinstance(step, Step) and step.targets[0].sample_ids == ("s8", "s9")
    with pytest.raises(ValidationError, match="no sample"):
        spec(split="val")


def test_every_evaluation_failing_fails_the_job() -> None:
    wf = MeasureWorkflow(spec(), "j")
    tr = wf.start()
    state, step = tr.state, tr.action
    assert isinstance(step, Step)
    action = wf.advance(
        state, StepResults(step=step, evals=tuple(results(step, error="503 unavailable")))
    ).action
    assert isinstance(action, Fail) and "503 unavailable" in action.error
    action = wf.advance(state, StepResults(step=step)).action
    assert isinstance(action, Fail)


def test_partial_errors_count_as_not_passed() -> None:
    wf = MeasureWorkflow(spec(), "j", clock=lambda: AT)
    tr = wf.start()
    state, step = tr.state, tr.action
    assert isinstance(step, Step)
    evals = results(step)
    evals[0] = evals[0].model_copy(update={"error": "timeout", "passed": False})
    action = wf.advance(state, StepResults(step=step, evals=tuple(evals))).action
    assert isinstance(action, Finish) and isinstance(action.report, MeasureDocument)
    assert action.report.errors == 1 and action.report.passed == 28
    state2 = wf.advance(state, StepResults(step=step, evals=tuple(evals))).state
    again = wf.advance(state2, StepResults(step=step, evals=tuple(evals))).action
    assert isinstance(again, Fail)
