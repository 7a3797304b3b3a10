"""Drift references and their nights in the jobs database (SQLite and PostgreSQL).

Why here and not in the overrides store: a reference is job evidence (a measure job's per-sample
outcomes, and every later measure compared with it, in order), not something production renders;
it needs transactions (nights are numbered in order, one writer at a time per reference key) and
history queries for the page, which the jobs database has on both of its engines, while the
overrides store's four backends (and the Redis that production reads on its hot path) have neither.

:meth:`DriftRepository.locked` is the one write path: a transaction that holds the key's lock
(PostgreSQL: a transaction-level advisory lock on the key; SQLite: ``BEGIN IMMEDIATE``), so two
measures ending at once are numbered one after the other and a key never gets two current
references. Rows hold core models as JSON (:class:`~optiflow.core.drift.report.Reference`,
:class:`~optiflow.core.drift.report.Night`).
"""

from __future__ import annotations

import builtins
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from optiflow.core.drift.report import Night, Reference
from optiflow.errors import NotFoundError
from optiflow.persistence.engine import writing
from optiflow.persistence.tables import drift_nights_table as nights_t
from optiflow.persistence.tables import drift_references_table as refs_t


def lock_key(ns: str, key: str, tag: str, config: str) -> int:
    """A signed 64-bit advisory lock key for one reference key."""
    digest = hashlib.blake2b("\x1f".join(("drift", ns, key, tag, config)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _reference(row: sa.RowMapping) -> Reference:
    return Reference.model_validate(row["data"])


def _night(row: sa.RowMapping) -> Night:
    return Night.model_validate(row["data"])


def _current(conn: Connection, ns: str, key: str, tag: str, config: str | None) -> Reference | None:
    q = (
        sa.select(refs_t)
        .where(refs_t.c.ns == ns, refs_t.c.key == key, refs_t.c.tag == tag, refs_t.c.superseded_at.is_(None))
        .order_by(refs_t.c.created_at.desc(), refs_t.c.id)
        .limit(1)
    )
    if config is not None:
        q = q.where(refs_t.c.config == config)
    row = conn.execute(q).mappings().first()
    return None if row is None else _reference(row)


def _nights(conn: Connection, reference_id: str) -> list[Night]:
    q = sa.select(nights_t).where(nights_t.c.reference_id == reference_id).order_by(nights_t.c.night)
    return [_night(r) for r in conn.execute(q).mappings()]


class DriftLock:
    """Reads and writes of one reference key inside its locked transaction."""

    def __init__(self, conn: Connection, ns: str, key: str, tag: str, config: str) -> None:
        self.conn, self.ns, self.key, self.tag, self.config = conn, ns, key, tag, config

    def current(self) -> Reference | None:
        """The key's current reference (same prompt, tag, model, dataset and check)."""
        return _current(self.conn, self.ns, self.key, self.tag, self.config)

    def latest_for_tag(self) -> Reference | None:
        """The newest current reference of the prompt and tag, whatever its model, dataset, check."""
        return _current(self.conn, self.ns, self.key, self.tag, None)

    def nights(self, reference_id: str) -> list[Night]:
        return _nights(self.conn, reference_id)

    def of_job(self, job_id: str) -> tuple[Reference, Night | None] | None:
        """What ``job_id`` already recorded: the reference it is, or its night (a redelivered end)."""
        row = self.conn.execute(sa.select(refs_t).where(refs_t.c.job_id == job_id)).mappings().first()
        if row is not None:
            return _reference(row), None
        night = self.conn.execute(sa.select(nights_t).where(nights_t.c.job_id == job_id)).mappings().first()
        if night is None:
            return None
        ref = (
            self.conn.execute(sa.select(refs_t).where(refs_t.c.id == night["reference_id"])).mappings().one()
        )
        return _reference(ref), _night(night)

    def add_reference(self, reference: Reference) -> None:
        """Record ``reference`` as the key's current one (the one before it is superseded)."""
        self.conn.execute(
            refs_t.update()
            .where(
                refs_t.c.ns == self.ns,
                refs_t.c.key == self.key,
                refs_t.c.tag == self.tag,
                refs_t.c.config == self.config,
                refs_t.c.superseded_at.is_(None),
            )
            .values(superseded_at=reference.created_at)
        )
        self.conn.execute(
            refs_t.insert().values(
                id=reference.id,
                ns=self.ns,
                key=self.key,
                tag=self.tag,
                config=self.config,
                job_id=reference.job_id,
                created_at=reference.created_at,
                data=reference.model_dump(mode="json"),
            )
        )

    def add_night(self, night: Night, reference: Reference) -> None:
        """Record ``night`` and the reference as it is after it (its next run index)."""
        self.conn.execute(
            nights_t.insert().values(
                reference_id=night.reference_id,
                night=night.night,
                job_id=night.job_id,
                measured_at=night.measured_at,
                data=night.model_dump(mode="json"),
            )
        )
        self.conn.execute(
            refs_t.update().where(refs_t.c.id == reference.id).values(data=reference.model_dump(mode="json"))
        )


class DriftRepository:
    """References and nights over a jobs database's engine (its schema comes from the migrations)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @contextmanager
    def locked(self, ns: str, key: str, tag: str, config: str) -> Iterator[DriftLock]:
        """A write transaction holding the key's lock: committed when the block ends."""
        with writing(self.engine) as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(
                    sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": lock_key(ns, key, tag, config)}
                )
            yield DriftLock(conn, ns, key, tag, config)

    def current(self, ns: str, key: str, tag: str, config: str | None = None) -> Reference | None:
        with self.engine.connect() as conn:
            return _current(conn, ns, key, tag, config)

    def reference(self, reference_id: str) -> Reference:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(refs_t).where(refs_t.c.id == reference_id)).mappings().first()
        if row is None:
            raise NotFoundError(f"no drift reference {reference_id!r}", field="reference")
        return _reference(row)

    def nights(self, reference_id: str) -> builtins.list[Night]:
        with self.engine.connect() as conn:
            return _nights(conn, reference_id)

    def of_job(self, job_id: str) -> tuple[Reference, Night | None] | None:
        with self.engine.connect() as conn:
            return DriftLock(conn, "", "", "", "").of_job(job_id)

    def list(self, ns: str, key: str, tag: str) -> builtins.list[tuple[Reference, datetime | None]]:
        """Every reference of a prompt and tag, newest first, with when it was superseded."""
        q = (
            sa.select(refs_t)
            .where(refs_t.c.ns == ns, refs_t.c.key == key, refs_t.c.tag == tag)
            .order_by(refs_t.c.created_at.desc(), refs_t.c.id)
        )
        with self.engine.connect() as conn:
            return [(_reference(r), r["superseded_at"]) for r in conn.execute(q).mappings()]

    def current_for_tag(self, ns: str, key: str, tag: str) -> builtins.list[Reference]:
        """The current reference of each (model, dataset, check) of a prompt and tag, newest first."""
        return [ref for ref, superseded in self.list(ns, key, tag) if superseded is None]


__all__ = ["DriftLock", "DriftRepository", "lock_key"]
