"""What a finished step leaves behind, as records and events (pure).

The driver calls these after each step and stores the result in the same transaction as the
new checkpoint, so an event is never emitted for a state that was not committed. Every event has
a stable key: a redelivered ``advance`` that somehow got past the step guard, or a retried
write, stores nothing twice, and a consumer can drop repeats by key.

Keys: ``status:<status>``, ``progress:<steps done>`` (0 at the start, then one per step),
``trial:<candidate>:<status>``, ``best:<candidate>``, ``finished``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.evaluation import EvalResult, trial_summary
from optiflow.core.records import (
    BEST_CANDIDATE_CHANGED,
    PROGRESS_CHANGED,
    RUN_FINISHED,
    RUN_STATUS_CHANGED,
    TRIAL_ADDED_OR_UPDATED,
    Event,
    Trial,
)
from optiflow.core.step import Step, StepResults


class Counts(Frozen):
    """Trials by state, and evaluations done / known so far (the total grows as steps are
    decided: a workflow does not know its later steps in advance)."""

    proposed: int = 0
    running: int = 0
    completed: int = 0
    failed: int = 0
    rejected: int = 0
    evaluations_done: int = 0
    evaluations_total: int = 0


def status_changed(status: str, *, error: str | None = None) -> Event:
    payload: dict[str, JSONValue] = {"status": status}
    if error:
        payload["error"] = error
    return Event(type=RUN_STATUS_CHANGED, key=f"status:{status}", payload=payload)


def run_finished(
    status: str, *, error: str | None = None, result: dict[str, JSONValue] | None = None
) -> Event:
    payload: dict[str, JSONValue] = {"status": status, "error": error}
    if result is not None:
        payload["result"] = result
    return Event(type=RUN_FINISHED, key="finished", payload=payload)


def step_trials(step: Step, results: StepResults) -> list[Trial]:
    """One completed trial per experiment of the step (its first target names it), scored by its
    pass rate."""
    by_experiment: dict[str, list[EvalResult]] = defaultdict(list)
    for r in results.evals:
        by_experiment[r.experiment_id].append(r)
    trials = []
    firsts = {t.experiment.id: t for t in reversed(step.targets)}
    for target in [t for t in step.targets if firsts[t.experiment.id] is t]:
        evals = by_experiment.get(target.experiment.id, [])
        summary = trial_summary(evals)
        errors = [r.error for r in evals if r.error]
        made = [r for r in evals if not r.skipped]
        status = "failed" if made and len(errors) == len(made) else "completed"
        trials.append(
            Trial(
                candidate_id=target.experiment.id,
                step_index=step.index,
                status=status,
                overrides_tag=target.experiment.overrides_tag,
                parent_candidate_ids=(target.experiment.parent_tag,) if target.experiment.parent_tag else (),
                configuration={
                    "sections": {".".join(o.path): o.body for o in target.overrides},
                    "model_params": dict(target.model_params),
                },
                objective_score=summary.pass_rate if made else None,
                summary=summary,
                error=errors[0] if status == "failed" else None,
                extra={
                    "name": target.experiment.name,
                    "skipped": sum(1 for r in evals if r.skipped),
                    "cached": sum(1 for r in evals if r.cached),
                },
            )
        )
    return trials


TRIAL_FACTS = (
    "round",
    "evaluated_samples",
    "samples",
    "verdict",
    "reason",
    "gate",
    "drop",
    "drop_high",
    "gain",
    "gain_low",
    "gain_high",
    "pairs",
)
"""What a trial's ``extra`` may tell a watcher besides its score (a gated set's reading)."""


def trial_events(trials: Iterable[Trial]) -> list[Event]:
    """One event per trial; a trial evaluated over several rounds (a gate's) has one per round."""
    return [
        Event(
            type=TRIAL_ADDED_OR_UPDATED,
            key=f"trial:{t.candidate_id}:{t.status}" + (f":{t.extra['round']}" if "round" in t.extra else ""),
            payload={
                "candidate_id": t.candidate_id,
                "name": t.extra.get("name", t.candidate_id),
                "status": t.status,
                "step_index": t.step_index,
                "objective_score": t.objective_score,
                "pass_rate": t.summary.pass_rate if t.summary else None,
                **{k: t.extra[k] for k in TRIAL_FACTS if k in t.extra},
            },
        )
        for t in trials
    ]


def best_changed(candidate_id: str, score: float | None, *, step_index: int) -> Event:
    return Event(
        type=BEST_CANDIDATE_CHANGED,
        key=f"best:{candidate_id}",
        payload={"candidate_id": candidate_id, "score": score, "step_index": step_index},
    )


ITERATION_RECORDED = "iteration_recorded"


def iteration_event(number: int, line: str, *, score: float | None, new_best: bool) -> Event:
    """An optimize iteration closed; ``line`` is its seed-003 progress line."""
    return Event(
        type=ITERATION_RECORDED,
        key=f"iteration:{number}",
        payload={"iteration": number, "line": line, "score": score, "new_best": new_best},
    )


def progress_event(steps_done: int, counts: Counts) -> Event:
    """The counts once ``steps_done`` steps have completed (0: the job just started)."""
    return Event(type=PROGRESS_CHANGED, key=f"progress:{steps_done}", payload=counts.model_dump(mode="json"))


def counts_after(
    next_step: Step | None, *, completed: int, failed: int, rejected: int, evaluations_done: int
) -> Counts:
    """Counts once a step is committed: ``completed`` / ``failed`` trials so far, the next step's
    targets running (None: the job ends)."""
    running = len(next_step.targets) if next_step is not None else 0
    upcoming = sum(t.size for t in next_step.targets) if next_step is not None else 0
    return Counts(
        proposed=completed + failed + running,
        running=running,
        completed=completed,
        failed=failed,
        rejected=rejected,
        evaluations_done=evaluations_done,
        evaluations_total=evaluations_done + upcoming,
    )
