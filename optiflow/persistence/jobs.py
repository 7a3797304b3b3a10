"""The jobs table and a repository that speaks core models, never ORM rows.

A job row holds its spec (immutable after submission), its status, the workflow's checkpoint
and the pending action (both written in one transaction by each ``advance``), the index of the
step in flight (the compare-and-set guard that makes a duplicate chord body harmless), and the
final result or error.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.result import FinalStatus
from optiflow.errors import NotFoundError, StoreError

JobStatus = Literal["queued", "running", FinalStatus]
FINISHED: frozenset[str] = frozenset({"completed", "failed", "cancelled"})

metadata = sa.MetaData()
jobs_table = sa.Table(
    "optiflow_jobs",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("spec", sa.Text, nullable=False),
    sa.Column("state", sa.Text),
    sa.Column("action", sa.Text),
    sa.Column("step_index", sa.Integer, nullable=False, default=0),
    sa.Column("result", sa.Text),
    sa.Column("error", sa.Text),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("heartbeat", sa.DateTime(timezone=True)),
)


class JobRecord(Frozen):
    id: str
    kind: str
    name: str
    status: JobStatus
    spec: dict[str, JSONValue]
    state: dict[str, JSONValue] | None = None
    action: dict[str, JSONValue] | None = None
    step_index: int = 0
    result: dict[str, JSONValue] | None = None
    error: str | None = None
    created_at: datetime
    updated_at: datetime

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


def _now() -> datetime:
    return datetime.now(UTC)


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))


class JobRepository:
    """Jobs in any SQLAlchemy database (SQLite by default, PostgreSQL in production)."""

    _engines: dict[str, Engine] = {}
    _lock = threading.Lock()

    def __init__(self, url: str) -> None:
        self.url = url
        with self._lock:
            engine = self._engines.get(url)
            if engine is None:
                engine = _make_engine(url)
                metadata.create_all(engine)
                self._engines[url] = engine
        self.engine = engine

    def create(self, job_id: str, kind: str, name: str, spec: dict[str, JSONValue]) -> JobRecord:
        now = _now()
        with self.engine.begin() as conn:
            conn.execute(
                jobs_table.insert().values(
                    id=job_id,
                    kind=kind,
                    name=name,
                    status="queued",
                    spec=_dump(spec),
                    step_index=0,
                    created_at=now,
                    updated_at=now,
                )
            )
        return self.get(job_id)

    def get(self, job_id: str) -> JobRecord:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(jobs_table).where(jobs_table.c.id == job_id)).mappings().first()
        if row is None:
            raise NotFoundError(f"no job {job_id!r}", field="job")
        return _record(row)

    def list(self, status: str | None = None, limit: int = 100) -> list[JobRecord]:
        q = sa.select(jobs_table).order_by(jobs_table.c.created_at.desc()).limit(limit)
        if status:
            q = q.where(jobs_table.c.status == status)
        with self.engine.connect() as conn:
            return [_record(r) for r in conn.execute(q).mappings()]

    def save_step(
        self,
        job_id: str,
        *,
        expected_step: int | None,
        step_index: int,
        state: dict[str, JSONValue],
        action: dict[str, JSONValue] | None,
        status: JobStatus = "running",
        expected_status: JobStatus | None = None,
    ) -> bool:
        """Write checkpoint and pending action in one transaction, only if the job is still at
        ``expected_step`` and not finished. False means another delivery got there first."""
        q = jobs_table.update().where(
            jobs_table.c.id == job_id, jobs_table.c.status.in_(("queued", "running"))
        )
        if expected_step is not None:
            q = q.where(jobs_table.c.step_index == expected_step)
        if expected_status is not None:
            q = q.where(jobs_table.c.status == expected_status)
        now = _now()
        with self.engine.begin() as conn:
            res = conn.execute(
                q.values(
                    state=_dump(state),
                    action=_dump(action),
                    step_index=step_index,
                    status=status,
                    updated_at=now,
                    heartbeat=now,
                )
            )
        return bool(res.rowcount)

    def finish(
        self,
        job_id: str,
        status: JobStatus,
        *,
        result: dict[str, JSONValue] | None = None,
        error: str | None = None,
        only_from: tuple[JobStatus, ...] = ("queued", "running"),
    ) -> bool:
        """Mark a job finished if its status is one of ``only_from``; False otherwise (the first
        writer wins)."""
        with self.engine.begin() as conn:
            res = conn.execute(
                jobs_table.update()
                .where(jobs_table.c.id == job_id, jobs_table.c.status.in_(only_from))
                .values(status=status, result=_dump(result), error=error, action=None, updated_at=_now())
            )
        return bool(res.rowcount)


def _make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        return engine
    try:
        return sa.create_engine(url, pool_pre_ping=True)
    except Exception as exc:
        raise StoreError(f"cannot open database {url!r}: {exc}", field="OPTIFLOW_DATABASE_URL") from exc


def _record(row: Any) -> JobRecord:
    def load(v: str | None) -> Any:
        return None if v is None else json.loads(v)

    return JobRecord(
        id=row["id"],
        kind=row["kind"],
        name=row["name"],
        status=row["status"],
        spec=load(row["spec"]),
        state=load(row["state"]),
        action=load(row["action"]),
        step_index=row["step_index"],
        result=load(row["result"]),
        error=row["error"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )
