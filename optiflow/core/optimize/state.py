"""The optimize workflow's checkpoint: everything needed to continue from any step boundary.

It round-trips through ``model_dump(mode="json")`` / ``model_validate`` unchanged (configurations
are stored in canonical JSON form, times are timezone-aware), so the driver persists it after
every step and a resumed job continues with the same history.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from optiflow.core.base import Frozen
from optiflow.core.checkpoint import JobState
from optiflow.core.evaluation import TrialSummary
from optiflow.core.optimize.history import IterationRecord, TrialHistory
from optiflow.core.optimize.protocol import OptimizerState
from optiflow.core.optimize.termination import TerminationReason
from optiflow.core.optimize.trial import Candidate, TrialResult
from optiflow.core.records import Rejection

Phase = Literal["baseline", "propose", "trials", "test", "done"]


class TestOutcome(Frozen):
    candidate_id: str
    score: float | None
    summary: TrialSummary


class TestReport(Frozen):
    """The final evaluation on the held-out test split (seed 004 step 7)."""

    __test__ = False  # not a pytest class

    sample_ids: tuple[str, ...]
    baseline: TestOutcome
    best: TestOutcome


class OptimizeState(JobState):
    phase: Phase = "baseline"
    started_at: datetime
    iteration_started_at: datetime
    ended_at: datetime | None = None
    optimizer: OptimizerState | None = None
    candidates: tuple[Candidate, ...] = ()
    pending: tuple[str, ...] = ()
    trials: tuple[TrialResult, ...] = ()
    iterations: tuple[IterationRecord, ...] = ()
    rejections: tuple[Rejection, ...] = ()
    best_candidate_id: str | None = None
    proposal_tokens: int = 0
    proposal_cost: float = 0.0
    proposal_errors: tuple[str, ...] = ()
    termination: TerminationReason | None = None
    test: TestReport | None = None

    def candidate(self, candidate_id: str) -> Candidate:
        for c in self.candidates:
            if c.candidate_id == candidate_id:
                return c
        raise KeyError(candidate_id)

    def trial(self, candidate_id: str) -> TrialResult | None:
        return next((t for t in self.trials if t.candidate_id == candidate_id), None)

    @property
    def best_trial(self) -> TrialResult | None:
        return self.trial(self.best_candidate_id) if self.best_candidate_id else None

    def history(self) -> TrialHistory:
        """What optimizers and termination policies see: completed trials only."""
        return TrialHistory(
            started_at=self.started_at,
            trials=tuple(t for t in self.trials if t.completed),
            iterations=self.iterations,
            rejections=self.rejections,
        )


__all__ = ["OptimizeState", "Phase", "TestOutcome", "TestReport"]
