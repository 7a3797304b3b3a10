"""Shared fixtures: real Redis and PostgreSQL, skipped locally when absent, failing under CI=true."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import pytest

REDIS_URL = os.environ.get("OPTIFLOW_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")
RABBITMQ_URL = os.environ.get("OPTIFLOW_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672")
POSTGRES_URL = os.environ.get(
    "OPTIFLOW_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _unavailable(what: str, exc: BaseException) -> None:
    message = f"{what} not reachable: {exc}"
    if IN_CI:
        pytest.fail(f"{message} (CI=true: tests that need it must run)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def redis_url() -> str:
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except Exception as exc:
        _unavailable("Redis", exc)
    return REDIS_URL


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    """A unique key prefix for one test; every key under it is deleted afterwards."""
    import redis

    prefix = f"optiflow-test-{uuid.uuid4().hex[:10]}"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def rabbitmq_url() -> Iterator[str]:
    """A broker URL on the RabbitMQ at OPTIFLOW_TEST_RABBITMQ_URL, in a virtual host of its own for
    this test (its queues, and whatever a killed worker left in them, go with it afterwards).
    Queue names are not under the key prefix on AMQP, so a shared vhost would mix test runs."""
    import shutil
    import subprocess

    from kombu import Connection

    vhost = f"optiflow-test-{uuid.uuid4().hex[:10]}"
    ctl = shutil.which("rabbitmqctl")
    try:
        with Connection(f"{RABBITMQ_URL}//", connect_timeout=3) as conn:
            conn.ensure_connection(max_retries=1)
        if ctl is None:
            raise RuntimeError("rabbitmqctl not found: a test cannot make its own virtual host")
        for args in (["add_vhost", vhost], ["set_permissions", "-p", vhost, "guest", ".*", ".*", ".*"]):
            subprocess.run([ctl, "-q", *args], check=True, capture_output=True, timeout=60)
    except Exception as exc:
        _unavailable("RabbitMQ", exc)
    yield f"{RABBITMQ_URL}/{vhost}"
    subprocess.run([ctl, "-q", "delete_vhost", vhost], check=False, capture_output=True, timeout=60)


@pytest.fixture(scope="session")
def postgres_url() -> str:
    import sqlalchemy as sa

    try:
        engine = sa.create_engine(POSTGRES_URL)
        with engine.connect() as conn:
            conn.execute(sa.text("select 1"))
        engine.dispose()
    except Exception as exc:
        _unavailable("PostgreSQL", exc)
    return POSTGRES_URL


@pytest.fixture
def cli_runner(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run ``optiflow ARGS...`` in process: (exit code, stdout, stderr). The environment is the
    calling fixture's to set."""
    from optiflow.interfaces.cli import run

    def invoke(*args: str) -> tuple[int, str, str]:
        try:
            run(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return code, out.out, out.err

    return invoke
