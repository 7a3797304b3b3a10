"""The Celery app factory: safe settings, and apps that do not leak tasks into each other."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from optiflow.distributed.app import QUEUE_CONTROL, QUEUE_EVAL, create_app, runtime_of
from optiflow.settings import Settings

TASKS = {"start", "evaluate", "propose", "rewrite", "advance", "fail", "chord_error", "recover"}


def test_settings_are_json_only_late_ack_and_routed(tmp_path: Path) -> None:
    app = create_app(Settings(redis_url="redis://127.0.0.1:6379/15", home=tmp_path), embedded=False)
    conf = app.conf
    assert conf.task_serializer == conf.result_serializer == "json"
    assert conf.accept_content == ["json"]
    assert conf.task_acks_late and conf.task_reject_on_worker_lost
    assert conf.worker_prefetch_multiplier == 1
    queue_of = {name: app.amqp.router.route({}, name)["queue"].name for name in app.tasks}
    model_tasks = {"optiflow.evaluate", "optiflow.propose", "optiflow.rewrite"}
    assert {n for n, q in queue_of.items() if n.startswith("optiflow.") and q == QUEUE_EVAL} == model_tasks
    assert {queue_of[f"optiflow.{t}"] for t in TASKS} - {QUEUE_EVAL} == {QUEUE_CONTROL}
    # Flower turns task events on while it runs (tests/distributed/test_flower.py)
    assert not conf.worker_send_task_events and not conf.task_send_sent_event
    assert {f"optiflow.{t}" for t in TASKS} <= set(app.tasks)


def test_each_app_runs_its_own_tasks(tmp_path: Path) -> None:
    embedded = create_app(Settings(home=tmp_path / "a"), embedded=True)
    distributed = create_app(
        Settings(redis_url="redis://127.0.0.1:6379/15", home=tmp_path / "b"), embedded=False
    )
    for name in TASKS:
        mine, theirs = distributed.tasks[f"optiflow.{name}"], embedded.tasks[f"optiflow.{name}"]
        assert mine.app is distributed and theirs.app is embedded
        # the function (a closure over its app's runtime) must be this app's own
        assert mine.run is not theirs.run
    assert runtime_of(embedded).embedded and not runtime_of(distributed).embedded


@pytest.mark.postgres
@pytest.mark.workers
def test_worker_refuses_an_unmigrated_database(postgres_url: str, redis_url: str, tmp_path: Path) -> None:
    import sqlalchemy as sa

    from tests.support.workers import ROOT, worker_env

    name = f"optiflow_unmigrated_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = sa.make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    try:
        env = {**worker_env(redis_url, "optiflow-unmigrated", tmp_path), "OPTIFLOW_DATABASE_URL": url}
        argv = [sys.executable, "-m", "celery", "-A", "workers.app", "worker", "-Q", "optiflow.control"]
        out = subprocess.run(
            [*argv, "-P", "threads", "-c", "1", "--without-gossip", "--without-mingle"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    assert out.returncode == 2, out.stderr[-2000:]
    assert "optiflow worker refused to start: error[db_not_migrated]" in out.stderr
    assert "optiflow db upgrade" in out.stderr


def test_worker_init_checks_only_the_workers_of_its_own_app(tmp_path: Path) -> None:
    """worker_init is one signal per process: a distributed app's database check must not stop
    the worker of another app started later in the same process (an embedded one, say)."""
    from celery.signals import worker_init

    class Worker:  # what Celery sends: the WorkController, whose ``app`` is the worker's app
        def __init__(self, app: object) -> None:
            self.app = app

    unreachable = "postgresql+psycopg://nobody@127.0.0.1:1/nothing?connect_timeout=1"
    distributed = create_app(
        Settings(redis_url="redis://127.0.0.1:6379/15", home=tmp_path / "d", database_url=unreachable),
        embedded=False,
    )
    other = create_app(Settings(home=tmp_path / "e"), embedded=True)
    worker_init.send(sender=Worker(other))  # not the distributed app's worker: no check
    with pytest.raises(SystemExit) as refused:
        worker_init.send(sender=Worker(distributed))
    assert refused.value.code == 2
