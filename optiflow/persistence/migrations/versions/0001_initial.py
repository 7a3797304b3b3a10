"""Jobs, dataset snapshots, trials, trial items, rejections, events.

A database made before migrations existed already has ``optiflow_jobs`` (created then by
``metadata.create_all`` with the same columns): it is kept as it is and the rest is added.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

ID = sa.String(64)
NAME = sa.String(200)
CODE = sa.String(64)
TIMESTAMP = sa.DateTime(timezone=True)
JSON = sa.JSON(none_as_null=True)


def _job_fk() -> sa.ForeignKey:
    return sa.ForeignKey("optiflow_jobs.id", ondelete="CASCADE")


def upgrade() -> None:
    if not sa.inspect(op.get_bind()).has_table("optiflow_jobs"):
        op.create_table(
            "optiflow_jobs",
            sa.Column("id", ID, primary_key=True),
            sa.Column("kind", sa.String(32), nullable=False),
            sa.Column("name", NAME, nullable=False),
            sa.Column("status", sa.String(16), nullable=False),
            sa.Column("spec", sa.Text, nullable=False),
            sa.Column("state", sa.Text),
            sa.Column("action", sa.Text),
            sa.Column("step_index", sa.Integer, nullable=False),
            sa.Column("result", sa.Text),
            sa.Column("error", sa.Text),
            sa.Column("created_at", TIMESTAMP, nullable=False),
            sa.Column("updated_at", TIMESTAMP, nullable=False),
            sa.Column("heartbeat", TIMESTAMP),
        )
        op.create_index("ix_optiflow_jobs_status", "optiflow_jobs", ["status"])
    op.create_table(
        "optiflow_dataset_items",
        sa.Column("job_id", ID, _job_fk(), primary_key=True),
        sa.Column("sample_id", NAME, primary_key=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("data", JSON, nullable=False),
    )
    op.create_table(
        "optiflow_trials",
        sa.Column("job_id", ID, _job_fk(), primary_key=True),
        sa.Column("candidate_id", NAME, primary_key=True),
        sa.Column("overrides_tag", NAME),
        sa.Column("step_index", sa.Integer, nullable=False),
        sa.Column("parent_candidate_ids", JSON, nullable=False),
        sa.Column("config_hash", CODE),
        sa.Column("configuration", JSON),
        sa.Column("rationale", sa.Text),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("objective_score", sa.Float),
        sa.Column("summary", JSON),
        sa.Column("extra", JSON, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
    )
    op.create_table(
        "optiflow_trial_items",
        sa.Column("job_id", ID, _job_fk(), primary_key=True),
        sa.Column("candidate_id", NAME, primary_key=True),
        sa.Column("sample_id", NAME, primary_key=True),
        sa.Column("run", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("output", sa.Text),
        sa.Column("score", sa.Float, nullable=False),
        sa.Column("passed", sa.Boolean, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("prompt_tokens", sa.Integer, nullable=False),
        sa.Column("completion_tokens", sa.Integer, nullable=False),
        sa.Column("cost", sa.Float, nullable=False),
        sa.Column("latency_ms", sa.Float, nullable=False),
        sa.Column("ttft_ms", sa.Float),
        sa.Column("error", sa.Text),
        sa.Column("cached", sa.Boolean, nullable=False),
        sa.Column("skipped", sa.Boolean, nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
    )
    op.create_table(
        "optiflow_rejections",
        sa.Column("job_id", ID, _job_fk(), primary_key=True),
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("step_index", sa.Integer, nullable=False),
        sa.Column("candidate_id", NAME),
        sa.Column("config_hash", CODE),
        sa.Column("reason_code", CODE, nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("extra", JSON, nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
    )
    op.create_table(
        "optiflow_events",
        sa.Column("job_id", ID, _job_fk(), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("type", CODE, nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.UniqueConstraint("job_id", "key", name="uq_optiflow_events_job_key"),
    )


def downgrade() -> None:
    for table in (
        "optiflow_events",
        "optiflow_rejections",
        "optiflow_trial_items",
        "optiflow_trials",
        "optiflow_dataset_items",
    ):
        op.drop_table(table)
    op.drop_index("ix_optiflow_jobs_status", table_name="optiflow_jobs")
    op.drop_table("optiflow_jobs")
