"""``make bench-memory``: what 200 submissions of 1 MB job documents leave in an eval worker.

Issue 20: 16 measure jobs, each with a different 5 MB filler section, took an eval worker from
323 MB to 843 MB, because the memo caches were keyed by full prompt texts and capped by count
only. This bench runs a real eval worker (threads, 8) and a control worker on Redis, submits 200
measure jobs one after another through the Python client, each with its own 1 MB filler section
(a different text every time), 1 sample and 1 run on ``optiflow/sim``, and reads the eval
worker's resident set size (``VmRSS`` of ``/proc/PID/status``) before the first job, after the
first (litellm and tiktoken are imported on the first model call), every 20 jobs and at the end.

Target: the worker's RSS after 200 jobs within 100 MB of where it started (after the first job:
the imports are not a leak). Writes ``bench/memory_results.md`` (and ``.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.compress import bench_env
from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job_data
from optiflow.settings import Settings
from tests.support.http import job_document
from tests.support.workers import running_workers

TARGET_MB = 100.0
WORDS = [
    "please",
    "note",
    "that",
    "our",
    "team",
    "always",
    "values",
    "clear",
    "and",
    "friendly",
    "answers",
    "for",
    "every",
    "customer",
    "who",
    "writes",
    "to",
    "us",
    "about",
    "orders",
    "parcels",
    "accounts",
    "payments",
    "and",
    "anything",
    "else",
    "they",
    "may",
    "need",
    "today",
]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def filler(i: int, size: int) -> str:
    rng = random.Random(i)
    words: list[str] = []
    n = 0
    while n < size:
        word = rng.choice(WORDS)
        words.append(word)
        n += len(word) + 1
    return f"Filler {i}. " + " ".join(words)[:size]


def document(i: int, size: int) -> dict[str, Any]:
    doc = job_document(1)
    doc = {k: v for k, v in doc.items() if k in ("prompt", "dataset", "check", "model")}
    doc["prompt"]["sections"][1]["body"] += "\n\n" + filler(i, size)
    return {**doc, "kind": "measure", "name": f"memory-{i}", "runs": 1}


def run(jobs: int, size: int, every: int) -> dict[str, Any]:
    with bench_env() as (env, home):
        os.environ.update({k: env[k] for k in ("OPTIFLOW_REDIS_URL", "OPTIFLOW_KEY_PREFIX")})
        settings = Settings(
            redis_url=env["OPTIFLOW_REDIS_URL"],
            key_prefix=env["OPTIFLOW_KEY_PREFIX"],
            home=home,
            database_url=env["OPTIFLOW_DATABASE_URL"],
        )
        logdir = home / "logs"
        logdir.mkdir()
        with (
            running_workers(env, logdir, eval_workers=1, eval_concurrency=8) as procs,
            Client(settings, embedded=False) as client,
        ):
            pid = procs[1].pid
            points: list[dict[str, float]] = [{"jobs": 0, "rss_mb": rss_mb(pid), "s": 0.0}]
            started = time.monotonic()
            for i in range(1, jobs + 1):
                spec = load_job_data(document(i, size), source="bench")
                result = client.submit(spec).wait(timeout=600)
                if result.status != "completed":
                    raise RuntimeError(f"job {i}: {result.status}: {result.error}")
                if i == 1 or i % every == 0 or i == jobs:
                    points.append(
                        {"jobs": i, "rss_mb": rss_mb(pid), "s": round(time.monotonic() - started, 1)}
                    )
                    print(f"{i:4d} jobs  eval worker RSS {points[-1]['rss_mb']:.0f} MB", flush=True)
    start = points[1]["rss_mb"]
    end = points[-1]["rss_mb"]
    return {
        "jobs": jobs,
        "document_bytes": size,
        "points": points,
        "before_any_job_mb": points[0]["rss_mb"],
        "after_first_job_mb": start,
        "end_mb": end,
        "growth_mb": end - start,
        "peak_mb": max(p["rss_mb"] for p in points),
        "target_mb": TARGET_MB,
        "ok": end - start <= TARGET_MB,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def write(out: Path, data: dict[str, Any]) -> None:
    out.with_suffix(".json").write_text(json.dumps(data, indent=2) + "\n")
    rows = "\n".join(f"| {p['jobs']} | {p['rss_mb']:.0f} | {p['s']} |" for p in data["points"])
    verdict = "PASS" if data["ok"] else "FAIL"
    out.write_text(
        f"""# Memory: {data["jobs"]} submissions of {data["document_bytes"] / 1e6:g} MB documents (`make bench-memory`)

{data["date"]}, {data["machine"]}. One eval worker (threads, 8) and one control worker on Redis;
measure jobs submitted one after another through the Python client, each with its own
{data["document_bytes"] / 1e6:g} MB filler section (a different text every time), 1 sample, 1 run,
`optiflow/sim`. RSS is the eval worker's `VmRSS`.

| jobs done | eval worker RSS (MB) | elapsed (s) |
| ---: | ---: | ---: |
{rows}

- before any job: {data["before_any_job_mb"]:.0f} MB; after the first job (litellm and tiktoken
  imported): {data["after_first_job_mb"]:.0f} MB; after {data["jobs"]}: {data["end_mb"]:.0f} MB
  (peak {data["peak_mb"]:.0f} MB).
- **{verdict}**: growth after the first job {data["growth_mb"]:+.0f} MB, target within
  {data["target_mb"]:.0f} MB. The memo caches (token counts, the simulated model's rule and policy
  parsers, the runtime's specs, samples, workflows and tags) are keyed by digest and capped by
  bytes (`optiflow/core/memo.py`); before, each kept every prompt text it had seen (4,096 token
  counts, 512 parses each, 64 specs).
"""
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--size", type=int, default=1_000_000, help="filler bytes per document")
    parser.add_argument("--every", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("bench/memory_results.md"))
    args = parser.parse_args()
    data = run(args.jobs, args.size, args.every)
    write(args.out, data)
    print(args.out.read_text())
    if not data["ok"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
