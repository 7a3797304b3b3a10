"""The Redis limiter shared by several real processes: the measured rate over a 10 s window is
the configured one (within 5%), and the concurrency cap holds across processes."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from optiflow.core.rate_limits import RouteLimit
from tests.support.workers import ROOT

pytestmark = [pytest.mark.redis]

PROCESSES, THREADS = 4, 4
WINDOW_S, WARMUP_S = 10.0, 1.0


def test_processes_sharing_one_bucket_keep_the_configured_rate(redis_url: str, redis_prefix: str) -> None:
    route = RouteLimit(name="fleet", model="m", rpm=3000, concurrency=4, burst_s=0.5)  # 50/s
    argv = [redis_url, redis_prefix, route.model_dump_json(), str(WARMUP_S + WINDOW_S + 0.5)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.support.limiter_load", *argv, str(THREADS), "0.03"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    for proc in procs:  # every process imported and connected before the clock starts
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    start_at = time.time() + 0.2
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(f"{start_at!r}\n")
        proc.stdin.flush()
    outputs = []
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        outputs.append(json.loads(out))
    admits = sorted(t for o in outputs for t in o["admits"])
    assert all(o["admits"] for o in outputs)  # every process got its share of turns
    begin = start_at + WARMUP_S  # past the initial burst
    in_window = sum(1 for t in admits if begin <= t < begin + WINDOW_S)
    expected = route.rpm / 60 * WINDOW_S  # type: ignore[operator]
    assert abs(in_window - expected) <= 0.05 * expected, (in_window, expected)
    # the concurrency cap (4) holds across the 16 callers of 4 processes
    edges = sorted(
        [(s, 1) for o in outputs for s, _ in o["calls"]] + [(e, -1) for o in outputs for _, e in o["calls"]]
    )
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    assert peak <= route.concurrency  # type: ignore[operator]


def test_spend_never_passes_its_cap_under_contention(redis_url: str, redis_prefix: str) -> None:
    """The budget primitive: concurrent spenders against one cap, atomically."""
    from concurrent.futures import ThreadPoolExecutor

    import redis

    from optiflow.distributed.ratelimit import spend

    client = redis.Redis.from_url(redis_url)
    key = f"{redis_prefix}:budget"
    with ThreadPoolExecutor(8) as pool:
        spent = list(pool.map(lambda _: spend(client, key, 1.5, cap=15.0)[0], range(40)))
    assert sum(spent) == 10
    ok, total = spend(client, key, 0.5, cap=15.0)
    assert not ok and total == 15.0
    assert spend(client, key, -3.0, cap=15.0) == (True, 12.0)  # a refund always goes through
    assert spend(client, key, 2.0, cap=None, ttl_s=60) == (True, 14.0) and 0 < client.ttl(key) <= 60
    client.close()
