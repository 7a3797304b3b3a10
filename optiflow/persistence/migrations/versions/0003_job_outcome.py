"""A finished job's outcome in a few words (``optiflow_jobs.outcome``), so listing jobs reads
summary columns only, never every job's spec and result (issue 27). Finished jobs get theirs from
their result, one row at a time. An index on ``created_at`` lets a list of the newest jobs visit
those rows only.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-27
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

from optiflow.core.outcome import outcome_of

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("optiflow_jobs") as batch:
        batch.add_column(sa.Column("outcome", sa.Text))
    op.create_index("ix_optiflow_jobs_created_at", "optiflow_jobs", ["created_at"])
    bind = op.get_bind()
    jobs = sa.table("optiflow_jobs", sa.column("id"), sa.column("result"), sa.column("outcome"))
    ids = [row[0] for row in bind.execute(sa.select(jobs.c.id).where(jobs.c.result.is_not(None)))]
    for job_id in ids:  # one result in memory at a time
        raw = bind.execute(sa.select(jobs.c.result).where(jobs.c.id == job_id)).scalar()
        try:
            found = outcome_of(json.loads(raw)) if raw else None
        except ValueError:
            found = None
        if found is not None:
            bind.execute(jobs.update().where(jobs.c.id == job_id).values(outcome=json.dumps(found)))


def downgrade() -> None:
    op.drop_index("ix_optiflow_jobs_created_at", "optiflow_jobs")
    with op.batch_alter_table("optiflow_jobs") as batch:
        batch.drop_column("outcome")
