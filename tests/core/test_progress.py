"""Trials and events a step leaves behind (pure)."""

from __future__ import annotations

from optiflow.core.evaluation import EvalResult
from optiflow.core.experiment import Experiment
from optiflow.core.progress import (
    counts_after,
    progress_event,
    run_finished,
    status_changed,
    step_trials,
    trial_events,
)
from optiflow.core.step import EvalTarget, Step, StepResults


def target(eid: str, n: int) -> EvalTarget:
    return EvalTarget(
        experiment=Experiment(id=eid, name=f"name-{eid}", overrides_tag=f"opt-j-{eid}"),
        sample_ids=tuple(f"s{i}" for i in range(n)),
        runs=1,
    )


def result(
    eid: str, sid: str, *, passed: bool = True, error: str | None = None, skipped: bool = False
) -> EvalResult:
    return EvalResult(experiment_id=eid, sample_id=sid, run=0, passed=passed, error=error, skipped=skipped)


def test_one_trial_per_target_scored_by_pass_rate_failed_when_every_call_errored() -> None:
    step = Step(index=3, name="s", targets=(target("a", 2), target("b", 2), target("c", 2)))
    results = StepResults(
        step=step,
        evals=(
            result("a", "s0"),
            result("a", "s1", passed=False),
            result("b", "s0", error="boom"),
            result("b", "s1", error="boom"),
            result("c", "s0", passed=False),
            result("c", "s1", skipped=True),
        ),
    )
    a, b, c = step_trials(step, results)
    assert (a.candidate_id, a.status, a.objective_score, a.step_index) == ("a", "completed", 0.5, 3)
    assert a.overrides_tag == "opt-j-a" and a.extra["name"] == "name-a"
    assert (b.status, b.error) == ("failed", "boom")
    assert (c.status, c.objective_score, c.extra["skipped"]) == ("completed", 0.0, 1)
    events = trial_events([a, b, c])
    assert [e.key for e in events] == ["trial:a:completed", "trial:b:failed", "trial:c:completed"]
    assert events[0].payload["name"] == "name-a"


def test_counts_and_stable_keys() -> None:
    step = Step(index=1, name="s", targets=(target("a", 4), target("b", 4)))
    counts = counts_after(step, completed=1, failed=0, rejected=1, evaluations_done=4)
    assert (counts.proposed, counts.running, counts.completed, counts.rejected) == (3, 2, 1, 1)
    assert (counts.evaluations_done, counts.evaluations_total) == (4, 12)
    end = counts_after(None, completed=1, failed=0, rejected=1, evaluations_done=12)
    assert (end.running, end.evaluations_total) == (0, 12)
    assert progress_event(1, counts).key == "progress:1"
    assert status_changed("running").key == "status:running"
    assert status_changed("failed", error="x").payload == {"status": "failed", "error": "x"}
    assert run_finished("completed").key == "finished"
