"""Restarting Redis (no persistence) in the middle of a job.

Its own throwaway ``redis-server`` on a free port, so nothing else loses its keys. The broker's
queues, the chord's counter and the eval cache vanish; the job's checkpoint lives in SQL. The
control worker finds the job stalled and launches its pending step again; it ends with the same
report as an undisturbed run.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from optiflow.core.result import OptimizeResult
from optiflow.errors import JobError
from optiflow.interfaces.client import Client, JobHandle
from optiflow.jobfile import load_job
from optiflow.llm.local_model import free_port
from optiflow.settings import Settings
from tests.support.chaos import decisions, small, start_workers
from tests.support.inline import run_inline
from tests.support.redis_server import RedisServer
from tests.support.workers import ROOT, WorkerProcess, worker_env

pytestmark = [pytest.mark.redis, pytest.mark.workers]
EXAMPLE = ROOT / "examples" / "support-bot" / "job.yaml"


@pytest.fixture
def server(redis_url: str, tmp_path: Path) -> Iterator[RedisServer]:
    srv = RedisServer(free_port(), tmp_path / "redis.log")
    srv.start()
    yield srv
    srv.stop()


def test_redis_restart_mid_job_resumes_with_the_same_report(server: RedisServer, tmp_path: Path) -> None:
    model = {"model": "optiflow/sim", "params": {"sim_latency_ms": 5}}
    spec = small(load_job(EXAMPLE, overrides={"fail_fast": False, "model": model}))
    expected = run_inline(spec)
    assert {r.stage for r in expected.rejected} == {"candidate", "greedy"}  # every branch
    url = f"redis://127.0.0.1:{server.port}/0"
    env = worker_env(
        url, "optiflow-restart", tmp_path, OPTIFLOW_STALE_AFTER_S="3", OPTIFLOW_RECOVER_INTERVAL_S="1"
    )
    settings = Settings(
        redis_url=url,
        key_prefix="optiflow-restart",
        home=tmp_path,
        database_url=env["OPTIFLOW_DATABASE_URL"],
        stale_after_s=3,
    )
    procs = start_workers(env, tmp_path, "x", 8)
    try:
        with Client(settings, embedded=False) as client:
            job = client.submit(spec)
            deadline = time.monotonic() + 120
            while True:  # into the candidates step (the second evaluation step), partly done
                progress = client.runtime.scratch.progress(job.id)
                if progress is not None and progress.step >= 2 and progress.done > progress.total // 4:
                    break
                assert time.monotonic() < deadline and not job.record().finished
                time.sleep(0.01)
            server.stop()
            time.sleep(0.5)
            server.start()  # empty: queues, chord counters, eval cache, temp tags are gone
            result = wait_restarting_dead_workers(job, procs, env, tmp_path, timeout=180)
            assert result.status == "completed", result.error
            assert result.report is not None
            assert decisions(result.report) == decisions(expected)
            assert result.report.stats.evaluations == expected.stats.evaluations
            tags = client.runtime.store.list_tags(spec.prompt.ns, spec.prompt.key)
            assert [t for t in tags if t.startswith("opt-")] == []
    finally:
        for p in procs:
            p.stop()


def wait_restarting_dead_workers(
    job: JobHandle, procs: list[WorkerProcess], env: dict[str, str], logdir: Path, *, timeout: float
) -> OptimizeResult:
    """Wait for the job as a deployment runs it: a worker process that exits is started again
    (compose's ``restart: unless-stopped``, a Kubernetes Deployment). kombu 5.7 can end a worker
    while it closes its channel after the lost connection: restoring unacked messages rebuilds a
    connection pool from a connection already released (AttributeError in ``_connparams``), which
    Celery reports as "Unrecoverable error" and exits. Seen about once in ten runs."""
    deadline = time.monotonic() + timeout
    restarts = 0
    while True:
        if any(p.proc.poll() is not None for p in procs):
            for p in procs:
                p.stop()
            restarts += 1
            procs[:] = start_workers(env, logdir, f"restart{restarts}", 8)
        try:
            return job.wait(timeout=2)
        except JobError:
            assert time.monotonic() < deadline, f"job {job.id} did not finish in {timeout}s"
