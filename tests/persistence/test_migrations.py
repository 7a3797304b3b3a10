"""Migrations: upgrade from empty, agreement with the tables, refusal of unmigrated databases,
adoption of pre-migration databases, concurrent first upgrades, the ``optiflow db`` commands."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from optiflow.errors import OptiflowError, StoreError
from optiflow.persistence import DatabaseNotMigratedError, JobRepository, current_revision, ensure_migrated
from optiflow.persistence.migrate import HEAD, VERSION_TABLE, downgrade, head_revision, upgrade
from optiflow.persistence.tables import metadata

Cli = Callable[..., tuple[int, str, str]]

TABLES = {
    "optiflow_jobs",
    "optiflow_dataset_items",
    "optiflow_trials",
    "optiflow_trial_items",
    "optiflow_rejections",
    "optiflow_events",
}


def table_names(url: str) -> set[str]:
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            return set(sa.inspect(conn).get_table_names())
    finally:
        engine.dispose()


def execute(url: str, *statements: str) -> None:
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as conn:
            for s in statements:
                conn.execute(sa.text(s))
    finally:
        engine.dispose()


def test_head_constant_is_alembics_head() -> None:
    assert head_revision() == HEAD


def test_upgrade_from_empty(db_url: str) -> None:
    assert current_revision(db_url) is None
    assert table_names(db_url) == set()
    assert upgrade(db_url) == HEAD
    assert current_revision(db_url) == HEAD
    assert table_names(db_url) == {*TABLES, VERSION_TABLE}
    assert upgrade(db_url) == HEAD  # again: nothing to do
    assert ensure_migrated(db_url) == HEAD


def test_migrated_schema_matches_the_tables(db_url: str) -> None:
    """What the migrations build is what the code declares (Alembic's autogenerate finds no
    difference), on both databases."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    upgrade(db_url)
    engine = sa.create_engine(db_url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(
                conn, opts={"compare_type": True, "version_table": VERSION_TABLE}
            )
            assert compare_metadata(ctx, metadata) == []
    finally:
        engine.dispose()


def test_downgrade_to_base_and_up_again(db_url: str) -> None:
    upgrade(db_url)
    assert downgrade(db_url) is None
    assert table_names(db_url) == {VERSION_TABLE}
    assert upgrade(db_url) == HEAD
    assert table_names(db_url) >= TABLES


def test_ensure_migrated_refuses_an_empty_database(db_url: str) -> None:
    with pytest.raises(DatabaseNotMigratedError) as info:
        ensure_migrated(db_url)
    err = info.value
    assert isinstance(err, OptiflowError) and isinstance(err, StoreError)
    assert err.code == "db_not_migrated"
    assert err.field == "OPTIFLOW_DATABASE_URL"
    assert "run `optiflow db upgrade`" in str(err)
    assert table_names(db_url) == set()  # checking wrote nothing


def test_ensure_migrated_refuses_another_revision(db_url: str) -> None:
    upgrade(db_url)
    execute(db_url, f"UPDATE {VERSION_TABLE} SET version_num = '0000'")
    with pytest.raises(DatabaseNotMigratedError, match=rf"at revision 0000, this optiflow needs {HEAD}"):
        ensure_migrated(db_url)


def test_a_database_newer_than_this_optiflow_is_refused_clearly(db_url: str) -> None:
    upgrade(db_url)
    execute(db_url, f"UPDATE {VERSION_TABLE} SET version_num = '9999'")
    with pytest.raises(DatabaseNotMigratedError, match="needs a newer optiflow") as info:
        upgrade(db_url)
    assert info.value.code == "db_not_migrated"
    with pytest.raises(DatabaseNotMigratedError, match="to nowhere"):
        upgrade(db_url, "nowhere")


def test_checking_a_missing_sqlite_file_does_not_create_it(tmp_path: Path) -> None:
    db = tmp_path / "nowhere" / "optiflow.db"
    url = f"sqlite:///{db}"
    assert current_revision(url) is None
    with pytest.raises(DatabaseNotMigratedError):
        ensure_migrated(url)
    assert not db.exists() and not db.parent.exists()


def test_unreachable_database_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="cannot open database") as info:
        ensure_migrated("postgresql+psycopg://nobody:secret@127.0.0.1:1/none?connect_timeout=2")
    assert info.value.code == "store_error"
    assert "secret" not in str(info.value)  # the password is never printed


