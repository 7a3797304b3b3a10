"""``make bench-real-optimize-live``: the live optimize job of ``bench/real_optimize_job`` on
SmolLM2 through real Celery workers on Redis, its history file written where
``make bench-real-optimize`` reads it.

It starts the local model (llama.cpp, ``optiflow.llm.local_model``) on 127.0.0.1:8121, the port the
job file names, a control worker and an eval worker (threads, 4) on Redis
(``OPTIFLOW_BENCH_REDIS_URL``, default db 10, a key prefix of its own, removed afterwards), and runs
``optiflow submit bench/real_optimize_job/job.yaml --wait`` against them. Every process it started
is stopped before it returns.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import redis

from optiflow.llm.local_model import LocalModelServer
from tests.support.workers import ROOT, running_workers, worker_env

JOB = ROOT / "bench" / "real_optimize_job" / "job.yaml"
HISTORY = JOB.parent / "history.yaml"


def main() -> int:
    url = os.environ.get("OPTIFLOW_BENCH_REDIS_URL", "redis://127.0.0.1:6379/10")
    prefix = f"optiflow-real-opt-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        env = worker_env(url, prefix, home)
        server = LocalModelServer(port=8121, log=home / "llama.log")
        server.start(timeout=120)
        try:
            with running_workers(env, home, eval_workers=1, eval_concurrency=4):
                subprocess.run(
                    [sys.executable, "-m", "optiflow.interfaces.cli", "db", "upgrade"], env=env, check=True
                )
                out = home / "history"
                done = subprocess.run(
                    [
                        *(sys.executable, "-m", "optiflow.interfaces.cli", "submit", str(JOB)),
                        *("--wait", "--history-dir", str(out)),
                    ],
                    env=env,
                    cwd=ROOT,
                    check=False,
                )
                files = sorted(out.rglob("*.yaml")) if out.exists() else []
                if done.returncode != 0 or not files:
                    print(f"the job did not complete (exit {done.returncode})", file=sys.stderr)
                    return 1
                shutil.copyfile(files[-1], HISTORY)
                print(f"wrote {HISTORY}")
        finally:
            server.stop()
            client = redis.Redis.from_url(url)
            keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
            for i in range(0, len(keys), 1000):
                client.delete(*keys[i : i + 1000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
