"""``make bench-memory``: what 200 submissions of 1 MB job documents leave in an eval worker.

Issue 20: 16 measure jobs, each with a different 5 MB filler section, took an eval worker from
323 MB to 843 MB, because the memo caches were keyed by full prompt texts and capped by count
only. This bench runs a real eval worker (threads, 8) and a control worker on Redis, submits 200
measure jobs one after another through the Python client, each with its own 1 MB filler section
(a different text every time), 1 sample and 1 run on ``optiflow/sim``, and reads the eval
worker's resident set size (``VmRSS`` of ``/proc/PID/status``) before the first job, after the
first (litellm and tiktoken are imported on the first model call), every 20 jobs and at the end.

Target: the worker's RSS after 200 jobs within 100 MB of where it started (after the first job:
the imports are not a leak).

The API (issue 27): 100 finished jobs whose prompts are 4 MB each (and whose results carry a 4 MB
section) in the job database, then a real ``optiflow serve`` process answering ``GET
/api/jobs?limit=100`` ten times in a row and eight times at once. Target: its RSS within 100 MB of
idle (after it started and answered its first small list). Before, every listed job's spec,
checkpoint and result were read: 20 such jobs took a list of 100 to 3.5 s and the API from 151 MB
to 1.17 GB.

Writes ``bench/memory_results.md`` (and ``.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.compress import bench_env
from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job_data
from optiflow.settings import Settings
from tests.support.http import job_document
from tests.support.workers import postgres_database, running_workers

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


def _api_jobs(db_url: str, jobs: int, size: int) -> None:
    """``jobs`` finished compress jobs, each with a prompt of ``size`` characters and a result whose
    report carries a section of that size: what a list must not read."""
    from optiflow.persistence import JobRepository

    repo = JobRepository(db_url, auto_migrate=True)
    try:
        for i in range(jobs):
            body = filler(10_000 + i, size)
            spec: dict[str, Any] = {"kind": "compress", "prompt": {"sections": [{"path": "a", "body": body}]}}
            report = {
                "kind": "compress",
                "total_token_reduction": 12,
                "modifications": [{"section": "a", "new_body": body}],
                "rejected": [],
            }
            repo.create(f"api-{i:04d}", kind="compress", name=f"big-{i}", spec=spec)
            repo.finish(f"api-{i:04d}", "completed", result={"report": report})
    finally:
        repo.close()


def _serve(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "optiflow.interfaces.cli", "serve", "--port", "0"],
        env={**env, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("serving on "):
            return proc, line.split()[2]
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError("optiflow serve did not start")


def run_api(jobs: int, size: int, postgres: str | None = None) -> dict[str, Any]:
    """The API part; on ``postgres`` (a server URL) in a database of its own, else on SQLite."""
    import httpx

    with bench_env() as (base, _home), ExitStack() as stack:
        env = dict(base)
        if postgres:
            env["OPTIFLOW_DATABASE_URL"] = stack.enter_context(postgres_database(postgres))
        _api_jobs(env["OPTIFLOW_DATABASE_URL"], jobs, size)
        proc, url = _serve(env)
        try:
            httpx.get(f"{url}/api/jobs", params={"limit": 1}, timeout=60).raise_for_status()
            idle = rss_mb(proc.pid)
            seconds = []
            for _ in range(10):
                t0 = time.perf_counter()
                response = httpx.get(f"{url}/api/jobs", params={"limit": 100}, timeout=120)
                seconds.append(time.perf_counter() - t0)
                response.raise_for_status()
                assert len(response.json()["jobs"]) == min(jobs, 100)
            sequential = rss_mb(proc.pid)

            def one(_: int) -> float:
                t0 = time.perf_counter()
                httpx.get(f"{url}/api/jobs", params={"limit": 100}, timeout=120).raise_for_status()
                return time.perf_counter() - t0

            with ThreadPoolExecutor(8) as pool:
                concurrent = list(pool.map(one, range(8)))
            end = rss_mb(proc.pid)
            answer_bytes = len(response.content)
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    return {
        "jobs": jobs,
        "prompt_bytes": size,
        "idle_mb": idle,
        "after_sequential_mb": sequential,
        "end_mb": end,
        "growth_mb": max(sequential, end) - idle,
        "answer_bytes": answer_bytes,
        "sequential_s": [round(x, 3) for x in seconds],
        "concurrent_s": [round(x, 3) for x in concurrent],
        "target_mb": TARGET_MB,
        "ok": max(sequential, end) - idle <= TARGET_MB,
        "database": "PostgreSQL" if postgres else "SQLite",
    }


def _api_section(api: dict[str, Any]) -> str:
    verdict = "PASS" if api["ok"] else "FAIL"
    seq, conc = sorted(api["sequential_s"]), sorted(api["concurrent_s"])
    return f"""
