"""Engines for the job database: SQLite (one machine) or PostgreSQL (a fleet).

On SQLite the driver's own transaction handling is turned off so that SQLAlchemy's ``BEGIN`` is
the only one: reads run in a deferred transaction (a consistent snapshot under WAL), writes in
``BEGIN IMMEDIATE`` (see :func:`writing`), which takes the write lock up front, so a transaction
that reads before it writes (the next event ``seq``, a migration's version check) can never be
overtaken between the two. Foreign keys are enforced as on PostgreSQL.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from optiflow.errors import StoreError

_WRITE = "optiflow_write"


def display_url(url: str) -> str:
    """``url`` without its password, for messages."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparsable database url>"


def make_engine(url: str, **kwargs: Any) -> Engine:
    try:
        parsed = sa.make_url(url)
    except Exception as exc:
        raise StoreError(f"not a database URL: {display_url(url)}", field="OPTIFLOW_DATABASE_URL") from exc
    if parsed.get_backend_name() != "sqlite":
        try:
            return sa.create_engine(parsed, pool_pre_ping=True, **kwargs)
        except Exception as exc:
            raise StoreError(
                f"cannot open database {display_url(url)}: {exc}", field="OPTIFLOW_DATABASE_URL"
            ) from exc
    engine = sa.create_engine(parsed, connect_args={"check_same_thread": False, "timeout": 30}, **kwargs)

    @sa.event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn: Any, _: Any) -> None:
        dbapi_conn.isolation_level = None  # SQLAlchemy's BEGIN below is the only one
        cur = dbapi_conn.cursor()
        _use_wal(cur)
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "BEGIN")

    return engine


def _use_wal(cur: Any, attempts: int = 100) -> None:
    """Switch a new database file to WAL (it stays WAL). Several processes opening a fresh file at
    once race for the switch, which needs the file to themselves, and SQLite answers "database is
    locked" at once instead of waiting out the busy timeout: retry for up to ~10 s."""
    if str(cur.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
        return
    for attempt in range(attempts):
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(0.1)


@contextmanager
def writing(engine: Engine) -> Iterator[Connection]:
    """A write transaction: committed on success, rolled back on error (``BEGIN IMMEDIATE`` on
    SQLite)."""
    with engine.connect() as conn:
        conn.execution_options(**{_WRITE: True})
        with conn.begin():
            yield conn
