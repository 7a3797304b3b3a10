"""Crash-safe resume with real processes and the real Redis: what ``optiflow resume`` refuses,
the sweep of orphaned temporary tags, and the automatic recovery of a job whose start was lost.

Kills (``kill -9`` of the eval or the control worker in every step kind of every job kind) are the
crash matrix's: tests/distributed/test_chaos_matrix.py, and ``make chaos`` at random points on
SQLite and PostgreSQL (bench/chaos_results.md).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from optiflow.distributed import recovery
from optiflow.errors import ConflictError
from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job
from optiflow.settings import Settings
from tests.support.chaos import small, start_workers
from tests.support.workers import ROOT, worker_env

pytestmark = [pytest.mark.redis, pytest.mark.workers]
EXAMPLE = ROOT / "examples" / "support-bot" / "job.yaml"


@pytest.fixture
def env(redis_url: str, redis_prefix: str, tmp_path: Path) -> dict[str, str]:
    return worker_env(
        redis_url, redis_prefix, tmp_path, OPTIFLOW_STALE_AFTER_S="3", OPTIFLOW_RECOVER_INTERVAL_S="1"
    )


def client_for(env: dict[str, str]) -> Client:
    settings = Settings(
        redis_url=env["OPTIFLOW_REDIS_URL"],
        key_prefix=env["OPTIFLOW_KEY_PREFIX"],
        home=Path(env["OPTIFLOW_HOME"]),
        database_url=env["OPTIFLOW_DATABASE_URL"],
        stale_after_s=3,
    )
    return Client(settings, embedded=False)


def test_resume_refusals_orphan_sweep_and_automatic_recovery_of_a_lost_start(
    env: dict[str, str], tmp_path: Path
) -> None:
    spec = small(load_job(EXAMPLE))
    procs = start_workers(env, tmp_path, "r", 4)
    with client_for(env) as client:
        try:
            job = client.submit(spec)
            job.wait(timeout=120).raise_for_error()
            with pytest.raises(ConflictError, match="already ended completed"):
                job.resume()

            # a job whose start message was lost stays queued: refused while fresh, then the
            # control worker's periodic sweep finds it stalled and starts it
            lost = client.runtime.jobs.create(
                uuid.uuid4().hex, spec.kind, spec.name, spec.model_dump(mode="json")
            ).record
            assert lost is not None
            with pytest.raises(ConflictError, match="making progress"):
                client.job(lost.id).resume()
            started = time.monotonic()
            assert client.job(lost.id).wait(timeout=120).status == "completed"
            assert time.monotonic() - started >= 2  # not before it was stale (3 s after creation)
        finally:
            for p in procs:
                p.stop()

        # an orphaned temp tag of a finished job (a crash between two writes) is swept. With the
        # workers stopped: the control worker's own sweep (every second here) would remove the
        # orphan too, and when it did so between the write and this sweep, this one found nothing
        store, (ns, key) = client.runtime.store, (spec.prompt.ns, spec.prompt.key)
        orphan = f"opt-{job.id}-leftover"
        store.store(spec.prompt.descriptor(), (), tag=orphan, replace=True)
        assert recovery.sweep_temp_tags(client.runtime) == [f"{ns}/{key}:{orphan}"]
        assert orphan not in store.list_tags(ns, key)
