"""The job repository: jobs and what they produce, in core models in and out, never ORM rows.

A job row holds its spec (immutable after submission), its status, the workflow's checkpoint
and the pending action, the index of the step in flight (the compare-and-set guard that makes a
duplicate chord body harmless), a heartbeat, and the final result or error.

:meth:`JobRepository.record_step` writes a step's trials, trial items, rejections and events
together with the new checkpoint in ONE transaction, only if the job is still at the expected
step: a duplicate delivery writes nothing. Trials are upserted by ``(job, candidate)``, trial
items by ``(job, candidate, sample, run)``, so writing the same thing twice leaves one row.
Events get a per-job ``seq`` (1, 2, ...) and are stored once per ``key``.

The schema comes from the Alembic migrations (:mod:`optiflow.persistence.migrate`). A repository
on SQLite upgrades its database itself (the embedded default needs no setup step); on any other
database it checks the revision and refuses with ``db_not_migrated`` until ``optiflow db upgrade``
has run. ``auto_migrate`` overrides either choice.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, get_args

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine, RowMapping

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.dataset import Sample
from optiflow.core.evaluation import EvalResult, TrialSummary
from optiflow.core.history import RoundHistory, history_from_trials
from optiflow.core.optimize.scoring import Objective
from optiflow.core.outcome import outcome_of
from optiflow.core.records import Event, Rejection, Trial
from optiflow.core.result import FinalStatus
from optiflow.errors import NotFoundError, StoreError, ValidationError
from optiflow.persistence.engine import make_engine, writing
from optiflow.persistence.migrate import check_revision, revision_of, upgrade_engine
from optiflow.persistence.tables import (
    dataset_items_table,
    events_table,
    jobs_table,
    metadata,
    rejections_table,
    trial_items_table,
    trials_table,
)

JobStatus = Literal["queued", "running", FinalStatus]
JOB_STATUSES: tuple[str, ...] = ("queued", "running", *get_args(FinalStatus))
FINISHED: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
UNFINISHED: tuple[JobStatus, ...] = ("queued", "running")


class JobSummary(Frozen):
    """A job as a list shows it: its summary columns, never its spec, checkpoint or result."""

    id: str
    kind: str
    name: str
    status: JobStatus
    step_index: int = 0
    error: str | None = None
    outcome: dict[str, JSONValue] | None = None
    created_at: datetime
    updated_at: datetime


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
    heartbeat: datetime | None = None

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


class Recorded(Frozen):
    """What a write did: ``won`` (also its truth value) is False when its guard failed — another
    delivery had already moved the job on, or another writer ended it first — and then nothing
    was written; ``events`` are the events stored by this call, with their ``seq`` (a repeated
    key is not among them); ``record`` is the job row as written, where the write makes one
    (``create``, ``finish``)."""

    won: bool
    events: tuple[Event, ...] = ()
    record: JobRecord | None = None

    def __bool__(self) -> bool:
        return self.won


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime | None) -> datetime | None:
    """SQLite gives timestamps back without their zone; every one we write is UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))


def _load(value: str | None) -> Any:
    return None if value is None else json.loads(value)


def _is_sqlite(url: str) -> bool:
    return url.split(":", 1)[0].split("+", 1)[0] == "sqlite"


