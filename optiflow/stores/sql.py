"""Store in SQL through SQLAlchemy Core: SQLite for one machine, PostgreSQL for a fleet.

Tables (created on open): ``optiflow_prompts``, ``optiflow_overrides`` and ``optiflow_versions``,
rows holding the models' JSON. A write is one transaction that locks the tag's row (``FOR
UPDATE``), reads the latest version and inserts the next one; the primary key
``(ns, key, tag, seq)`` makes a racing insert of the same version fail, and the transaction is
then retried on the new state. A guarded write (``apply``, ``rollback``) first locks the prompt's
row (``FOR UPDATE``: a push waits until it commits) and compares it, and registers a prompt that
has no row in the same transaction (a racing insert fails and the write is retried on the new
state). Rows are always locked in that order, prompt then tag. On SQLite every transaction is
``BEGIN IMMEDIATE``, which serializes writers up front.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from optiflow.core.overrides import PromptOverrides, Version
from optiflow.core.prompt import Prompt
from optiflow.errors import StoreError
from optiflow.stores._common import Change, State, StoreBase, Write

T = TypeVar("T")

_MAX_ATTEMPTS = 50
_NAME = sa.String(128)


class SqlOverridesStore(StoreBase):
    """A SQLAlchemy URL (the store owns its engine) and an optional schema for its tables.

    A SQLite file's directory is created when missing. ``schema`` (PostgreSQL) is created too.
    """

    def __init__(self, url: str, *, schema: str | None = None) -> None:
        self._engine = _engine(url)
        meta = sa.MetaData(schema=schema)
        self._prompts = sa.Table(
            "optiflow_prompts",
            meta,
            sa.Column("ns", _NAME, primary_key=True),
            sa.Column("key", _NAME, primary_key=True),
            sa.Column("data", sa.Text, nullable=False),
        )
        self._overrides = sa.Table(
            "optiflow_overrides",
            meta,
            sa.Column("ns", _NAME, primary_key=True),
            sa.Column("key", _NAME, primary_key=True),
            sa.Column("tag", _NAME, primary_key=True),
            sa.Column("data", sa.Text, nullable=False),
        )
        self._versions = sa.Table(
            "optiflow_versions",
            meta,
            sa.Column("ns", _NAME, primary_key=True),
            sa.Column("key", _NAME, primary_key=True),
            sa.Column("tag", _NAME, primary_key=True),
            sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("version", sa.String(32), nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("data", sa.Text, nullable=False),
            sa.UniqueConstraint("ns", "key", "tag", "version"),
        )
        with self._errors():
            self._retry(lambda conn: _create(conn, meta))

    def _retry(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` in a transaction, again from the start when a racing writer won."""
        for _ in range(_MAX_ATTEMPTS):
            try:
                with self._engine.begin() as conn:
                    return work(conn)
            except IntegrityError:
                continue
        raise StoreError(f"gave up after {_MAX_ATTEMPTS} conflicting writes", field="database_url")

    def _put_prompt(self, prompt: Prompt) -> None:
        def work(conn: Connection) -> None:
            t = self._prompts
            where = (t.c.ns == prompt.ns) & (t.c.key == prompt.key)
            data = prompt.model_dump_json()
            if conn.execute(sa.update(t).where(where).values(data=data)).rowcount == 0:
                conn.execute(sa.insert(t).values(ns=prompt.ns, key=prompt.key, data=data))

        self._retry(work)

    def _get_prompt(self, ns: str, key: str) -> Prompt | None:
        t = self._prompts
        with self._engine.begin() as conn:
            raw = conn.scalar(sa.select(t.c.data).where((t.c.ns == ns) & (t.c.key == key)))
        return None if raw is None else Prompt.model_validate_json(raw)

    def _resolve(self, ns: str, key: str, tag: str) -> PromptOverrides | None:
        t = self._overrides
        with self._engine.begin() as conn:
            raw = conn.scalar(sa.select(t.c.data).where(self._tag_row(t, ns, key, tag)))
        return None if raw is None else PromptOverrides.model_validate_json(raw)

    def _delete(self, ns: str, key: str, tag: str) -> bool:
        t = self._overrides
        with self._engine.begin() as conn:
            return conn.execute(sa.delete(t).where(self._tag_row(t, ns, key, tag))).rowcount > 0

    def _list_tags(self, ns: str, key: str) -> list[str]:
        t = self._overrides
        with self._engine.begin() as conn:
            return list(conn.scalars(sa.select(t.c.tag).where((t.c.ns == ns) & (t.c.key == key))))

    def _history(self, ns: str, key: str, tag: str) -> list[Version]:
        t = self._versions
        query = sa.select(t.c.data).where(self._tag_row(t, ns, key, tag)).order_by(t.c.seq)
        with self._engine.begin() as conn:
            return [Version.model_validate_json(raw) for raw in conn.scalars(query)]

    def _transact(self, ns: str, key: str, tag: str, change: Change, *, guard_prompt: bool = False) -> Write:
        ov, vs, pr = self._overrides, self._versions, self._prompts

        def work(conn: Connection) -> Write:
            stored = None
            if guard_prompt:  # locked first: a push waits until this transaction ends
                where = (pr.c.ns == ns) & (pr.c.key == key)
                raw_prompt = conn.scalar(sa.select(pr.c.data).where(where).with_for_update())
                stored = None if raw_prompt is None else Prompt.model_validate_json(raw_prompt)
            raw = conn.scalar(sa.select(ov.c.data).where(self._tag_row(ov, ns, key, tag)).with_for_update())
            head = conn.execute(
                sa.select(vs.c.seq, vs.c.data)
                .where(self._tag_row(vs, ns, key, tag))
                .order_by(vs.c.seq.desc())
                .limit(1)
            ).first()
            write = change(
                State(
                    None if raw is None else PromptOverrides.model_validate_json(raw),
                    None if head is None else Version.model_validate_json(head.data),
                    stored,
                )
            )
            if write.prompt is not None:  # a racing insert of the same row: IntegrityError, retried
                conn.execute(sa.insert(pr).values(ns=ns, key=key, data=write.prompt.model_dump_json()))
            if write.content is not None:
                data = write.content.model_dump_json()
                if raw is None:
                    conn.execute(sa.insert(ov).values(ns=ns, key=key, tag=tag, data=data))
                else:
                    conn.execute(sa.update(ov).where(self._tag_row(ov, ns, key, tag)).values(data=data))
            seq = 0 if head is None else head.seq
            for version in write.versions:
                seq += 1
                conn.execute(
                    sa.insert(vs).values(
                        ns=ns,
                        key=key,
                        tag=tag,
                        seq=seq,
                        version=version.version,
                        created_at=version.created_at,
                        data=version.model_dump_json(),
                    )
                )
            return write

        return self._retry(work)

    @staticmethod
    def _tag_row(t: sa.Table, ns: str, key: str, tag: str) -> sa.ColumnElement[bool]:
        return (t.c.ns == ns) & (t.c.key == key) & (t.c.tag == tag)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except SQLAlchemyError as exc:
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreError(f"database: {first_line}", field="database_url") from exc

    def close(self) -> None:
        self._engine.dispose()


def _engine(url: str) -> Engine:
    parsed = sa.make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return sa.create_engine(parsed)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(parsed, connect_args={"timeout": 30})

    @sa.event.listens_for(engine, "connect")
    def _manual_transactions(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # let SQLAlchemy's BEGIN below be the only one

    @sa.event.listens_for(engine, "begin")
    def _begin_immediate(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _create(conn: Connection, meta: sa.MetaData) -> None:
    if meta.schema and conn.dialect.name != "sqlite":
        conn.execute(sa.schema.CreateSchema(meta.schema, if_not_exists=True))
    meta.create_all(conn)
