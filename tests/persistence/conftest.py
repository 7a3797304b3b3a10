"""Databases for the persistence tests: every test runs on SQLite and on PostgreSQL.

PostgreSQL: one throwaway database per test session (``CREATE DATABASE`` on the server of
``postgres_url``, dropped at the end), and in it one schema per test, selected through the
connection's ``search_path``: each test starts from an empty database of its own, so tests
(and concurrent runs) never see each other's tables or rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from optiflow.persistence import JobRepository

BACKENDS = ["sqlite", "postgres"]


def _autocommit(url: str, *statements: str) -> None:
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            for statement in statements:
                conn.execute(sa.text(statement))
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def pg_database(postgres_url: str) -> Iterator[str]:
    """The URL of a database created for this test session."""
    name = f"optiflow_test_{uuid.uuid4().hex[:12]}"
    _autocommit(postgres_url, f'CREATE DATABASE "{name}"')
    url = sa.make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    yield url
    _autocommit(postgres_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'jobs.db'}"
        yield url
        return
    base: str = request.getfixturevalue("pg_database")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    _autocommit(base, f'CREATE SCHEMA "{schema}"')
    url = sa.make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
    text = url.render_as_string(hide_password=False)
    yield text
    _autocommit(base, f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def repo(db_url: str) -> Iterator[JobRepository]:
    """A repository on a freshly migrated database."""
    r = JobRepository(db_url, auto_migrate=True)
    yield r
    r.close()