class JobRepository:
    """Jobs in any SQLAlchemy database (SQLite by default, PostgreSQL in production).

    ``auto_migrate``: None (default) upgrades SQLite databases and only checks others; True
    always upgrades; False only checks (:class:`~optiflow.persistence.migrate.
    DatabaseNotMigratedError` when the schema is not at head). The repository owns its engine
    (one per repository; a process keeps one repository per database, in its runtime):
    :meth:`close` disposes of it, :meth:`after_fork` drops connections a forked child inherited.
    """

    def __init__(self, url: str, *, auto_migrate: bool | None = None) -> None:
        self.url = url
        migrate = _is_sqlite(url) if auto_migrate is None else auto_migrate
        self.engine: Engine = make_engine(url)
        try:
            if migrate:
                upgrade_engine(self.engine)
            else:
                check_revision(url, revision_of(self.engine))
        except BaseException:
            self.engine.dispose()
            raise

    def close(self) -> None:
        """Close the pooled connections (tests, short-lived CLIs)."""
        self.engine.dispose()

    def after_fork(self) -> None:
        """In a forked child: forget the parent's pooled connections without closing them (the
        parent still uses them); the child opens its own."""
        self.engine.dispose(close=False)

    # -- jobs -----------------------------------------------------------------------------------
    def create(
        self,
        job_id: str,
        kind: str,
        name: str,
        spec: dict[str, JSONValue],
        *,
        dataset: Sequence[Sample] = (),
        events: Sequence[Event] = (),
    ) -> Recorded:
        """Insert a queued job, with its dataset snapshot and first events, in one transaction."""
        now = _now()
        row = {
            "id": job_id,
            "kind": kind,
            "name": name,
            "status": "queued",
            "spec": _dump(spec),
            "step_index": 0,
            "created_at": now,
            "updated_at": now,
        }
        with writing(self.engine) as conn:
            conn.execute(jobs_table.insert().values(**row))
            _snapshot(conn, job_id, dataset)
            stored = _append_events(conn, job_id, events, now)
        record = JobRecord(
            id=job_id, kind=kind, name=name, status="queued", spec=spec, created_at=now, updated_at=now
        )
        return Recorded(won=True, events=tuple(stored), record=record)

    def get(self, job_id: str) -> JobRecord:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(jobs_table).where(jobs_table.c.id == job_id)).mappings().first()
        if row is None:
            raise NotFoundError(f"no job {job_id!r}", field="job")
        return _record(row)

    def list(
        self, status: str | Sequence[str] | None = None, limit: int = 100, *, kind: str | None = None
    ) -> builtins.list[JobRecord]:
        """Most recent first; ``status`` one status or several."""
        q = _filtered(sa.select(jobs_table), status, kind).limit(limit)
        with self.engine.connect() as conn:
            return [_record(r) for r in conn.execute(q).mappings()]

    def summaries(
        self, status: str | Sequence[str] | None = None, limit: int = 100, *, kind: str | None = None
    ) -> builtins.list[JobSummary]:
        """Most recent first, as :meth:`list`, reading the summary columns only (a job's spec and
        result can be megabytes)."""
        c = jobs_table.c
        columns = (
            c.id,
            c.kind,
            c.name,
            c.status,
            c.step_index,
            c.error,
            c.outcome,
            c.created_at,
            c.updated_at,
        )
        q = _filtered(sa.select(*columns), status, kind).limit(limit)
        with self.engine.connect() as conn:
            return [
                JobSummary(
                    id=r["id"],
                    kind=r["kind"],
                    name=r["name"],
                    status=r["status"],
                    step_index=r["step_index"],
                    error=r["error"],
                    outcome=_load(r["outcome"]),
                    created_at=_aware(r["created_at"]),
                    updated_at=_aware(r["updated_at"]),
                )
                for r in conn.execute(q).mappings()
            ]

    def record_step(
        self,
        job_id: str,
        *,
        expected_step: int | None,
        new_step: int,
        state: dict[str, JSONValue],
        action: dict[str, JSONValue] | None,
        status: JobStatus = "running",
        expected_status: JobStatus | None = None,
        trials: Sequence[Trial] = (),
        items: Sequence[EvalResult] = (),
        rejections: Sequence[Rejection] = (),
        events: Sequence[Event] = (),
    ) -> Recorded:
        """One step's outcome and the new checkpoint, in one transaction.

        The job row is updated only if the job is unfinished, at ``expected_step`` (None: any)
        and, when given, in ``expected_status``; then trials and items are upserted, rejections
        and events added. If the guard fails nothing at all is written and the result is falsy.
        """
        q = jobs_table.update().where(jobs_table.c.id == job_id, jobs_table.c.status.in_(UNFINISHED))
        if expected_step is not None:
            q = q.where(jobs_table.c.step_index == expected_step)
        if expected_status is not None:
            q = q.where(jobs_table.c.status == expected_status)
        now = _now()
        with writing(self.engine) as conn:
            # first statement: the job row is locked until commit (serializes event seqs)
            res = conn.execute(
                q.values(
                    state=_dump(state),
                    action=_dump(action),
                    step_index=new_step,
                    status=status,
                    updated_at=now,
                    heartbeat=now,
                )
            )
            if not res.rowcount:
                return Recorded(won=False)
            _upsert_trials(conn, job_id, trials, now)
            _upsert_items(conn, job_id, items, now)
            _add_rejections(conn, job_id, rejections, now)
            stored = _append_events(conn, job_id, events, now)
        return Recorded(won=True, events=tuple(stored))

    def finish(
        self,
        job_id: str,
        status: JobStatus,
        *,
        result: dict[str, JSONValue] | None = None,
        error: str | None = None,
        only_from: tuple[JobStatus, ...] = UNFINISHED,
        events: Sequence[Event] = (),
    ) -> Recorded:
        """Mark a job finished if its status is one of ``only_from``; nothing is written otherwise
        (the first writer wins). ``events`` (e.g. ``run_finished``) are stored in the same
        transaction, only when this call wins."""
        now = _now()
        with writing(self.engine) as conn:
            res = conn.execute(
                jobs_table.update()
                .where(jobs_table.c.id == job_id, jobs_table.c.status.in_(only_from))
                .values(
                    status=status,
                    result=_dump(result),
                    outcome=_dump(outcome_of(result)),
                    error=error,
                    action=None,
                    updated_at=now,
                )
            )
            if not res.rowcount:
                return Recorded(won=False)
            stored = _append_events(conn, job_id, events, now)
        return Recorded(won=True, events=tuple(stored))

    # -- dataset snapshot -----------------------------------------------------------------------
    def snapshot_dataset(self, job_id: str, samples: Sequence[Sample]) -> None:
        """Keep the job's dataset as submitted; a sample already kept is left as it was."""
        with writing(self.engine) as conn:
            _snapshot(conn, job_id, samples)

    def dataset(self, job_id: str) -> builtins.list[Sample]:
        q = (
            sa.select(dataset_items_table.c.data)
            .where(dataset_items_table.c.job_id == job_id)
            .order_by(dataset_items_table.c.position)
        )
        with self.engine.connect() as conn:
            return [Sample.model_validate(d) for d in conn.execute(q).scalars()]

    # -- trials, items, rejections, events ------------------------------------------------------
    def upsert_trials(self, job_id: str, trials: Sequence[Trial]) -> None:
        with writing(self.engine) as conn:
            _upsert_trials(conn, job_id, trials, _now())

    def upsert_trial_items(self, job_id: str, items: Sequence[EvalResult]) -> None:
        """Store evaluations (``experiment_id`` is the candidate); one row per (candidate,
        sample, run), the last write winning, except that an item without ``output`` (a chord's
        compact copy) keeps the stored output and a ``skipped`` item never replaces an evaluation
        that was made. An item may come before its trial row."""
        with writing(self.engine) as conn:
            _upsert_items(conn, job_id, items, _now())

    def add_rejections(self, job_id: str, rejections: Sequence[Rejection]) -> None:
        with writing(self.engine) as conn:
            _add_rejections(conn, job_id, rejections, _now())

    def append_events(self, job_id: str, events: Sequence[Event]) -> builtins.list[Event]:
        """Store events whose key the job does not have yet; returns those stored, with seq."""
        with writing(self.engine) as conn:
            locked = conn.execute(
                sa.select(jobs_table.c.id).where(jobs_table.c.id == job_id).with_for_update()
            ).first()
            if locked is None:
                raise NotFoundError(f"no job {job_id!r}", field="job")
            return _append_events(conn, job_id, events, _now())

    def trials(self, job_id: str) -> builtins.list[Trial]:
        """In step order, then in the order they were first written."""
        t = trials_table
        q = (
            sa.select(t)
            .where(t.c.job_id == job_id)
            .order_by(t.c.step_index, t.c.created_at, t.c.candidate_id)
        )
        with self.engine.connect() as conn:
            return [_trial(r) for r in conn.execute(q).mappings()]

    def trial(self, job_id: str, candidate_id: str) -> Trial:
        t = trials_table
        q = sa.select(t).where(t.c.job_id == job_id, t.c.candidate_id == candidate_id)
        with self.engine.connect() as conn:
            row = conn.execute(q).mappings().first()
        if row is None:
            raise NotFoundError(f"job {job_id!r} has no trial {candidate_id!r}", field="candidate_id")
        return _trial(row)

    def trial_items(self, job_id: str, candidate_id: str | None = None) -> builtins.list[EvalResult]:
        """A candidate's evaluations (every candidate's with None), by run then sample."""
        i = trial_items_table
        q = sa.select(i).where(i.c.job_id == job_id).order_by(i.c.candidate_id, i.c.run, i.c.sample_id)
        if candidate_id is not None:
            q = q.where(i.c.candidate_id == candidate_id)
        with self.engine.connect() as conn:
            return [_item(r) for r in conn.execute(q).mappings()]

    def rejections(self, job_id: str) -> builtins.list[Rejection]:
        r = rejections_table
        q = sa.select(r).where(r.c.job_id == job_id).order_by(r.c.step_index, r.c.created_at, r.c.key)
        with self.engine.connect() as conn:
            return [_rejection(row) for row in conn.execute(q).mappings()]

    def events(self, job_id: str, after_seq: int = 0, limit: int | None = None) -> builtins.list[Event]:
        """The job's events with ``seq > after_seq``, in order: a consumer passes the last seq it
        has seen and gets each event once."""
        e = events_table
        q = sa.select(e).where(e.c.job_id == job_id, e.c.seq > after_seq).order_by(e.c.seq)
        if limit is not None:
            q = q.limit(limit)
        with self.engine.connect() as conn:
            return [_event(r) for r in conn.execute(q).mappings()]

    def history(self, job_id: str) -> RoundHistory:
        """Seed 002's normalized history of a job, built from its trials and rejections."""
        rec = self.get(job_id)
        return history_from_trials(
            self.trials(job_id),
            self.rejections(job_id),
            job_id=job_id,
            objective=_objective(rec.spec),
            stop_reason=_stop_reason(rec),
            dataset=_dataset_name(rec.spec),
        )


