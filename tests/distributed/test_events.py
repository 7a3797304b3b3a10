"""A consumer of a job's events sees every state once, in order, and a final run_finished:
on Redis pub/sub (published after commit) and from the events table."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import redis

from optiflow.distributed.testing import ROOT, running_workers, worker_env
from optiflow.interfaces.client import Client
from optiflow.interfaces.watch import follow
from optiflow.jobfile import load_job
from optiflow.settings import Settings
from optiflow.stores import keys

pytestmark = [pytest.mark.redis, pytest.mark.workers]
EXAMPLE = ROOT / "examples" / "support-bot" / "job.yaml"


def test_events_once_in_order_on_pubsub_and_in_the_table(
    redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    env = worker_env(redis_url, redis_prefix, tmp_path)
    settings = Settings(
        redis_url=redis_url, key_prefix=redis_prefix, home=tmp_path, database_url=env["OPTIFLOW_DATABASE_URL"]
    )
    sub = redis.Redis.from_url(redis_url).pubsub()
    sub.psubscribe(keys.events_channel(redis_prefix, "*"))
    sub.get_message(timeout=1)  # the subscribe confirmation
    heard: list[dict[str, Any]] = []

    def listen() -> None:
        while True:
            msg = sub.get_message(timeout=60)
            if msg is None:
                return
            if msg["type"] == "pmessage":
                heard.append(json.loads(msg["data"]))
                if heard[-1]["type"] == "run_finished":
                    return

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    with running_workers(env, tmp_path, eval_workers=1), Client(settings, embedded=False) as client:
        job = client.submit(load_job(EXAMPLE))
        stored = list(follow(job, timeout=180))
    listener.join(60)
    sub.close()

    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))
    assert len({e.key for e in stored}) == len(stored)
    statuses = [e.payload["status"] for e in stored if e.type == "run_status_changed"]
    assert statuses == ["queued", "running", "completed"]
    assert stored[-1].type == "run_finished" and stored[-1].payload["status"] == "completed"
    progress = [e.payload for e in stored if e.type == "progress_changed"]
    done = [p["evaluations_done"] for p in progress]
    assert done == sorted(done) and progress[-1]["running"] == 0
    trials = [e for e in stored if e.type == "trial_added_or_updated"]
    assert len(trials) == len(client.runtime.jobs.trials(job.id))

    # pub/sub carried the same events, in the same order (all of them: nothing was dropped here)
    assert [(h["seq"], h["key"]) for h in heard] == [(e.seq, e.key) for e in stored]
    assert {h["job_id"] for h in heard} == {job.id}