## The API: listing {api["jobs"]} jobs with {api["prompt_bytes"] / 1e6:g} MB prompts ({api["database"]})

{api["jobs"]} finished compress jobs in the job database, each with a {api["prompt_bytes"] / 1e6:g} MB prompt and a result
carrying a {api["prompt_bytes"] / 1e6:g} MB section; a real `optiflow serve` process; `GET /api/jobs?limit=100` ten
times in a row, then eight at once. RSS is the API process's `VmRSS`.

| | API RSS (MB) |
| --- | ---: |
| idle (started, one small list answered) | {api["idle_mb"]:.0f} |
| after 10 lists of 100 | {api["after_sequential_mb"]:.0f} |
| after 8 more at once | {api["end_mb"]:.0f} |

- one list: {api["answer_bytes"]:,} bytes, {seq[len(seq) // 2] * 1000:.0f} ms median in a row (slowest
  {seq[-1] * 1000:.0f} ms); eight at once: slowest {conc[-1] * 1000:.0f} ms.
- **{verdict}**: growth {api["growth_mb"]:+.0f} MB over idle, target within {api["target_mb"]:.0f} MB. The list reads
  summary columns only (`JobRepository.summaries`; a job's outcome is stored when it ends); before,
  20 such jobs took a list of 100 to 3.5 s and the API from 151 MB to 1.17 GB (issue 27).{_sqlite_note(api)}
"""


def _sqlite_note(api: dict[str, Any]) -> str:
    if api.get("database") != "SQLite":
        return ""
    return """
- SQLite keeps a row's columns in order and reads past the earlier ones to reach a later one: the
  list's time still grows with the size of the listed jobs' specs and results (about 3 ms per
  8 MB job on this machine), though none of it is kept. PostgreSQL stores large values apart
  (TOAST), and a list there does not read them."""


def write(out: Path, data: dict[str, Any]) -> None:
    out.with_suffix(".json").write_text(json.dumps(data, indent=2) + "\n")
    api = "".join(_api_section(data[k]) for k in ("api", "api_postgres") if data.get(k))
    if "points" not in data:  # the API part alone
        out.write_text(f"# Memory (`make bench-memory`)\n\n{data['date']}, {data['machine']}.\n{api}")
        return
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
        + api
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--size", type=int, default=1_000_000, help="filler bytes per document")
    parser.add_argument("--every", type=int, default=20)
    parser.add_argument("--api-jobs", type=int, default=100)
    parser.add_argument("--api-size", type=int, default=4_000_000, help="prompt bytes per listed job")
    parser.add_argument("--part", choices=["worker", "api", "all"], default="all")
    parser.add_argument(
        "--postgres",
        default=os.environ.get(
            "OPTIFLOW_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
        ),
        help="a PostgreSQL server for the API part's second run ('' to skip it)",
    )
    parser.add_argument("--out", type=Path, default=Path("bench/memory_results.md"))
    args = parser.parse_args()
    data: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    if args.part in ("worker", "all"):
        data = run(args.jobs, args.size, args.every)
    if args.part in ("api", "all"):
        data["api"] = run_api(args.api_jobs, args.api_size)
        print(f"API: idle {data['api']['idle_mb']:.0f} MB, end {data['api']['end_mb']:.0f} MB", flush=True)
        if args.postgres:
            data["api_postgres"] = run_api(args.api_jobs, args.api_size, args.postgres)
            print(f"API (PostgreSQL): end {data['api_postgres']['end_mb']:.0f} MB", flush=True)
    write(args.out, data)
    print(args.out.read_text())
    parts = [data.get(k, {}) for k in ("api", "api_postgres")]
    if not data.get("ok", True) or not all(p.get("ok", True) for p in parts):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