def test_repository_migrates_sqlite_and_checks_others(db_url: str) -> None:
    """SQLite (the embedded default) upgrades itself; any other database must have been upgraded
    (``optiflow db upgrade``); ``auto_migrate`` overrides both."""
    if db_url.startswith("sqlite"):
        with pytest.raises(DatabaseNotMigratedError):
            JobRepository(db_url, auto_migrate=False)
        JobRepository(db_url)
        assert current_revision(db_url) == HEAD
        return
    with pytest.raises(DatabaseNotMigratedError, match="optiflow db upgrade"):
        JobRepository(db_url)
    assert table_names(db_url) == set()
    repo = JobRepository(db_url, auto_migrate=True)
    repo.create("j", "compress", "n", {})
    assert [r.id for r in JobRepository(db_url).list()] == ["j"]


def test_a_database_from_before_migrations_is_adopted(db_url: str) -> None:
    """Databases made by the old ``create_all`` have the jobs table and no version: the upgrade
    keeps the table and its rows and adds the rest."""
    old = sa.MetaData()
    sa.Table(
        "optiflow_jobs",
        old,
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
    engine = sa.create_engine(db_url, poolclass=sa.pool.NullPool)
    old.create_all(engine)
    engine.dispose()
    execute(
        db_url,
        "INSERT INTO optiflow_jobs (id, kind, name, status, spec, step_index, created_at, updated_at) "
        "VALUES ('old', 'compress', 'legacy', 'completed', '{}', 3, '2024-01-01 00:00:00', '2024-01-01 00:00:00')",
    )
    assert upgrade(db_url) == HEAD
    rec = JobRepository(db_url).get("old")
    assert (rec.name, rec.status, rec.step_index) == ("legacy", "completed", 3)


def test_concurrent_first_upgrades_do_not_race(db_url: str) -> None:
    """Several processes starting at once on an empty database: one migrates, the others wait
    (PostgreSQL: advisory lock; SQLite: BEGIN IMMEDIATE) and find it done."""
    results: list[str | None] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def run() -> None:
        try:
            barrier.wait()
            results.append(upgrade(db_url))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert results == [HEAD] * 4
    assert current_revision(db_url) == HEAD


# -- optiflow db ----------------------------------------------------------------------------------
@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cli_runner: Cli) -> Cli:
    for var in ("OPTIFLOW_DATABASE_URL", "OPTIFLOW_REDIS_URL", "OPTIFLOW_BROKER_URL", "OPTIFLOW_STORE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPTIFLOW_HOME", str(tmp_path / "home"))

    return cli_runner


def test_db_commands(cli: Cli, db_url: str) -> None:
    code, out, _ = cli("db", "current", "--url", db_url)
    assert code == 0 and f"not migrated (head {HEAD}: run `optiflow db upgrade`)" in out
    code, _, err = cli("db", "current", "--url", db_url, "--check")
    assert code == 2 and "error[db_not_migrated]" in err
    code, out, _ = cli("db", "upgrade", "--url", db_url)
    assert code == 0 and out.strip().endswith(f"upgraded empty database -> {HEAD}")
    code, out, _ = cli("db", "upgrade", "--url", db_url)
    assert code == 0 and out.strip().endswith(f"already at {HEAD}")
    code, out, _ = cli("db", "current", "--url", db_url, "--check")
    assert code == 0 and f"{HEAD} (head {HEAD}: up to date)" in out


def test_db_commands_default_to_the_local_sqlite_file(cli: Cli, tmp_path: Path) -> None:
    db = tmp_path / "home" / "optiflow.db"
    code, out, _ = cli("db", "current")
    assert code == 0 and "not migrated" in out and str(db) in out
    assert not db.parent.exists()  # reading created nothing
    code, out, _ = cli("db", "upgrade")
    assert code == 0 and f"-> {HEAD}" in out
    assert current_revision(f"sqlite:///{db}") == HEAD


@pytest.mark.parametrize("argv", [["db", "--help"], ["db", "upgrade", "--help"], ["history", "--help"]])
def test_db_and_history_help_import_no_heavy_dependency(argv: list[str]) -> None:
    import json
    import subprocess
    import sys

    from tests.test_cli_startup import HEAVY, PROBE, clean_env

    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=set(HEAVY)), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
        check=False,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"code": 0, "heavy": []}
