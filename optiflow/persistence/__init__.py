"""SQL persistence of jobs: spec, status, checkpoint, pending action, result."""

from optiflow.persistence.jobs import JobRecord, JobRepository, JobStatus

__all__ = ["JobRecord", "JobRepository", "JobStatus"]