# -- writes (inside a caller's transaction) -------------------------------------------------------
def _insert(conn: Connection, table: sa.Table) -> sqlite.Insert | postgresql.Insert:
    """The dialect's INSERT with ON CONFLICT (SQLite and PostgreSQL: the databases optiflow
    supports for job results)."""
    dialect = conn.dialect.name
    if dialect == "sqlite":
        return sqlite.insert(table)
    if dialect == "postgresql":
        return postgresql.insert(table)
    raise StoreError(
        f"storing job results needs SQLite or PostgreSQL, not {dialect}", field="OPTIFLOW_DATABASE_URL"
    )


def _upsert(
    conn: Connection,
    table: sa.Table,
    rows: builtins.list[dict[str, Any]],
    keys: Sequence[str],
    *,
    keep_if_null: Sequence[str] = (),
    update_if: Callable[[Any], sa.ColumnElement[bool]] | None = None,
) -> None:
    """Insert ``rows``; a row whose key exists gets every column but the key and ``created_at``
    replaced, except ``keep_if_null`` columns when the new value is NULL, and only where
    ``update_if(excluded)`` holds."""
    if not rows:
        return
    stmt = _insert(conn, table)
    new = stmt.excluded
    set_: dict[str, Any] = {}
    for c in rows[0]:
        if c in keys or c == "created_at":
            continue
        set_[c] = sa.func.coalesce(new[c], table.c[c]) if c in keep_if_null else new[c]
    where = update_if(new) if update_if is not None else None
    conn.execute(stmt.on_conflict_do_update(index_elements=list(keys), set_=set_, where=where), rows)


