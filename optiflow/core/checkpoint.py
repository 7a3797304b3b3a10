"""What every job kind's checkpoint holds (pure): the step counter that guards against a
duplicate chord body, the job's cost so far (and its budget's spend, when it has a budget), and
the trial counts its progress events report."""

from __future__ import annotations

from pydantic import Field

from optiflow.core.base import Frozen
from optiflow.core.budget import BudgetReport
from optiflow.core.evaluation import JobStats


class JobState(Frozen):
    """What every kind's checkpoint holds besides its own fields."""

    job_id: str
    step_index: int = Field(default=0, ge=0)
    """Steps advanced so far; the next step's index."""
    stats: JobStats = Field(default_factory=JobStats)
    trials_completed: int = Field(default=0, ge=0)
    trials_failed: int = Field(default=0, ge=0)
    budget: BudgetReport | None = None
    """The job's budget and spend after its last step (a job with a budget)."""
