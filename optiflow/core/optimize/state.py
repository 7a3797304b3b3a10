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
from optiflow.core.evaluation import EvalResult, TrialSummary
from optiflow.core.gate.outcomes import Outcomes
from optiflow.core.optimize.acceptance import Rule
from optiflow.core.optimize.history import IterationRecord, TrialHistory
from optiflow.core.optimize.protocol import OptimizerState
from optiflow.core.optimize.selection import SelectionFigures
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
    confirmation: SelectionFigures | None = None
    """The paired comparison of the best with the baseline on the test split (whatever rule
    selection used)."""
    confirmed: bool | None = None
    """Whether the held-out data confirm the gain: the paired interval's lower bound above 0 (a
    cost-type objective: the paired test accepts); None: the best is the baseline."""


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
    rule: Rule | None = None
    """The acceptance rule in force (``auto`` resolved after the baseline, then switched to
    ``paired`` if a reproduction flips) and why."""
    rule_reason: str = ""
    outcomes: dict[str, Outcomes] = {}
    """Paired rule: per-sample outcomes on the selection samples of the best and of the contenders
    racing (test phase: of the baseline and the best on the test samples, keyed ``test-<id>``)."""
    costs: dict[str, dict[str, list[float | None]]] = {}
    """Paired rule, cost-type objective: the cost metric of each run, per sample, like ``outcomes``."""
    racing: tuple[EvalResult, ...] = ()
    """Paired rule: the racing contenders' evaluations so far (outputs dropped), until the
    iteration closes."""
    race_round: int = 0
    reproducing: str | None = None
    """``auto``'s deterministic rule: the contender it would crown, run once more (with the best)
    on the selection samples before it is crowned; its iteration's evaluations wait in ``racing``."""
    rule_switched_at: int | None = None
    """The iteration at which a reproduction showed a sample flip and ``auto`` switched from the
    deterministic rule to the paired selection (that iteration and every later one)."""

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