def _insert_new(
    conn: Connection, table: sa.Table, rows: builtins.list[dict[str, Any]], keys: Sequence[str]
) -> None:
    """Insert ``rows`` whose key does not exist yet; existing ones are left untouched."""
    if rows:
        conn.execute(_insert(conn, table).on_conflict_do_nothing(index_elements=list(keys)), rows)


def _snapshot(conn: Connection, job_id: str, samples: Sequence[Sample]) -> None:
    rows = [
        {"job_id": job_id, "sample_id": s.id, "position": i, "data": s.model_dump(mode="json")}
        for i, s in enumerate(samples)
    ]
    _insert_new(conn, dataset_items_table, rows, ("job_id", "sample_id"))


def _upsert_trials(conn: Connection, job_id: str, trials: Sequence[Trial], now: datetime) -> None:
    rows = {
        t.candidate_id: {
            "job_id": job_id,
            "candidate_id": t.candidate_id,
            "overrides_tag": t.overrides_tag,
            "step_index": t.step_index,
            "parent_candidate_ids": builtins.list(t.parent_candidate_ids),
            "config_hash": t.config_hash,
            "configuration": t.configuration,
            "rationale": t.rationale,
            "status": t.status,
            "objective_score": t.objective_score,
            "summary": t.summary.model_dump(mode="json") if t.summary is not None else None,
            "extra": t.extra,
            "error": t.error,
            "created_at": now,
            "updated_at": now,
        }
        for t in trials
    }  # one row per key: the last of a batch wins, as it would over two calls
    _upsert(conn, trials_table, builtins.list(rows.values()), ("job_id", "candidate_id"))


