"""A prefork control worker on PostgreSQL runs concurrent jobs, and every Redis key the run
writes is under OPTIFLOW_KEY_PREFIX (issue 12).

``worker_init`` checks the database in the parent, which opens the engine's pool; the forked
pool processes inherited its connection and used it at once from several processes: 7 of 16
concurrent jobs on a freshly started ``-c 2`` control worker failed ("server closed the connection
unexpectedly", "can't change 'autocommit' now ... INTRANS"). Each child now disposes of the
inherited pools (``worker_process_init``).

The run uses a Redis of its own, so every key in it is this run's: Celery's result keys
(``celery-task-meta-*``, group and chord keys) were written without the prefix.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job
from optiflow.settings import Settings
from tests.support import redis_server
from tests.support.chaos import small
from tests.support.workers import ROOT, WorkerProcess, postgres_database, worker_env

pytestmark = [pytest.mark.postgres, pytest.mark.workers]
JOBS = 16


@pytest.fixture
def database(postgres_url: str) -> Iterator[str]:
    with postgres_database(postgres_url) as url:
        yield url


@pytest.mark.timeout(240)
def test_prefork_control_worker_runs_16_concurrent_jobs_with_every_key_under_the_prefix(
    tmp_path: Path, database: str
) -> None:
    with redis_server.private_redis(tmp_path) as (redis_url, _):
        keys = run_jobs(redis_url, "prefork-test", tmp_path, database)
    outside = sorted(k for k in keys if not k.startswith("prefork-test:"))
    assert keys and not outside, outside[:10]


def run_jobs(redis_url: str, redis_prefix: str, tmp_path: Path, database: str) -> list[str]:
    """16 jobs at once on a fresh -c 2 control worker; every key left in Redis afterwards."""
    env = {**worker_env(redis_url, redis_prefix, tmp_path), "OPTIFLOW_DATABASE_URL": database}
    spec = small(
        load_job(ROOT / "examples" / "support-bot" / "job.yaml", overrides={"fail_fast": False}),
        samples=2,
        runs=1,
    )
    spec = spec.model_copy(update={"min_section_tokens": 10_000})  # baseline only: one step a job
    workers = [
        WorkerProcess(env, "optiflow.control", pool="prefork", concurrency=2, log=tmp_path / "control.log"),
        WorkerProcess(env, "optiflow.eval", pool="threads", concurrency=8, log=tmp_path / "eval.log"),
    ]
    settings = Settings(redis_url=redis_url, key_prefix=redis_prefix, home=tmp_path, database_url=database)
    try:
        for w in workers:
            w.wait_ready()
        with Client(settings, embedded=False) as client:
            jobs = [client.submit(spec) for _ in range(JOBS)]  # all queued before the first starts
            results = [job.wait(timeout=180) for job in jobs]
            replies = [f"{redis_prefix}:celery-task-meta-{job.id}" for job in jobs]
            store = redis.Redis.from_url(redis_url)
            # the reply (seed 000's mailbox) is stored just after the job's row says it finished
            deadline = time.monotonic() + 10
            while not all(store.exists(key) for key in replies) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert all(store.exists(key) for key in replies), "a job's reply is not under the prefix"
            keys = sorted(k.decode() for k in store.scan_iter(count=1000))
    finally:
        for w in workers:
            w.stop()
    failed = [(r.job_id, r.error) for r in results if r.status != "completed"]
    assert not failed, (
        f"{len(failed)} of {JOBS} failed: {failed[:3]}\n{(tmp_path / 'control.log').read_text()[-3000:]}"
    )
    return keys
