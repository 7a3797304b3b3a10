"""Crash-safe resume with real processes and the real Redis.

The fault test kills the eval worker (kill -9) in the middle of a random step, then the control
worker, and starts both again; the job must end with the report of an undisturbed run (here: the
pure workflow with the same model answers), every evaluation counted once, no temp tag left.
``make chaos`` runs the same round 20 times and writes bench/chaos_results.md.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from optiflow.distributed import recovery
from optiflow.errors import ConflictError
from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job
from optiflow.settings import Settings
from tests.support.chaos import decisions, run_round, small, start_workers
from tests.support.inline import run_inline
from tests.support.workers import ROOT, WorkerProcess, postgres_database, worker_env

pytestmark = [pytest.mark.redis, pytest.mark.workers]
EXAMPLE = ROOT / "examples" / "support-bot" / "job.yaml"
ROUNDS = int(os.environ.get("OPTIFLOW_CHAOS_ROUNDS", "2"))  # on SQLite; 3 rounds in all (make chaos: 20)
PG_ROUNDS = int(os.environ.get("OPTIFLOW_CHAOS_PG_ROUNDS", "1"))


@pytest.fixture
def env(redis_url: str, redis_prefix: str, tmp_path: Path) -> dict[str, str]:
    return worker_env(
        redis_url, redis_prefix, tmp_path, OPTIFLOW_STALE_AFTER_S="3", OPTIFLOW_RECOVER_INTERVAL_S="1"
    )


@pytest.fixture(params=["sqlite", "postgres"])
def db_env(request: pytest.FixtureRequest, env: dict[str, str]) -> Iterator[dict[str, str]]:
    """The workers' environment with the jobs database on SQLite or on PostgreSQL."""
    if request.param == "sqlite":
        yield env
        return
    with postgres_database(request.getfixturevalue("postgres_url")) as url:
        yield {**env, "OPTIFLOW_DATABASE_URL": url}


def client_for(env: dict[str, str]) -> Client:
    settings = Settings(
        redis_url=env["OPTIFLOW_REDIS_URL"],
        key_prefix=env["OPTIFLOW_KEY_PREFIX"],
        home=Path(env["OPTIFLOW_HOME"]),
        database_url=env["OPTIFLOW_DATABASE_URL"],
        stale_after_s=3,
    )
    return Client(settings, embedded=False)


@pytest.mark.timeout(900)
def test_kill_9_eval_then_control_worker_job_finishes_with_same_report(
    db_env: dict[str, str], tmp_path: Path
) -> None:
    """3 rounds: 2 on SQLite, 1 on PostgreSQL (``make chaos``: 20). Each round's restarted
    workers are the next round's."""
    env = db_env
    model = {"model": "optiflow/sim", "params": {"sim_latency_ms": 5}}
    spec = small(load_job(EXAMPLE, overrides={"fail_fast": False, "model": model}))
    expected = run_inline(spec)
    assert {r.stage for r in expected.rejected} == {"candidate", "greedy"}  # every branch
    rng = random.Random(int(os.environ.get("OPTIFLOW_CHAOS_SEED", "7")))
    rounds = ROUNDS if env["OPTIFLOW_DATABASE_URL"].startswith("sqlite") else PG_ROUNDS
    workers: list[WorkerProcess] = []
    try:
        with client_for(env) as client:
            for n in range(rounds):
                got, workers = run_round(
                    env, tmp_path, client, spec, rng, eval_steps=expected.stats.steps, n=n, workers=workers
                )
                where = f"round {n}: killed at {got.killed_at}"
                assert decisions(got.report) == decisions(expected), where
                # every (experiment, sample, run) counted once: as many evaluations as the pure run
                assert got.report.stats.evaluations == expected.stats.evaluations, where
                assert got.temp_tags_left == [], where
    finally:
        for p in workers:
            p.stop()


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


def test_optimize_job_survives_kill_9_of_the_control_worker(env: dict[str, str], tmp_path: Path) -> None:
    from optiflow.core.optimize.report import OptimizationHistory

    def decisions_of(h: object) -> tuple[object, ...]:
        assert isinstance(h, OptimizationHistory)
        return (
            tuple((i.number, i.score, i.best_so_far, i.new_best, i.status) for i in h.iterations),
            h.best_configuration,
            h.termination_reason.cause,
            len(h.rejections),
        )

    example = ROOT / "examples" / "weak-helpdesk" / "job.yaml"
    with client_for(env) as client:
        control, evaluator = start_workers(env, tmp_path, "o1", 4)
        restarted: list[WorkerProcess] = []
        try:
            undisturbed = client.submit_file(example).wait(timeout=180).raise_for_error().report
            job = client.submit_file(example)
            deadline = time.monotonic() + 120
            while client.runtime.jobs.get(job.id).step_index < 3:  # a few iterations in
                assert time.monotonic() < deadline and not job.record().finished
                time.sleep(0.01)
            control.kill()  # kill -9 the control worker in the middle of the run
            again = WorkerProcess(
                env, "optiflow.control", pool="prefork", concurrency=1, log=tmp_path / "control-o2.log"
            )
            restarted.append(again)
            again.wait_ready()
            got = job.wait(timeout=180).raise_for_error().report
        finally:
            for p in (control, evaluator, *restarted):
                p.stop()
    assert decisions_of(got) == decisions_of(undisturbed)
