"""The compress job end to end on real Celery worker processes and the real Redis."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from optiflow.core.compress.report import OptimizationReport
from optiflow.interfaces.client import Client
from optiflow.interfaces.watch import follow
from optiflow.jobfile import load_job
from optiflow.settings import Settings
from optiflow.stores import keys
from tests.support.chaos import small
from tests.support.inline import run_inline
from tests.support.workers import ROOT, running_workers, worker_env

pytestmark = [pytest.mark.redis, pytest.mark.workers]
EXAMPLE = ROOT / "examples" / "support-bot" / "job.yaml"


def decisions(report: OptimizationReport) -> tuple[object, ...]:
    return (
        report.baseline_pass_rate,
        tuple((m.section_path, m.token_reduction, m.candidate_pass_rate) for m in report.modifications),
        tuple((r.section_path, r.stage, r.token_reduction) for r in report.rejected),
    )


@pytest.fixture
def env(redis_url: str, redis_prefix: str, tmp_path: Path) -> dict[str, str]:
    return worker_env(redis_url, redis_prefix, tmp_path)


def client_for(env: dict[str, str]) -> Client:
    settings = Settings(
        redis_url=env["OPTIFLOW_REDIS_URL"],
        key_prefix=env["OPTIFLOW_KEY_PREFIX"],
        home=Path(env["OPTIFLOW_HOME"]),
        database_url=env["OPTIFLOW_DATABASE_URL"],
    )
    return Client(settings, embedded=False)


def test_example_job_on_workers_equals_pure_workflow_then_apply(env: dict[str, str], tmp_path: Path) -> None:
    spec = load_job(EXAMPLE, overrides={"fail_fast": False})
    expected = run_inline(spec)
    with running_workers(env, tmp_path, eval_workers=1), client_for(env) as client:
        job = client.submit(spec)
        result = job.wait(timeout=180).raise_for_error()
        assert job.status() == "completed"
        assert result.report is not None
        got = result.report
        assert got.modifications == expected.modifications
        assert got.rejected == expected.rejected
        assert got.baseline_pass_rate == expected.baseline_pass_rate
        # the branches the example is built to exercise
        assert got.modifications and got.rejected
        assert any(r.stage == "greedy" for r in got.rejected)
        # no temporary tag left behind
        store = client.runtime.store
        assert [t for t in store.list_tags(spec.prompt.ns, spec.prompt.key) if t.startswith("opt-")] == []

        before = client.runtime.store.history(spec.prompt.ns, spec.prompt.key)
        out = subprocess.run(
            [sys.executable, "-m", "optiflow.interfaces.cli", "apply", job.id],
            check=False,
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        history = store.history(spec.prompt.ns, spec.prompt.key)
        # a tag's first apply also records what it rendered before (the version a rollback returns to)
        assert len(history) == len(before) + (1 if before else 2)
        stable = store.resolve(spec.prompt.ns, spec.prompt.key, "stable")
        assert stable is not None
        sample = spec.dataset.samples[0].input
        assert spec.prompt.render(sample, overrides=stable).system != spec.prompt.render(sample).system
        bodies = spec.prompt.effective_bodies(stable)
        assert {m.section_path: m.proposed_body for m in got.modifications}.items() <= bodies.items()


def test_fail_fast_keeps_decisions_and_saves_calls_events_once_in_order(
    env: dict[str, str], tmp_path: Path
) -> None:
    """Also: a consumer of the fail-fast job's events sees every state once, in order, and a
    final run_finished, on Redis pub/sub (published after commit) and in the events table."""
    slow_spec = small(load_job(EXAMPLE, overrides={"fail_fast": False}))
    fast_spec = small(load_job(EXAMPLE))
    sub = redis.Redis.from_url(env["OPTIFLOW_REDIS_URL"]).pubsub()
    sub.psubscribe(keys.events_channel(env["OPTIFLOW_KEY_PREFIX"], "*"))
    sub.get_message(timeout=1)  # the subscribe confirmation
    with running_workers(env, tmp_path, eval_workers=1), client_for(env) as client:
        slow = client.submit(slow_spec).wait(timeout=180).raise_for_error().report
        while sub.get_message(timeout=0.2) is not None:  # the first job's events
            pass
        job = client.submit(fast_spec)
        stored = list(follow(job, timeout=180))
        fast = job.wait(timeout=30).raise_for_error().report
        trials = client.runtime.jobs.trials(job.id)
        # no worker keeps a subscription per header task after its chords (celery/celery#4824)
        db = str(redis.connection.parse_url(env["OPTIFLOW_REDIS_URL"]).get("db", 0))
        subscribed = [
            int(c["sub"])
            for c in redis.Redis.from_url(env["OPTIFLOW_REDIS_URL"]).client_list()
            if c["db"] == db
        ]
        assert max(subscribed) <= 1, subscribed
    heard = [
        json.loads(m["data"])
        for m in iter(lambda: sub.get_message(timeout=2), None)
        if m["type"] == "pmessage"
    ]
    sub.close()
    assert isinstance(slow, OptimizationReport) and isinstance(fast, OptimizationReport)
    assert decisions(fast) == decisions(slow)
    assert fast.stats.model_calls < slow.stats.model_calls
    assert fast.stats.fail_fast_skipped > 0

    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))
    assert len({e.key for e in stored}) == len(stored)
    statuses = [e.payload["status"] for e in stored if e.type == "run_status_changed"]
    assert statuses == ["queued", "running", "completed"]
    assert stored[-1].type == "run_finished" and stored[-1].payload["status"] == "completed"
    progress = [e.payload for e in stored if e.type == "progress_changed"]
    done = [p["evaluations_done"] for p in progress]
    assert done == sorted(done) and progress[-1]["running"] == 0
    assert len(progress) == 1 + fast.stats.steps  # at the start, then after every step
    assert len([e for e in stored if e.type == "trial_added_or_updated"]) == len(trials)
    # pub/sub carried the same events in the same order (nothing was dropped here)
    assert [(h["seq"], h["key"]) for h in heard] == [(e.seq, e.key) for e in stored]
    assert {h["job_id"] for h in heard} == {job.id}


def test_permanent_model_failure_fails_job_with_provider_message(env: dict[str, str], tmp_path: Path) -> None:
    spec = load_job(EXAMPLE, overrides={"model": {"model": "no-such-provider/model-x", "retries": 0}})
    with running_workers(env, tmp_path, eval_workers=1), client_for(env) as client:
        job = client.submit(spec)
        result = job.wait(timeout=120)
        assert result.status == "failed"
        assert result.error and "no-such-provider" in result.error
        assert job.status() == "failed"
        tags = client.runtime.store.list_tags(spec.prompt.ns, spec.prompt.key)
        assert [t for t in tags if t.startswith("opt-")] == []
