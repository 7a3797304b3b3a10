"""Job limits: samples x runs and max_iterations, and the lengths the database imposes."""

from __future__ import annotations

from typing import Any

import pytest

from optiflow.core.base import MAX_NAME_LENGTH
from optiflow.core.limits import JobLimits, LimitError, check_limits
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
    spec = job(eval_runs=3)
    samples = len(spec.dataset)
    check_limits(spec, JobLimits(max_sample_runs=samples * 3))
    assert refused(spec, JobLimits(max_sample_runs=samples * 3 - 1)) == "eval_runs"
    assert refused(spec, JobLimits(max_sample_runs=samples - 1)) == "dataset"
    measure = job(file="measure.yaml", runs=4)
    assert refused(measure, JobLimits(max_sample_runs=len(measure.sample_ids()) * 4 - 1)) == "runs"


def test_optimize_counts_the_trial_samples_and_caps_every_max_iterations() -> None:
    spec = job("weak-helpdesk")  # splits: trials run on train + val
    check_limits(spec, JobLimits(max_sample_runs=len(spec.trial_ids()), max_iterations=10))
    assert refused(spec, JobLimits(max_iterations=9)) == "termination.max_iterations"
    nested = job(
        "weak-helpdesk",
        termination=[{"type": "composite", "policies": [{"type": "max_iterations", "iterations": 500}]}],
    )
    assert refused(nested, JobLimits(max_iterations=100)) == "termination.max_iterations"


def test_the_caps_come_from_settings() -> None:
    limits = Settings(max_sample_runs=7, max_iterations=3).job_limits
    assert limits == JobLimits(max_sample_runs=7, max_iterations=3)


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