def _upsert_items(conn: Connection, job_id: str, items: Sequence[EvalResult], now: datetime) -> None:
    rows = {
        (r.experiment_id, r.sample_id, r.run): {
            "job_id": job_id,
            "candidate_id": r.experiment_id,
            "sample_id": r.sample_id,
            "run": r.run,
            "output": r.output,
            "score": r.score,
            "passed": r.passed,
            "reason": r.reason,
            "prompt_tokens": r.prompt_tokens,
            "completion_tokens": r.completion_tokens,
            "cost": r.cost,
            "latency_ms": r.latency_ms,
            "ttft_ms": r.ttft_ms,
            "error": r.error,
            "cached": r.cached,
            "skipped": r.skipped,
            "created_at": now,
            "updated_at": now,
        }
        for r in items
    }
    items_ = trial_items_table
    _upsert(
        conn,
        items_,
        builtins.list(rows.values()),
        ("job_id", "candidate_id", "sample_id", "run"),
        # the compact copy a chord carries has no output: keep the one the evaluation stored
        keep_if_null=("output",),
        # a fail-fast skip never replaces an evaluation that was made
        update_if=lambda new: sa.or_(new.skipped == sa.false(), items_.c.skipped == sa.true()),
    )


def _add_rejections(conn: Connection, job_id: str, rejections: Sequence[Rejection], now: datetime) -> None:
    rows: builtins.list[dict[str, Any]] = [
        {
            "job_id": job_id,
            "key": r.dedupe_key(),
            "step_index": r.step_index,
            "candidate_id": r.candidate_id,
            "config_hash": r.config_hash,
            "reason_code": r.reason_code,
            "detail": r.message,
            "extra": r.model_dump(mode="json", include=_REJECTION_EXTRA),
            "created_at": now,
        }
        for r in rejections
    ]
    first: dict[str, dict[str, Any]] = {}
    for row in rows:
        first.setdefault(row["key"], row)
    _insert_new(conn, rejections_table, builtins.list(first.values()), ("job_id", "key"))


def _append_events(
    conn: Connection, job_id: str, events: Sequence[Event], now: datetime
) -> builtins.list[Event]:
    """Store events with new keys under the next seqs. The caller's transaction must hold the
    job row (updated or selected FOR UPDATE; SQLite: a write transaction) so that seqs are not
    raced; the unique (job, key) constraint is the last line of defence."""
    if not events:
        return []
    e = events_table
    keys = {ev.key for ev in events}
    existing = set(conn.execute(sa.select(e.c.key).where(e.c.job_id == job_id, e.c.key.in_(keys))).scalars())
    seq = conn.execute(
        sa.select(sa.func.coalesce(sa.func.max(e.c.seq), 0)).where(e.c.job_id == job_id)
    ).scalar_one()
    stored: builtins.list[Event] = []
    for ev in events:
        if ev.key in existing:
            continue
        existing.add(ev.key)
        seq += 1
        stored.append(ev.model_copy(update={"job_id": job_id, "seq": seq, "created_at": now}))
    if stored:
        conn.execute(
            e.insert(),
            [
                {
                    "job_id": job_id,
                    "seq": ev.seq,
                    "type": ev.type,
                    "key": ev.key,
                    "payload": ev.payload,
                    "created_at": now,
                }
                for ev in stored
            ],
        )
    return stored


