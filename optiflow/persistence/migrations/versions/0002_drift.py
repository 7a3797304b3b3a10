"""Drift references and the nights compared with them (issue 30).

``optiflow_drift_references``: one measure of a tag as it was accepted (``data``: the reference's
identity digests, per-sample outcomes, runs, source), keyed by prompt (ns, key), tag and ``config``
(the digest of model, dataset and check); ``superseded_at`` is set when a newer reference of the
same key replaces it. ``optiflow_drift_nights``: each later measure compared with a reference, in
order (``night`` 1, 2, ...), with its outcomes and decision in ``data``; one row per job.

Revision ID: 0002
Revises: 0001
Create Date: 2025-06-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None

ID = sa.String(64)
NAME = sa.String(200)
CODE = sa.String(64)
TIMESTAMP = sa.DateTime(timezone=True)
JSON = sa.JSON(none_as_null=True)


def upgrade() -> None:
    op.create_table(
        "optiflow_drift_references",
        sa.Column("id", ID, primary_key=True),
        sa.Column("ns", sa.String(128), nullable=False),
        sa.Column("key", sa.String(128), nullable=False),
        sa.Column("tag", NAME, nullable=False),
        sa.Column("config", CODE, nullable=False),
        sa.Column("job_id", ID, nullable=False, unique=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("superseded_at", TIMESTAMP),
        sa.Column("data", JSON, nullable=False),
    )
    op.create_index(
        "ix_optiflow_drift_references_prompt", "optiflow_drift_references", ["ns", "key", "tag", "config"]
    )
    op.create_table(
        "optiflow_drift_nights",
        sa.Column(
            "reference_id",
            ID,
            sa.ForeignKey("optiflow_drift_references.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("night", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("job_id", ID, nullable=False, unique=True),
        sa.Column("measured_at", TIMESTAMP, nullable=False),
        sa.Column("data", JSON, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("optiflow_drift_nights")
    op.drop_index("ix_optiflow_drift_references_prompt", table_name="optiflow_drift_references")
    op.drop_table("optiflow_drift_references")
