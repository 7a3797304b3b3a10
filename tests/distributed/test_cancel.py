"""Cancelling a compress job on real worker processes and the real Redis.

A running job: the pending evaluations of its step are skipped without a model call, the chord
body ends the job ``cancelled``, ``wait`` returns quickly and no temporary tag is left. A queued
job (no worker has started it): it ends ``cancelled`` at once, and a worker that starts later
ignores its ``start`` message.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from optiflow.interfaces.client import Client, JobHandle
from optiflow.jobfile import load_job
from optiflow.settings import Settings
from optiflow.stores import keys
from tests.support.workers import ROOT, running_workers, worker_env

pytestmark = [pytest.mark.redis, pytest.mark.workers]
EXAMPLE = ROOT / "examples" / "support-bot" / "job.yaml"
SLOW = {"model": {"model": "optiflow/sim", "params": {"sim_latency_ms": 200}}, "eval_runs": 3}
BASELINE_EVALS = 44 * 3  # 44 samples x 3 runs in the first step alone


@pytest.fixture
def env(redis_url: str, redis_prefix: str, tmp_path: Path) -> dict[str, str]:
    return worker_env(redis_url, redis_prefix, tmp_path)


def client_for(env: dict[str, str]) -> Client:
    return Client(
        Settings(
            redis_url=env["OPTIFLOW_REDIS_URL"],
            key_prefix=env["OPTIFLOW_KEY_PREFIX"],
            home=Path(env["OPTIFLOW_HOME"]),
            database_url=env["OPTIFLOW_DATABASE_URL"],
        ),
        embedded=False,
    )


def temp_tags(client: Client, job: JobHandle) -> list[str]:
    spec = client.runtime.spec(job.id)
    return [
        t for t in client.runtime.store.list_tags(spec.prompt.ns, spec.prompt.key) if t.startswith("opt-")
    ]


def model_calls(client: Client, job_id: str) -> int:
    """Evaluations that called the model: each successful one is cached under the job's scope."""
    pattern = keys.eval_cache(client.settings.key_prefix, job_id, "*")
    return sum(1 for _ in client.runtime.redis.scan_iter(match=pattern, count=1000))


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def test_cancel_queued_job_ends_at_once(env: dict[str, str]) -> None:
    spec = load_job(EXAMPLE, overrides=SLOW)
    with client_for(env) as client:  # no worker is running: the job stays queued
        job = client.submit(spec)
        assert job.status() == "queued"
        started = time.monotonic()
        job.cancel()
        result = job.wait(timeout=10)
        elapsed = time.monotonic() - started
        assert result.status == "cancelled"
        assert result.report is None and result.error
        assert job.status() == "cancelled"
        assert job.result() == result
        assert elapsed < 5, f"cancelling a queued job took {elapsed:.1f}s"
        assert temp_tags(client, job) == []
        assert model_calls(client, job.id) == 0
        job.cancel()  # cancelling twice is harmless
        assert job.status() == "cancelled"


def test_cancel_running_job_skips_pending_evaluations(env: dict[str, str], tmp_path: Path) -> None:
    spec = load_job(EXAMPLE, overrides=SLOW)
    with client_for(env) as client:
        # cancelled while queued; a worker that starts afterwards must ignore its start message
        early = client.submit(spec)
        early.cancel()
        early_result = early.wait(timeout=10)

        with running_workers(env, tmp_path, eval_workers=1, eval_concurrency=2):
            job = client.submit(spec)
            wait_for(lambda: job.status() == "running", 60, "the job to start")
            wait_for(lambda: model_calls(client, job.id) >= 4, 30, "the first evaluations")
            cancelled_at = time.monotonic()
            job.cancel()
            result = job.wait(timeout=60)
            elapsed = time.monotonic() - cancelled_at
            calls = model_calls(client, job.id)
            print(f"\ncancel -> reply {elapsed:.2f}s, {calls} model calls of >= {BASELINE_EVALS} in step 0")
            assert result.status == "cancelled", result
            assert result.report is None
            assert job.status() == "cancelled"
            assert elapsed < 15, f"cancel took {elapsed:.1f}s to end the job"
            # far fewer evaluations than the job (the baseline step alone is 132 at 2 x 5/s)
            assert calls < BASELINE_EVALS // 2
            assert temp_tags(client, job) == []
            # nothing is still running for it: no model call happens after the reply
            time.sleep(1.0)
            assert model_calls(client, job.id) == calls
            assert job.record().step_index == 0

            assert early.status() == "cancelled"
            assert early.result() == early_result
            assert model_calls(client, early.id) == 0
            assert temp_tags(client, early) == []
