"""A flaky provider does not change a job's outcome, a refusing one ends it with its message.

Transient errors (429, 500, timeouts) on 20% of the attempts, with retries on: the job ends with
the report of an undisturbed run. A permanent error (401) ends the job, or the trial of the
candidate that hit it, with the provider's message. ``make chaos`` runs 20 such jobs on real
workers (bench/chaos_faults.md); these run on the embedded worker.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from optiflow.core.compress.report import OptimizationReport
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job
from tests.support.chaos import (
    AUTH_MESSAGE,
    decisions,
    optimize_with_a_failing_candidate,
    small,
    with_permanent_error,
    with_provider_faults,
)
from tests.support.inline import run_inline
from tests.support.workers import ROOT, embedded_settings

EXAMPLE = ROOT / "examples" / "support-bot" / "job.yaml"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    with Client(embedded_settings(tmp_path_factory.mktemp("faults-home"))) as c:
        yield c


@pytest.fixture(scope="module")
def spec() -> object:
    return small(load_job(EXAMPLE, overrides={"fail_fast": False}), samples=12, runs=2)


@pytest.mark.timeout(180)
def test_transient_errors_on_a_fifth_of_the_calls_leave_the_report_undisturbed(
    client: Client, spec: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPTIFLOW_RETRY_BACKOFF_S", "0.001")
    expected = run_inline(spec)  # type: ignore[arg-type]
    faulty = with_provider_faults(spec, rate=0.2, seed=7)  # type: ignore[arg-type]
    result = client.submit(faulty).wait(timeout=150)
    assert result.ok, result.error
    assert isinstance(result.report, OptimizationReport)
    assert decisions(result.report) == decisions(expected)
    assert result.report.stats.errors == 0


def test_a_permanent_error_ends_the_job_with_the_providers_message(client: Client, spec: object) -> None:
    result = client.submit(with_permanent_error(spec)).wait(timeout=60)  # type: ignore[arg-type]
    assert result.status == "failed"
    assert result.error is not None and AUTH_MESSAGE in result.error, result.error


def test_a_permanent_error_ends_the_candidates_trial_with_the_providers_message(
    client: Client, spec: object
) -> None:
    result = client.submit(optimize_with_a_failing_candidate(spec)).wait(timeout=120)  # type: ignore[arg-type]
    assert result.ok, result.error
    assert isinstance(result.report, OptimizationHistory)
    failed = [t for t in result.report.trials if t.status == "failed"]
    assert failed and all(t.error and AUTH_MESSAGE in t.error for t in failed), [
        (t.candidate_id, t.status, t.error) for t in result.report.trials
    ]
    assert any(t.status == "completed" for t in result.report.trials)
