"""The optimization history as optimizers and termination policies read it (seeds 001, 002, 003).

An *iteration* is one round (seed 002): the candidates proposed together and evaluated in one
step. Iteration 0 is the baseline. :class:`TrialHistory` carries the completed trials (seed 001:
"completed trials only"), every iteration record (with the running best, auto-stamped) and the
rejected proposals, so an optimizer can avoid proposing what was already tried.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from optiflow.core.base import Frozen
from optiflow.core.optimize.trial import TrialResult
from optiflow.core.records import Rejection

IterationStatus = Literal["success", "no_candidates", "failed", "budget_exhausted"]


class IterationRecord(Frozen):
    """One iteration: its trials, its best trial, and whether that became the new best.

    ``score`` is the iteration's best acceptance score (None when nothing was evaluated);
    ``best_so_far`` the accepted best's after the iteration. ``tokens`` / ``cost`` count every
    evaluation and model call the iteration made.
    """

    number: int = Field(ge=0)
    step_index: int | None = None
    candidate_ids: tuple[str, ...] = ()
    best_candidate_id: str | None = None
    score: float | None = None
    status: IterationStatus = "success"
    new_best: bool = False
    best_candidate_so_far: str
    best_so_far: float
    tokens: int = 0
    cost: float = 0.0
    started_at: datetime
    ended_at: datetime


class TrialHistory(Frozen):
    started_at: datetime
    trials: tuple[TrialResult, ...] = ()
    iterations: tuple[IterationRecord, ...] = ()
    rejections: tuple[Rejection, ...] = ()

    @property
    def iteration_count(self) -> int:
        return len(self.iterations)

    def last_iterations(self, n: int) -> tuple[IterationRecord, ...]:
        return self.iterations[-n:] if n > 0 else ()

    @property
    def best_iteration(self) -> IterationRecord | None:
        """The last iteration that produced a new best (iteration 0, the baseline, always does)."""
        return next((it for it in reversed(self.iterations) if it.new_best), None)

    @property
    def total_tokens(self) -> int:
        return sum(it.tokens for it in self.iterations)

    @property
    def total_cost(self) -> float:
        return sum(it.cost for it in self.iterations)

    def trial(self, candidate_id: str) -> TrialResult | None:
        return next((t for t in self.trials if t.candidate_id == candidate_id), None)

    @property
    def best_trial(self) -> TrialResult | None:
        best = self.best_iteration
        return self.trial(best.best_candidate_so_far) if best is not None else None

    def seen_hashes(self) -> frozenset[str]:
        """Config hashes evaluated or rejected so far (a proposal with one of these is wasted)."""
        return frozenset(
            {t.config_hash for t in self.trials} | {r.config_hash for r in self.rejections if r.config_hash}
        )


__all__ = ["IterationRecord", "IterationStatus", "TrialHistory"]
