"""SQL persistence of jobs: spec, status, checkpoint, pending action, result, and what a job
produces (dataset snapshot, trials, trial items, rejections, events), behind Alembic migrations."""

from optiflow.persistence.jobs import (
    JOB_STATUSES,
    JobRecord,
    JobRepository,
    JobStatus,
    JobSummary,
    Recorded,
)
from optiflow.persistence.migrate import (
    DatabaseNotMigratedError,
    current_revision,
    ensure_migrated,
    upgrade,
)

__all__ = [
    "JOB_STATUSES",
    "DatabaseNotMigratedError",
    "JobRecord",
    "JobRepository",
    "JobStatus",
    "JobSummary",
    "Recorded",
    "current_revision",
    "ensure_migrated",
    "upgrade",
]
