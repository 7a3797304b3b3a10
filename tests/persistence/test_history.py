"""Seed 002's history: the pure state (auto-stamped indices, timestamps, best_so_far, stop flags),
the build from stored trials, ``optiflow history``, and ``optiflow report`` / ``optiflow jobs``
answered from the database alone."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from optiflow.core.evaluation import TrialSummary
from optiflow.core.history import HistoryCandidate, HistoryState, build_candidate_entry, history_from_trials
from optiflow.core.records import Rejection, Trial
from optiflow.errors import ValidationError
from optiflow.persistence import JobRepository

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def ticking() -> Callable[[], datetime]:
    """A clock that advances one second per reading."""
    state = {"n": 0}

    def now() -> datetime:
        state["n"] += 1
        return T0 + timedelta(seconds=state["n"])

    return now


# -- HistoryState ---------------------------------------------------------------------------------
def test_state_stamps_indices_timestamps_and_best_so_far() -> None:
    h = HistoryState(job_id="j", clock=ticking())
    r0 = h.start_round()
    t0 = h.record_trial(r0, score=0.5, candidate={"temperature": 0.2})
    t1 = h.record_trial(r0, score=0.7, candidate=build_candidate_entry({"temperature": 0.5}, id="c1"))
    first = h.end_round(r0)
    r1 = h.start_round(extras={"note": "second"})
    h.record_trial(r1, score=0.6, candidate="a raw payload", metrics={"pass_rate": 0.6})
    h.record_trial(r1, score=None, candidate=None, extras={"status": "failed"})  # a failed trial
    second = h.end_round(r1)

    assert (t0.trial_index, t1.trial_index) == (0, 1)
    assert [t.trial_index for t in second.trials] == [2, 3]
    assert (first.round_index, second.round_index) == (0, 1)
    assert t0.timestamp < t1.timestamp < first.timestamp < second.timestamp
    assert t0.candidate.candidate == {"temperature": 0.2} and t0.candidate.score == 0.5
    assert first.best_score == 0.7 and first.best_candidate is not None and first.best_candidate.id == "c1"
    assert first.best_so_far == 0.7
    assert second.best_score == 0.6 and second.best_so_far == 0.7  # best so far is over every round
    assert second.extra == {"note": "second"} and not second.stopped
    assert second.candidates[0].candidate == "a raw payload"
    built = h.build()
    assert built.trials_completed == 4 and built.best_score == 0.7
    assert built.best_candidate is not None and built.best_candidate.id == "c1"
    assert not built.stopped and built.stop_reason is None


def test_minimize_objective() -> None:
    h = HistoryState(objective="minimize", clock=ticking())
    r = h.start_round()
    h.record_trial(r, score=3.0)
    h.record_trial(r, score=1.0)
    h.record_trial(r, score=2.0)
    rnd = h.end_round(r)
    assert rnd.best_score == 1.0 and rnd.best_so_far == 1.0


def test_stop_reason_on_end_round_and_finalize_stop() -> None:
    h = HistoryState(clock=ticking())
    r = h.start_round()
    h.record_trial(r, score=0.1)
    h.end_round(r)
    r = h.start_round()
    h.record_trial(r, score=0.2)
    h.end_round(r)
    h.finalize_stop("no_improvement")
    entries = h.get_entries()
    assert [e["stopped"] for e in entries] == [False, True]
    assert entries[-1]["stop_reason"] == "no_improvement"
    assert h.build().stop_reason == "no_improvement"

    h2 = HistoryState(clock=ticking())
    r = h2.start_round()
    h2.end_round(r, stop_reason="target_reached", best_score=0.9, best_candidate={"p": 1})
    h2.finalize_stop("max_iterations")  # the round's own reason is kept
    built = h2.build()
    assert built.rounds[-1].stop_reason == "target_reached" and built.stop_reason == "target_reached"
    assert built.best_score == 0.9
    assert built.best_candidate == HistoryCandidate(candidate={"p": 1}, score=0.9)


def test_state_refuses_misuse() -> None:
    h = HistoryState(clock=ticking())
    r = h.start_round(3)
    h.end_round(r)
    with pytest.raises(ValidationError):
        h.record_trial(r, score=1.0)
    with pytest.raises(ValidationError):
        h.end_round(r)
    with pytest.raises(ValidationError):
        h.start_round(2)
    assert h.start_round().round_index == 4
    h.finalize_stop()  # with no reason: stopped, reason unknown
    assert h.build().stopped


# -- from stored trials ---------------------------------------------------------------------------
SUMMARY = TrialSummary(
    total=2,
    passed=1,
    failed=1,
    pass_rate=0.5,
    total_cost=0.0,
    avg_latency_ms=1.0,
    avg_ttft_ms=None,
    total_tokens=9,
)


def stored_trials() -> tuple[list[Trial], list[Rejection]]:
    trials = [
        Trial(candidate_id="base", step_index=0, status="completed", objective_score=0.5, summary=SUMMARY),
        Trial(
            candidate_id="c1",
            step_index=1,
            status="completed",
            objective_score=0.8,
            parent_candidate_ids=("base",),
            config_hash="h1",
            configuration={"sections": {"a": "short"}},
            rationale="shorter",
            extra={"iteration": 1},
        ),
        Trial(candidate_id="c2", step_index=1, status="failed", objective_score=0.9, error="provider down"),
        Trial(
            candidate_id="c3",
            step_index=2,
            status="completed",
            objective_score=0.6,
            parent_candidate_ids=("c1",),
        ),
    ]
    rejections = [
        Rejection(step_index=1, reason_code="duplicate", config_hash="h0", message="same as base"),
        Rejection(step_index=3, reason_code="frozen_section", message="x"),
    ]
    return trials, rejections


def test_history_from_trials() -> None:
    trials, rejections = stored_trials()
    h = history_from_trials(trials, rejections, job_id="j", stop_reason="completed", clock=ticking())
    assert [r.round_index for r in h.rounds] == [0, 1, 2, 3]
    assert [r.extra["step_index"] for r in h.rounds] == [0, 1, 2, 3]
    assert [[t.trial_index for t in r.trials] for r in h.rounds] == [[0], [1, 2], [3], []]
    c1 = h.rounds[1].trials[0]
    assert c1.candidate.id == "c1" and c1.candidate.candidate == {"sections": {"a": "short"}}
    assert c1.candidate.extra["parents"] == ["base"] and c1.candidate.extra["iteration"] == 1
    assert c1.candidate.notes == "shorter"
    failed = h.rounds[1].trials[1]
    assert failed.score is None and failed.extra == {"status": "failed", "error": "provider down"}
    assert h.rounds[0].trials[0].metrics["pass_rate"] == 0.5
    assert [r.best_so_far for r in h.rounds] == [0.5, 0.8, 0.8, 0.8]  # a failed trial's score does not count
    assert h.rounds[1].best_candidate is not None and h.rounds[1].best_candidate.id == "c1"
    assert h.rounds[1].extra["rejections"] == [
        {
            "config_hash": "h0",
            "reason_code": "duplicate",
            "message": "same as base",
            "parent_candidate_ids": [],
        }
    ]
    assert [r.stopped for r in h.rounds] == [False, False, False, True]
    assert h.rounds[-1].stop_reason == "completed" and h.stop_reason == "completed"
    assert h.best_score == 0.8 and h.trials_completed == 4


def test_history_of_a_job_in_the_repository(repo: JobRepository) -> None:
    trials, rejections = stored_trials()
    repo.create("j", "optimize", "n", {"objective": "minimize", "dataset": {"name": "support"}})
    repo.upsert_trials("j", trials[:2])
    repo.upsert_trials("j", trials[2:])
    repo.add_rejections("j", rejections)
    running = repo.history("j")
    assert running.objective == "minimize" and not running.stopped and running.stop_reason is None
    assert [len(r.trials) for r in running.rounds] == [1, 2, 1, 0]
    assert running.rounds[0].trials[0].dataset == "support"
    assert running.best_score == 0.5  # minimize: lower is better among completed trials
    stamps = [t.timestamp for r in running.rounds for t in r.trials]
    assert all(s.tzinfo is not None for s in stamps)
    repo.finish("j", "completed", result={"stop_reason": "no_improvement"})
    done = repo.history("j")
    assert done.stopped and done.stop_reason == "no_improvement"
    assert done.rounds[-1].stop_reason == "no_improvement"


# -- CLI: history, report and jobs from the database alone ---------------------------------------
@pytest.fixture
def cli(
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    cli_runner: Callable[..., tuple[int, str, str]],
) -> Iterator[Callable[..., tuple[int, str, str]]]:
    """``optiflow`` in process, distributed settings whose Redis is unreachable: whatever answers
    comes from the database."""
    monkeypatch.setenv("OPTIFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPTIFLOW_DATABASE_URL", db_url)
    monkeypatch.setenv("OPTIFLOW_REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.delenv("OPTIFLOW_BROKER_URL", raising=False)
    monkeypatch.setenv("OPTIFLOW_STORE", "memory")

    yield cli_runner


def test_history_command(cli: Callable[..., tuple[int, str, str]], repo: JobRepository) -> None:
    trials, rejections = stored_trials()
    repo.create("j", "optimize", "n", {})
    repo.upsert_trials("j", trials)
    repo.add_rejections("j", rejections)
    repo.finish("j", "completed")
    code, out, err = cli("history", "j", "--format", "json")
    assert (code, err) == (0, "")
    data = json.loads(out)
    assert data["job_id"] == "j" and data["stop_reason"] == "completed" and data["best_score"] == 0.8
    assert [r["round_index"] for r in data["rounds"]] == [0, 1, 2, 3]
    code, out, _ = cli("history", "j")
    assert code == 0 and yaml.safe_load(out) == data
    code, _, err = cli("history", "nope")
    assert code == 2 and "error[not_found]" in err and "no job 'nope'" in err
    code, _, err = cli("history", "j", "--format", "xml")
    assert code != 0 and "xml" in err


def test_report_and_jobs_from_the_database_alone(
    cli: Callable[..., tuple[int, str, str]], repo: JobRepository
) -> None:
    from optiflow.core.compress.report import OptimizationReport
    from optiflow.core.result import OptimizeResult

    report = OptimizationReport(
        experiment_id="done", prompt_ns="support", prompt_key="bot", baseline_pass_rate=0.9
    )
    result = OptimizeResult(job_id="done", status="completed", report=report, completed_at=T0)
    repo.create("done", "compress", "finished one", {"kind": "compress"})
    repo.finish("done", "completed", result=result.model_dump(mode="json"))
    repo.create("q", "compress", "queued one", {"kind": "compress"})

    code, out, err = cli("report", "done")
    assert (code, err) == (0, "")
    assert "job done: completed" in out and "support/bot" in out and "90.0%" in out
    code, out, _ = cli("report", "done", "--json")
    assert code == 0 and json.loads(out)["report"]["baseline_pass_rate"] == 0.9

    code, out, _ = cli("jobs", "--status", "completed")
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == ["done"]
    code, out, _ = cli("jobs", "--status", "queued")
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == ["q"]
    code, out, _ = cli("jobs")
    assert code == 0 and sorted(line.split()[0] for line in out.splitlines()) == ["done", "q"]
    code, _, err = cli("jobs", "--status", "done")
    assert code == 2 and "error[validation_error]: status: unknown status 'done'" in err
