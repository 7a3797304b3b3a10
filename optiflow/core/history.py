"""A job's history in seed 002's normalized shape (pure).

:class:`HistoryState` records rounds of trials of candidates and stamps what every optimizer used
to wire by hand (round and trial indices, timestamps, ``best_so_far``, stop flags);
:func:`history_from_trials` builds the history of a job from its stored trials (one round per
step). Both produce a :class:`RoundHistory`, whose :meth:`~RoundHistory.entries` are the
normalized round dicts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pydantic import Field

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.optimize.scoring import Objective
from optiflow.core.records import Rejection, Trial
from optiflow.errors import ValidationError


class HistoryCandidate(Frozen):
    """Seed 002's ``OptimizerCandidate``: a stable ``id`` and the candidate payload (here a
    configuration: section bodies, model params), with lineage and origin in ``extra``."""

    id: str | None = None
    candidate: JSONValue = None
    score: float | None = None
    metrics: dict[str, JSONValue] = Field(default_factory=dict)
    notes: str | None = None
    extra: dict[str, JSONValue] = Field(default_factory=dict)


class HistoryTrial(Frozen):
    trial_index: int = Field(ge=0)
    score: float | None = None
    candidate: HistoryCandidate
    metrics: dict[str, JSONValue] = Field(default_factory=dict)
    dataset: str | None = None
    extra: dict[str, JSONValue] = Field(default_factory=dict)
    timestamp: datetime


class HistoryRound(Frozen):
    round_index: int = Field(ge=0)
    trials: tuple[HistoryTrial, ...] = ()
    candidates: tuple[HistoryCandidate, ...] = ()
    best_score: float | None = None
    best_candidate: HistoryCandidate | None = None
    stop_reason: str | None = None
    stopped: bool = False
    best_so_far: float | None = None
    timestamp: datetime
    extra: dict[str, JSONValue] = Field(default_factory=dict)


class RoundHistory(Frozen):
    job_id: str | None = None
    objective: Objective = Objective.MAXIMIZE
    rounds: tuple[HistoryRound, ...] = ()
    trials_completed: int = 0
    best_score: float | None = None
    best_candidate: HistoryCandidate | None = None
    stop_reason: str | None = None
    stopped: bool = False

    def entries(self) -> list[dict[str, JSONValue]]:
        """The normalized round dicts (seed 002's ``get_entries``), JSON-ready."""
        return [r.model_dump(mode="json") for r in self.rounds]


def build_candidate_entry(
    payload: JSONValue = None,
    *,
    score: float | None = None,
    id: str | None = None,  # the seed's name
    metrics: Mapping[str, JSONValue] | None = None,
    notes: str | None = None,
    extra: Mapping[str, JSONValue] | None = None,
) -> HistoryCandidate:
    """Seed 002's candidate helper: wrap any payload (a configuration, a prompt dump, params) as a
    normalized candidate; an already normalized one is returned with the given fields filled in."""
    if isinstance(payload, HistoryCandidate):
        update: dict[str, object] = {}
        if score is not None:
            update["score"] = score
        if id is not None:
            update["id"] = id
        if metrics:
            update["metrics"] = {**payload.metrics, **metrics}
        if notes is not None:
            update["notes"] = notes
        if extra:
            update["extra"] = {**payload.extra, **extra}
        return payload.model_copy(update=update) if update else payload
    return HistoryCandidate(
        id=id,
        candidate=payload,
        score=score,
        metrics=dict(metrics or {}),
        notes=notes,
        extra=dict(extra or {}),
    )


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class RoundHandle:
    """An open round: its trials are buffered until :meth:`HistoryState.end_round`."""

    round_index: int
    timestamp: datetime
    extra: dict[str, JSONValue]
    trials: list[HistoryTrial] = field(default_factory=list)
    candidates: list[HistoryCandidate] = field(default_factory=list)
    closed: bool = False


class HistoryState:
    """Seed 002's ``OptimizationHistoryState``: one per job, fed from one thread.

    ``start_round`` -> ``record_trial`` (once per candidate) -> ``end_round``, then
    ``finalize_stop`` once the job stops. Indices, timestamps (from ``clock`` unless given),
    ``best_so_far`` (under ``objective``) and stop flags are stamped here, never by the caller.
    """

    def __init__(
        self,
        *,
        job_id: str | None = None,
        objective: Objective = Objective.MAXIMIZE,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self.job_id = job_id
        self.objective: Objective = objective
        self._clock = clock
        self._rounds: list[HistoryRound] = []
        self._next_round = 0
        self._trials_completed = 0
        self._best_score: float | None = None
        self._best_candidate: HistoryCandidate | None = None
        self._stop_reason: str | None = None
        self._stopped = False

    # -- read -----------------------------------------------------------------------------------
    @property
    def trials_completed(self) -> int:
        return self._trials_completed

    @property
    def best_so_far(self) -> float | None:
        return self._best_score

    @property
    def best_candidate(self) -> HistoryCandidate | None:
        return self._best_candidate

    def better(self, score: float | None, than: float | None) -> bool:
        """``score`` beats ``than`` under the objective (anything beats no score)."""
        if score is None:
            return False
        if than is None:
            return True
        return score > than if self.objective == "maximize" else score < than

    # -- write ----------------------------------------------------------------------------------
    def start_round(
        self,
        round_index: int | None = None,
        extras: Mapping[str, JSONValue] | None = None,
        *,
        timestamp: datetime | None = None,
    ) -> RoundHandle:
        """Open a round; ``round_index`` defaults to the next one."""
        index = self._next_round if round_index is None else round_index
        if index < self._next_round:
            raise ValidationError(
                f"round {index} already started (next is {self._next_round})", field="round_index"
            )
        self._next_round = index + 1
        return RoundHandle(round_index=index, timestamp=timestamp or self._clock(), extra=dict(extras or {}))

    def record_trial(
        self,
        handle: RoundHandle,
        *,
        score: float | None,
        candidate: JSONValue = None,
        metrics: Mapping[str, JSONValue] | None = None,
        dataset: str | None = None,
        extras: Mapping[str, JSONValue] | None = None,
        candidates: Sequence[HistoryCandidate] | None = None,
        timestamp: datetime | None = None,
    ) -> HistoryTrial:
        """Record one candidate's result in an open round (``score`` None: no usable score)."""
        if handle.closed:
            raise ValidationError(f"round {handle.round_index} has ended", field="round")
        entry = build_candidate_entry(candidate, score=score)
        trial = HistoryTrial(
            trial_index=self._trials_completed,
            score=score,
            candidate=entry,
            metrics=dict(metrics or {}),
            dataset=dataset,
            extra=dict(extras or {}),
            timestamp=timestamp or self._clock(),
        )
        self._trials_completed += 1
        handle.trials.append(trial)
        handle.candidates.extend(candidates if candidates is not None else [entry])
        if self.better(score, self._best_score):
            self._best_score, self._best_candidate = score, entry
        return trial

    def end_round(
        self,
        handle: RoundHandle,
        *,
        best_score: float | None = None,
        best_candidate: JSONValue = None,
        stop_reason: str | None = None,
        extras: Mapping[str, JSONValue] | None = None,
        candidates: Sequence[HistoryCandidate] | None = None,
        timestamp: datetime | None = None,
    ) -> HistoryRound:
        """Close a round: its best (given, or the best of its trials), ``best_so_far``, stop
        flags. Returns the normalized round."""
        if handle.closed:
            raise ValidationError(f"round {handle.round_index} has ended", field="round")
        handle.closed = True
        best: HistoryCandidate | None = None
        if best_candidate is not None:
            best = build_candidate_entry(best_candidate, score=best_score)
        if best_score is None:
            top: HistoryTrial | None = None
            for t in handle.trials:
                if self.better(t.score, None if top is None else top.score):
                    top = t
            if top is not None:
                best_score, best = top.score, best or top.candidate
        elif best is None:
            best = next((t.candidate for t in handle.trials if t.score == best_score), None)
        if best_score is not None and self.better(best_score, self._best_score):
            self._best_score, self._best_candidate = best_score, best
        rnd = HistoryRound(
            round_index=handle.round_index,
            trials=tuple(handle.trials),
            candidates=tuple(candidates if candidates is not None else handle.candidates),
            best_score=best_score,
            best_candidate=best,
            stop_reason=stop_reason,
            stopped=stop_reason is not None,
            best_so_far=self._best_score,
            timestamp=timestamp or self._clock(),
            extra={**handle.extra, **(extras or {})},
        )
        self._rounds.append(rnd)
        self._rounds.sort(key=lambda r: r.round_index)
        if stop_reason is not None:
            self._stop_reason, self._stopped = stop_reason, True
        return rnd

    def finalize_stop(self, stop_reason: str | None = None) -> None:
        """The run stopped: stamp ``stop_reason`` on the last round (unless it has one)."""
        reason = self._stop_reason or stop_reason
        self._stopped = True
        self._stop_reason = reason
        if self._rounds:
            last = self._rounds[-1]
            if last.stop_reason is None or not last.stopped:
                self._rounds[-1] = last.model_copy(
                    update={"stop_reason": last.stop_reason or reason, "stopped": True}
                )

    def build(self) -> RoundHistory:
        return RoundHistory(
            job_id=self.job_id,
            objective=self.objective,
            rounds=tuple(self._rounds),
            trials_completed=self._trials_completed,
            best_score=self._best_score,
            best_candidate=self._best_candidate,
            stop_reason=self._stop_reason,
            stopped=self._stopped,
        )

    def get_entries(self) -> list[dict[str, JSONValue]]:
        return self.build().entries()


# -- from stored trials ---------------------------------------------------------------------------
def _candidate_of(t: Trial) -> HistoryCandidate:
    extra: dict[str, JSONValue] = {**t.extra, "parents": list(t.parent_candidate_ids), "status": t.status}
    if t.config_hash is not None:
        extra["config_hash"] = t.config_hash
    if t.overrides_tag is not None:
        extra["overrides_tag"] = t.overrides_tag
    metrics: dict[str, JSONValue] = t.summary.model_dump(mode="json") if t.summary else {}
    return HistoryCandidate(
        id=t.candidate_id,
        candidate=t.configuration,
        score=t.objective_score if t.status == "completed" else None,
        metrics=metrics,
        notes=t.rationale,
        extra=extra,
    )


def _stamps(values: Iterable[datetime | None]) -> list[datetime]:
    return [v for v in values if v is not None]


def history_from_trials(
    trials: Sequence[Trial],
    rejections: Sequence[Rejection] = (),
    *,
    job_id: str | None = None,
    objective: Objective = Objective.MAXIMIZE,
    stop_reason: str | None = None,
    dataset: str | None = None,
    clock: Callable[[], datetime] = _utcnow,
) -> RoundHistory:
    """A job's history from its stored trials: one round per step (in step order, trials in the
    given order), a trial's score its ``objective_score`` when it completed, the step's
    rejections in the round's ``extra``; ``stop_reason`` (given when the job has stopped) is
    stamped on the last round."""
    state = HistoryState(job_id=job_id, objective=objective, clock=clock)
    steps = sorted({t.step_index for t in trials} | {r.step_index for r in rejections})
    for step in steps:
        in_step = [t for t in trials if t.step_index == step]
        refused = [r for r in rejections if r.step_index == step]
        started = _stamps([*(t.created_at for t in in_step), *(r.created_at for r in refused)])
        handle = state.start_round(extras={"step_index": step}, timestamp=min(started, default=None))
        for t in in_step:
            entry = _candidate_of(t)
            extras: dict[str, JSONValue] = {"status": t.status}
            if t.error is not None:
                extras["error"] = t.error
            state.record_trial(
                handle,
                score=entry.score,
                candidate=entry,
                metrics=entry.metrics,
                dataset=dataset,
                extras=extras,
                timestamp=t.updated_at or t.created_at,
            )
        extra: dict[str, JSONValue] = {}
        if refused:
            extra["rejections"] = [
                r.model_dump(mode="json", exclude={"key", "created_at", "step_index"}, exclude_none=True)
                for r in refused
            ]
        ended = _stamps([*(t.updated_at or t.created_at for t in in_step), *(r.created_at for r in refused)])
        state.end_round(handle, extras=extra, timestamp=max(ended, default=None))
    if stop_reason is not None:
        state.finalize_stop(stop_reason)
    return state.build()


__all__ = [
    "HistoryCandidate",
    "HistoryRound",
    "HistoryState",
    "HistoryTrial",
    "RoundHandle",
    "RoundHistory",
    "build_candidate_entry",
    "history_from_trials",
]
