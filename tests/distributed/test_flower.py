"""Flower shows optiflow's tasks by name with the job id in their arguments.

Workers do not send task events by default (OPTIFLOW_TASK_EVENTS=false): Flower broadcasts
``enable_events`` while it runs, so events cost nothing when nobody watches. This test runs the
real ``celery -A workers.app flower`` against real workers and reads its HTTP API, with basic auth
from FLOWER_BASIC_AUTH as docker-compose.yml and deploy/k8s run it (without credentials its API
answers 401).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job
from optiflow.llm.local_model import free_port
from optiflow.settings import Settings
from tests.support.chaos import small
from tests.support.workers import ROOT, running_workers, worker_env

pytestmark = [pytest.mark.redis, pytest.mark.workers]
EXAMPLE = ROOT / "examples" / "support-bot" / "job.yaml"


CREDENTIALS = "admin:test-only"


def _get(url: str, credentials: str | None = CREDENTIALS) -> Any:
    request = urllib.request.Request(url)
    if credentials:
        request.add_header("Authorization", "Basic " + base64.b64encode(credentials.encode()).decode())
    with urllib.request.urlopen(request, timeout=5) as resp:
        return json.loads(resp.read())


def test_flower_lists_optiflow_tasks_with_job_id(redis_url: str, redis_prefix: str, tmp_path: Path) -> None:
    env = worker_env(redis_url, redis_prefix, tmp_path, FLOWER_BASIC_AUTH=CREDENTIALS)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "flower.log").open("w")
    flower = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "workers.app",
            "flower",
            f"--port={port}",
            "--address=127.0.0.1",
        ],
        env=env,
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        with running_workers(env, tmp_path, eval_workers=1, eval_concurrency=8) as workers:
            deadline = time.monotonic() + 60
            while True:  # Flower answers, and has met the workers (its enable_events reached them)
                try:
                    if len(listed := _get(f"{base}/api/workers?refresh=1")) >= 2:
                        break
                except OSError:
                    pass
                assert time.monotonic() < deadline, (tmp_path / "flower.log").read_text()[-2000:]
                time.sleep(0.5)
            # one entry per named worker (-n NAME@%h), not one host for both
            assert sorted(n.split("@")[0] for n in listed) == sorted(w.name.split("@")[0] for w in workers)
            with pytest.raises(urllib.error.HTTPError) as refused:
                _get(f"{base}/api/workers", credentials=None)
            assert refused.value.code == 401
            time.sleep(6)  # one enable_events period (5 s), so events are on before the job runs
            settings = Settings(
                redis_url=redis_url,
                key_prefix=redis_prefix,
                home=tmp_path,
                database_url=env["OPTIFLOW_DATABASE_URL"],
            )
            with Client(settings, embedded=False) as client:
                job = client.submit(small(load_job(EXAMPLE)))
                job.wait(timeout=180).raise_for_error()
            deadline = time.monotonic() + 20
            while True:
                tasks = _get(f"{base}/api/tasks?taskname=optiflow.evaluate&limit=5")
                if tasks:
                    break
                assert time.monotonic() < deadline, "Flower saw no optiflow.evaluate task"
                time.sleep(0.5)
            assert all(job.id in t["args"] for t in tasks.values())
            advance = _get(f"{base}/api/tasks?taskname=optiflow.advance&limit=5")
            assert advance and all(job.id in t["args"] for t in advance.values())
    finally:
        flower.terminate()
        try:
            flower.wait(10)
        except subprocess.TimeoutExpired:
            flower.kill()
        log.close()
