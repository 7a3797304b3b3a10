"""Schema migrations: ``upgrade``, ``current_revision``, ``ensure_migrated``.

The Alembic environment ships inside the package and is configured here, in code; no
``alembic.ini`` is needed. ``optiflow db upgrade`` calls :func:`upgrade`. Workers call
:func:`ensure_migrated` before they take work and refuse to start with a clear message otherwise.

Concurrent first upgrades are serialized: on PostgreSQL by a transaction-level advisory lock taken
before Alembic reads the version table (the loser waits, then finds the schema at head and does
nothing); on SQLite by ``BEGIN IMMEDIATE``. The whole upgrade is one transaction on both, so a
failed migration leaves the database as it was.

Checking the revision needs no Alembic import (the head is :data:`~.migrations.HEAD`), which
keeps worker and CLI start-up light; Alembic is imported only when there is something to do.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from optiflow.errors import StoreError
from optiflow.persistence.engine import display_url, make_engine, writing
from optiflow.persistence.migrations import HEAD, LOCATION, VERSION_TABLE

if TYPE_CHECKING:
    from alembic.config import Config

# pg_advisory_xact_lock key: b"optiflow" as a signed 64-bit integer
ADVISORY_LOCK_KEY = int.from_bytes(b"optiflow", "big", signed=True)


class DatabaseNotMigratedError(StoreError):
    """The database's schema is not the one this optiflow needs; ``optiflow db upgrade`` fixes it."""

    code = "db_not_migrated"


def alembic_config(url: str | None = None, connection: Connection | None = None) -> Config:
    """An Alembic ``Config`` for the shipped migrations, on ``connection`` or ``url``."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(LOCATION))
    cfg.attributes["url"] = url
    cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    """The head according to Alembic's script directory (tests check it equals ``HEAD``)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def _read_revision(conn: Connection) -> str | None:
    if not sa.inspect(conn).has_table(VERSION_TABLE):
        return None
    rows = conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    return str(rows[0]) if len(rows) == 1 else (",".join(sorted(map(str, rows))) or None)


def _connect_error(url: str, exc: Exception) -> StoreError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return StoreError(f"cannot open database {display_url(url)}: {first}", field="OPTIFLOW_DATABASE_URL")


def revision_of(engine: Engine) -> str | None:
    """The revision ``engine``'s database is at; None for a database never migrated."""
    try:
        with engine.connect() as conn:
            return _read_revision(conn)
    except sa.exc.OperationalError as exc:
        raise _connect_error(engine.url.render_as_string(hide_password=False), exc) from exc


def _migrate(engine: Engine, revision: str, *, down: bool = False) -> str | None:
    from alembic import command
    from alembic.util.exc import CommandError

    try:
        with writing(engine) as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_LOCK_KEY})
            cfg = alembic_config(connection=conn)
            (command.downgrade if down else command.upgrade)(cfg, revision)
            return _read_revision(conn)
    except CommandError as exc:  # an unknown revision: asked for, or the database's own (newer)
        where = display_url(engine.url.render_as_string(hide_password=False))
        raise DatabaseNotMigratedError(
            f"cannot migrate database {where} to {revision}: {exc} (this optiflow knows revisions "
            f"up to {HEAD}; a newer database needs a newer optiflow)",
            field="OPTIFLOW_DATABASE_URL",
        ) from exc


def upgrade_engine(engine: Engine, revision: str = "head") -> str | None:
    """Upgrade ``engine``'s database to ``revision``; the revision it ends at."""
    if revision in ("head", HEAD) and revision_of(engine) == HEAD:
        return HEAD  # nothing to do: no lock, no Alembic import
    return _migrate(engine, revision)


def _with_engine(url: str) -> Engine:
    return make_engine(url, poolclass=sa.pool.NullPool)


def upgrade(url: str, revision: str = "head") -> str | None:
    """Upgrade the database at ``url`` to ``revision`` (default: the newest); the revision it is
    at afterwards. Safe to run from several processes at once."""
    engine = _with_engine(url)
    try:
        return upgrade_engine(engine, revision)
    except sa.exc.OperationalError as exc:
        raise _connect_error(url, exc) from exc
    finally:
        engine.dispose()


def _missing_sqlite_file(url: str) -> bool:
    """A SQLite file that does not exist (reading its revision must not create it)."""
    try:
        parsed = sa.make_url(url)
    except Exception:
        return False
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return False
    return not Path(parsed.database).exists()


def downgrade(url: str, revision: str = "base") -> str | None:
    """Undo migrations down to ``revision`` (``base``: drop every optiflow table). For developers
    and tests; no command exposes it."""
    engine = _with_engine(url)
    try:
        return _migrate(engine, revision, down=True)
    except sa.exc.OperationalError as exc:
        raise _connect_error(url, exc) from exc
    finally:
        engine.dispose()


def current_revision(url: str) -> str | None:
    """The revision the database at ``url`` is at; None when it was never migrated (a SQLite
    file that does not exist is not created)."""
    if _missing_sqlite_file(url):
        return None
    engine = _with_engine(url)
    try:
        return revision_of(engine)
    finally:
        engine.dispose()


def check_revision(url: str, revision: str | None) -> str:
    """``revision`` when it is :data:`HEAD`; otherwise :class:`DatabaseNotMigratedError`."""
    if revision == HEAD:
        return revision
    where = display_url(url)
    if revision is None:
        raise DatabaseNotMigratedError(
            f"database {where} has no optiflow schema (revision {HEAD} needed): "
            "run `optiflow db upgrade` first",
            field="OPTIFLOW_DATABASE_URL",
        )
    raise DatabaseNotMigratedError(
        f"database {where} is at revision {revision}, this optiflow needs {HEAD}: run "
        "`optiflow db upgrade` (or upgrade optiflow, if the database is newer than this version)",
        field="OPTIFLOW_DATABASE_URL",
    )


def ensure_migrated(url: str) -> str:
    """The head revision when the database at ``url`` is at it; otherwise
    :class:`DatabaseNotMigratedError` (code ``db_not_migrated``) saying to run
    ``optiflow db upgrade``. What a worker calls before it starts."""
    return check_revision(url, current_revision(url))


__all__ = [
    "ADVISORY_LOCK_KEY",
    "HEAD",
    "VERSION_TABLE",
    "DatabaseNotMigratedError",
    "alembic_config",
    "check_revision",
    "current_revision",
    "downgrade",
    "ensure_migrated",
    "head_revision",
    "revision_of",
    "upgrade",
    "upgrade_engine",
]
