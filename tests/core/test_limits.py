"""Job limits: samples x runs and max_iterations, and the lengths the database imposes."""

from __future__ import annotations

from typing import Any

import pytest

from optiflow.core.base import MAX_NAME_LENGTH
from optiflow.core.limits import JobLimits, LimitError, check_limits, runs_per_sample
from optiflow.errors import ValidationError
from optiflow.jobfile import load_job
from optiflow.persistence.tables import NAME
from optiflow.settings import Settings
from tests.support.workers import ROOT


def job(example: str = "support-bot", file: str = "job.yaml", **changes: Any) -> Any:
    return load_job(ROOT / "examples" / example / file, overrides=changes)


def refused(spec: Any, limits: JobLimits) -> str | None:
    with pytest.raises(LimitError) as info:
        check_limits(spec, limits)
    assert info.value.code == "limit_exceeded"
    return info.value.field


def test_samples_times_runs_is_capped_naming_the_runs_or_the_dataset() -> None:
    spec = job(eval_runs=3, gate={"mode": "strict"})
    samples = len(spec.dataset)
    check_limits(spec, JobLimits(max_sample_runs=samples * 3))
    assert refused(spec, JobLimits(max_sample_runs=samples * 3 - 1)) == "eval_runs"
    assert refused(spec, JobLimits(max_sample_runs=samples - 1)) == "dataset"
    measure = job(file="measure.yaml", runs=4)
    assert refused(measure, JobLimits(max_sample_runs=len(measure.sample_ids()) * 4 - 1)) == "runs"


def test_a_sequential_gate_counts_its_max_runs() -> None:
    """Issue 27: 20,000 samples x gate.max_runs 200 was admitted (eval_runs 1 was all it counted)."""
    paired = job(eval_runs=1, gate={"mode": "paired", "first_runs": 1, "round_runs": 50, "max_runs": 200})
    samples = len(paired.dataset)
    check_limits(paired, JobLimits(max_sample_runs=samples * 200))
    with pytest.raises(LimitError) as info:
        check_limits(paired, JobLimits(max_sample_runs=samples * 200 - 1))
    assert info.value.field == "gate.max_runs"
    assert (
        f"{samples} samples x 200 runs (gate.max_runs) = {samples * 200:,} evaluations" in info.value.message
    )
    rows = [{"id": f"s{i}", "input": "x", "expected": "y"} for i in range(20_000)]
    big = job(dataset=rows, eval_runs=1, gate={"mode": "paired", "first_runs": 1, "max_runs": 200})
    with pytest.raises(LimitError) as info:
        check_limits(big, Settings().job_limits)
    assert info.value.field == "gate.max_runs"
    assert (
        "20000 samples x 200 runs (gate.max_runs) = 4,000,000 evaluations per candidate" in info.value.message
    )


def test_a_whole_job_is_capped_at_samples_x_runs_x_candidates() -> None:
    spec = job("weak-helpdesk", acceptance={"test": "paired", "max_runs": 40})
    samples, runs = len(spec.trial_ids()), 40
    candidates = 2 + spec.termination.max_iterations() * spec.max_candidates_per_step
    check_limits(spec, JobLimits(max_sample_runs=10**6, max_job_evaluations=samples * runs * candidates))
    with pytest.raises(LimitError) as info:
        check_limits(
            spec, JobLimits(max_sample_runs=10**6, max_job_evaluations=samples * runs * candidates - 1)
        )
    assert info.value.field == "acceptance.max_runs"
    assert f"x {candidates} candidates (2 + " in info.value.message
    assert "OPTIFLOW_MAX_JOB_EVALUATIONS" in info.value.message
    compress = job(gate={"mode": "strict"})
    sections = sum(1 for s in compress.prompt.sections if not s.frozen)
    assert f"2 x {sections} mutable sections + 2" in refused_message(
        compress, JobLimits(max_job_evaluations=1)
    )


def refused_message(spec: Any, limits: JobLimits) -> str:
    with pytest.raises(LimitError) as info:
        check_limits(spec, limits)
    return info.value.message


def test_optimize_counts_the_trial_samples_and_caps_every_max_iterations() -> None:
    spec = job("weak-helpdesk")  # splits: trials run on train + val
    runs, _ = runs_per_sample(spec)
    check_limits(spec, JobLimits(max_sample_runs=len(spec.trial_ids()) * runs, max_iterations=10))
    assert refused(spec, JobLimits(max_iterations=9)) == "termination.max_iterations"
    nested = job(
        "weak-helpdesk",
        termination=[{"type": "composite", "policies": [{"type": "max_iterations", "iterations": 500}]}],
    )
    assert refused(nested, JobLimits(max_iterations=100)) == "termination.max_iterations"


def test_the_caps_come_from_settings() -> None:
    limits = Settings(max_sample_runs=7, max_iterations=3, max_job_evaluations=11).job_limits
    assert limits == JobLimits(max_sample_runs=7, max_iterations=3, max_job_evaluations=11)


def test_names_and_sample_ids_longer_than_their_columns_are_refused() -> None:
    assert NAME.length == MAX_NAME_LENGTH
    job(name="n" * MAX_NAME_LENGTH)
    with pytest.raises(ValidationError) as info:
        job(name="n" * (MAX_NAME_LENGTH + 1))
    assert "name" in str(info.value.field)
    spec = job()
    rows = [s.model_dump(mode="json") for s in spec.dataset.samples]
    rows[0]["id"] = "i" * (MAX_NAME_LENGTH + 1)
    with pytest.raises(ValidationError) as info:
        job(dataset=rows)
    assert "sample 0: id" in str(info.value.field)
