"""What a job replies with: the seed's ``OptimizeResult``, stored under the job id."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from optiflow.core.actions import Report
from optiflow.core.base import Frozen
from optiflow.errors import JobError

FinalStatus = Literal["completed", "failed", "cancelled"]


class OptimizeResult(Frozen):
    job_id: str
    kind: str = "compress"
    status: FinalStatus
    report: Report | None = None
    error: str | None = None
    completed_at: datetime

    @property
    def ok(self) -> bool:
        return self.status == "completed" and self.error is None

    def raise_for_error(self) -> OptimizeResult:
        """Return self when completed; raise JobError with the job's error otherwise."""
        if not self.ok:
            raise JobError(f"job {self.job_id} {self.status}: {self.error}", field="job")
        return self
