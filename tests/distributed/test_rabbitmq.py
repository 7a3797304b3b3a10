"""RabbitMQ as the broker (``OPTIFLOW_BROKER_URL=amqp://...``): Redis still holds the results, the
scratch, the eval cache and the store. A compress job and the kill -9 recovery round, on real
worker processes; under CI=true they fail, not skip, when RabbitMQ does not answer.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job
from optiflow.settings import Settings
from tests.support.chaos import decisions, run_round, small
from tests.support.inline import run_inline
from tests.support.workers import ROOT, WorkerProcess, running_workers, worker_env

pytestmark = [pytest.mark.redis, pytest.mark.rabbitmq, pytest.mark.workers]
EXAMPLE = ROOT / "examples" / "support-bot" / "job.yaml"


@pytest.fixture
def env(redis_url: str, redis_prefix: str, rabbitmq_url: str, tmp_path: Path) -> dict[str, str]:
    return worker_env(
        redis_url,
        redis_prefix,
        tmp_path,
        OPTIFLOW_BROKER_URL=rabbitmq_url,
        OPTIFLOW_STALE_AFTER_S="3",
        OPTIFLOW_RECOVER_INTERVAL_S="1",
    )


def client_for(env: dict[str, str]) -> Client:
    settings = Settings(
        redis_url=env["OPTIFLOW_REDIS_URL"],
        broker_url=env["OPTIFLOW_BROKER_URL"],
        key_prefix=env["OPTIFLOW_KEY_PREFIX"],
        home=Path(env["OPTIFLOW_HOME"]),
        database_url=env["OPTIFLOW_DATABASE_URL"],
        stale_after_s=3,
    )
    return Client(settings, embedded=False)


def test_compress_job_on_rabbitmq_equals_the_pure_workflow(env: dict[str, str], tmp_path: Path) -> None:
    spec = small(load_job(EXAMPLE, overrides={"fail_fast": False}))
    expected = run_inline(spec)
    with running_workers(env, tmp_path, eval_workers=1), client_for(env) as client:
        assert str(client.app.conf.broker_url).startswith("amqp://")
        job = client.submit(spec)
        result = job.wait(timeout=180).raise_for_error()
        assert result.report is not None
        assert decisions(result.report) == decisions(expected)
        assert result.report.stats.evaluations == expected.stats.evaluations


@pytest.mark.timeout(600)
def test_kill_9_on_rabbitmq_job_finishes_with_same_report(env: dict[str, str], tmp_path: Path) -> None:
    """RabbitMQ gives a killed worker's unacked messages back as soon as its connection drops: no
    visibility timeout to wait for. The job ends with the undisturbed run's report."""
    model = {"model": "optiflow/sim", "params": {"sim_latency_ms": 5}}
    spec = small(load_job(EXAMPLE, overrides={"fail_fast": False, "model": model}))
    expected = run_inline(spec)
    workers: list[WorkerProcess] = []
    try:
        with client_for(env) as client:
            got, workers = run_round(
                env, tmp_path, client, spec, random.Random(11), eval_steps=expected.stats.steps, n=0
            )
            assert decisions(got.report) == decisions(expected), got.killed_at
            assert got.report.stats.evaluations == expected.stats.evaluations, got.killed_at
            assert got.temp_tags_left == [], got.killed_at
    finally:
        for p in workers:
            p.stop()
