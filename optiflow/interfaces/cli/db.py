"""Database commands: ``optiflow db upgrade`` / ``optiflow db current``, and ``optiflow history``.

The URL is ``--url``, else ``OPTIFLOW_DATABASE_URL``, else the local SQLite file under
``OPTIFLOW_HOME``. Commands that only read never create that file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from optiflow.errors import NotFoundError
from optiflow.interfaces.cli._common import echo, settings

if TYPE_CHECKING:
    from optiflow.persistence.jobs import JobRepository

URL_HELP = "SQLAlchemy URL (default: OPTIFLOW_DATABASE_URL, else the local SQLite file)"


def _url(url: str | None) -> str:
    return url or settings().effective_database_url


def _sqlite_file(url: str) -> Path | None:
    prefix = "sqlite:///"
    path = url.removeprefix(prefix) if url.startswith(prefix) else ""
    return Path(path) if path and path != ":memory:" else None


@click.group()
def db() -> None:
    """The job database: schema migrations."""


@db.command()
@click.option("--url", default=None, help=URL_HELP)
@click.option("--revision", default="head", show_default=True, help="the revision to upgrade to")
def upgrade(url: str | None, revision: str) -> None:
    """Create or upgrade optiflow's tables (safe to run from several places at once)."""
    from optiflow.persistence.engine import display_url
    from optiflow.persistence.migrate import current_revision
    from optiflow.persistence.migrate import upgrade as upgrade_db

    target = _url(url)
    file = _sqlite_file(target)
    if file is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
    before = current_revision(target)
    after = upgrade_db(target, revision)
    where = display_url(target)
    if before == after:
        echo(f"{where}: already at {after}")
    else:
        echo(f"{where}: upgraded {before or 'empty database'} -> {after}")


@db.command()
@click.option("--url", default=None, help=URL_HELP)
@click.option("--check", is_flag=True, help="fail (db_not_migrated, exit 2) unless at the newest revision")
def current(url: str | None, check: bool) -> None:
    """Print the database's schema revision and the one this optiflow needs."""
    from optiflow.persistence.engine import display_url
    from optiflow.persistence.migrate import HEAD, check_revision, current_revision

    target = _url(url)
    revision = current_revision(target)
    state = "up to date" if revision == HEAD else "run `optiflow db upgrade`"
    echo(f"{display_url(target)}: {revision or 'not migrated'} (head {HEAD}: {state})")
    if check:
        check_revision(target, revision)


def repository_for(job_id: str) -> JobRepository:
    """The repository for a command about an existing job; on a machine with no database there
    is no job, and asking about one must not create the database."""
    from optiflow.persistence.jobs import JobRepository

    s = settings()
    file = _sqlite_file(s.effective_database_url)
    if not s.database_url and file is not None and not file.exists():
        raise NotFoundError(f"no job {job_id!r}", field="job")
    return JobRepository(s.effective_database_url)


@click.command()
@click.argument("job_id")
@click.option("--format", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True)
def history(job_id: str, fmt: str) -> None:
    """Print a job's history: rounds of trials of candidates, best so far, stop reason. (To
    re-decide an optimize job's run: ``optiflow replay JOB_ID``.)"""
    data = repository_for(job_id).history(job_id).model_dump(mode="json")
    if fmt == "json":
        echo(json.dumps(data, indent=2))
    else:
        import yaml

        echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip("\n"))


COMMANDS = [db, history]
