"""The SQL schema of jobs and what they produce (seed 001's model, adapted).

``optiflow_jobs``           one row per job: spec, status, checkpoint (``state``), pending action,
                            step index (the compare-and-set guard), result, error, heartbeat
``optiflow_dataset_items``  the job's dataset as it was at submission (one row per sample)
``optiflow_trials``         one candidate's evaluation, keyed ``(job_id, candidate_id)``
``optiflow_trial_items``    one (sample, run) of a trial, keyed ``(job_id, candidate_id, sample_id,
                            run)``; it may be written before its trial row (an evaluation stores
                            its full output when it ends), so there is no foreign key to trials
``optiflow_rejections``     proposals refused before evaluation, with a ``reason_code``
``optiflow_events``         what a consumer replays: per-job ``seq`` and a stable dedupe ``key``
``optiflow_drift_references`` a measure of a tag as accepted (per-sample outcomes), keyed by
                            prompt, tag and the digest of model, dataset and check
``optiflow_drift_nights``   each later measure compared with a reference, and its decision

The tables are created and changed only by the Alembic migrations in
:mod:`optiflow.persistence.migrations`; a test checks that this module and the migrations agree.
JSON of the jobs table is kept as text (the columns predate the migrations); the other tables use
the JSON type.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

ID = sa.String(64)  # job ids
NAME = sa.String(200)  # candidate ids, sample ids, tags
CODE = sa.String(64)  # status, reason codes, event types
TIMESTAMP = sa.DateTime(timezone=True)
JSON = sa.JSON(none_as_null=True)


def _job_fk() -> sa.ForeignKey:
    return sa.ForeignKey("optiflow_jobs.id", name=None, ondelete="CASCADE")


jobs_table = sa.Table(
    "optiflow_jobs",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("name", NAME, nullable=False),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("spec", sa.Text, nullable=False),
    sa.Column("state", sa.Text),
    sa.Column("action", sa.Text),
    sa.Column("step_index", sa.Integer, nullable=False, default=0),
    sa.Column("result", sa.Text),
    sa.Column("error", sa.Text),
    sa.Column("outcome", sa.Text),  # the finished job's outcome in a few words (core.outcome), JSON
    sa.Column("created_at", TIMESTAMP, nullable=False, index=True),  # lists: the newest first
    sa.Column("updated_at", TIMESTAMP, nullable=False),
    sa.Column("heartbeat", TIMESTAMP),
)

dataset_items_table = sa.Table(
    "optiflow_dataset_items",
    metadata,
    sa.Column("job_id", ID, _job_fk(), primary_key=True),
    sa.Column("sample_id", NAME, primary_key=True),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("data", JSON, nullable=False),
)

trials_table = sa.Table(
    "optiflow_trials",
    metadata,
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

trial_items_table = sa.Table(
    "optiflow_trial_items",
    metadata,
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

rejections_table = sa.Table(
    "optiflow_rejections",
    metadata,
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

events_table = sa.Table(
    "optiflow_events",
    metadata,
    sa.Column("job_id", ID, _job_fk(), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("type", CODE, nullable=False),
    sa.Column("key", sa.String(255), nullable=False),
    sa.Column("payload", JSON, nullable=False),
    sa.Column("created_at", TIMESTAMP, nullable=False),
    sa.UniqueConstraint("job_id", "key", name="uq_optiflow_events_job_key"),
)

drift_references_table = sa.Table(
    "optiflow_drift_references",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("ns", sa.String(128), nullable=False),
    sa.Column("key", sa.String(128), nullable=False),
    sa.Column("tag", NAME, nullable=False),
    sa.Column("config", CODE, nullable=False),
    sa.Column("job_id", ID, nullable=False, unique=True),
    sa.Column("created_at", TIMESTAMP, nullable=False),
    sa.Column("superseded_at", TIMESTAMP),
    sa.Column("data", JSON, nullable=False),
    sa.Index("ix_optiflow_drift_references_prompt", "ns", "key", "tag", "config"),
)

drift_nights_table = sa.Table(
    "optiflow_drift_nights",
    metadata,
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

__all__ = [
    "dataset_items_table",
    "drift_nights_table",
    "drift_references_table",
    "events_table",
    "jobs_table",
    "metadata",
    "rejections_table",
    "trial_items_table",
    "trials_table",
]