# -- rows to models -------------------------------------------------------------------------------
def _filtered(q: sa.Select[Any], status: str | Sequence[str] | None, kind: str | None) -> sa.Select[Any]:
    q = q.order_by(jobs_table.c.created_at.desc(), jobs_table.c.id)
    if status:
        wanted = (status,) if isinstance(status, str) else tuple(status)
        unknown = [s for s in wanted if s not in JOB_STATUSES]
        if unknown:
            raise ValidationError(
                f"unknown status {unknown[0]!r} (one of: {', '.join(JOB_STATUSES)})", field="status"
            )
        q = q.where(jobs_table.c.status.in_(wanted))
    if kind:
        q = q.where(jobs_table.c.kind == kind)
    return q


def _record(row: RowMapping) -> JobRecord:
    return JobRecord(
        id=row["id"],
        kind=row["kind"],
        name=row["name"],
        status=row["status"],
        spec=_load(row["spec"]),
        state=_load(row["state"]),
        action=_load(row["action"]),
        step_index=row["step_index"],
        result=_load(row["result"]),
        error=row["error"],
        created_at=_aware(row["created_at"]),
        updated_at=_aware(row["updated_at"]),
        heartbeat=_aware(row["heartbeat"]),
    )


def _trial(row: RowMapping) -> Trial:
    return Trial(
        candidate_id=row["candidate_id"],
        step_index=row["step_index"],
        status=row["status"],
        overrides_tag=row["overrides_tag"],
        parent_candidate_ids=tuple(row["parent_candidate_ids"] or ()),
        config_hash=row["config_hash"],
        configuration=row["configuration"],
        rationale=row["rationale"],
        objective_score=row["objective_score"],
        summary=TrialSummary.model_validate(row["summary"]) if row["summary"] is not None else None,
        extra=row["extra"] or {},
        error=row["error"],
        created_at=_aware(row["created_at"]),
        updated_at=_aware(row["updated_at"]),
    )


def _item(row: RowMapping) -> EvalResult:
    return EvalResult(
        experiment_id=row["candidate_id"],
        sample_id=row["sample_id"],
        run=row["run"],
        passed=row["passed"],
        score=row["score"],
        output=row["output"],
        reason=row["reason"],
        prompt_tokens=row["prompt_tokens"],
        completion_tokens=row["completion_tokens"],
        cost=row["cost"],
        latency_ms=row["latency_ms"],
        ttft_ms=row["ttft_ms"],
        error=row["error"],
        cached=row["cached"],
        skipped=row["skipped"],
    )


_REJECTION_EXTRA = {"iteration", "proposed_index", "parent_candidate_ids", "rationale", "duplicate_of"}
"""Rejection fields kept in the ``extra`` JSON column."""


def _rejection(row: RowMapping) -> Rejection:
    extra = {k: v for k, v in (row["extra"] or {}).items() if k in _REJECTION_EXTRA}
    return Rejection(
        step_index=row["step_index"],
        reason_code=row["reason_code"],
        candidate_id=row["candidate_id"],
        config_hash=row["config_hash"],
        message=row["detail"],
        key=row["key"],
        created_at=_aware(row["created_at"]),
        **extra,
    )


def _event(row: RowMapping) -> Event:
    return Event(
        type=row["type"],
        key=row["key"],
        payload=row["payload"],
        job_id=row["job_id"],
        seq=row["seq"],
        created_at=_aware(row["created_at"]),
    )


def _objective(spec: Mapping[str, JSONValue]) -> Objective:
    value = spec.get("objective")
    if isinstance(value, Mapping):
        value = value.get("direction")
    minimize = isinstance(value, str) and value.lower() == "minimize"
    return Objective.MINIMIZE if minimize else Objective.MAXIMIZE


def _stop_reason(rec: JobRecord) -> str | None:
    if not rec.finished:
        return None
    given = (rec.result or {}).get("stop_reason")
    return given if isinstance(given, str) else rec.status


def _dataset_name(spec: Mapping[str, JSONValue]) -> str | None:
    dataset = spec.get("dataset")
    name = dataset.get("name") if isinstance(dataset, Mapping) else None
    return name if isinstance(name, str) else None


__all__ = [
    "FINISHED",
    "JOB_STATUSES",
    "JobRecord",
    "JobRepository",
    "JobStatus",
    "Recorded",
    "jobs_table",
    "metadata",
]
