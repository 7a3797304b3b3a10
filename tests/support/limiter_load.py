"""One process of a fleet sharing a Redis limiter, for the rate test: ``threads`` callers each
admit a call, hold it ``call_s`` and finish it, for ``duration_s``. It prints ``ready`` once
imported and connected, reads the start time (epoch seconds) from stdin, and prints one JSON line:
every admission time and every call's (start, end).

    python -m tests.support.limiter_load REDIS_URL PREFIX ROUTE_JSON DURATION_S THREADS CALL_S
"""

from __future__ import annotations

import json
import sys
import threading
import time

import redis

from optiflow.core.rate_limits import ModelLimits, RouteLimit
from optiflow.distributed.ratelimit import RedisLimiterBackend
from optiflow.llm.limiter import Limiter, Outcome


def main(argv: list[str]) -> None:
    url, prefix, route_json, duration_s, threads, call_s = argv
    route = RouteLimit.model_validate_json(route_json)
    client = redis.Redis.from_url(url)
    client.ping()
    limiter = Limiter(ModelLimits(routes=(route,)), RedisLimiterBackend(client, prefix))
    print("ready", flush=True)
    start_at = float(sys.stdin.readline())
    end_at = float(start_at) + float(duration_s)
    admits: list[float] = []
    calls: list[tuple[float, float]] = []
    lock = threading.Lock()

    def caller() -> None:
        while time.time() < end_at:
            lease, _ = limiter.admit(route, 0, lease_s=10)
            began = time.time()
            time.sleep(float(call_s))
            ended = time.time()
            limiter.finish(route, lease, Outcome())
            with lock:
                admits.append(began)
                calls.append((began, ended))

    time.sleep(max(0.0, float(start_at) - time.time()))
    workers = [threading.Thread(target=caller) for _ in range(int(threads))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print(json.dumps({"admits": admits, "calls": calls}))


if __name__ == "__main__":
    main(sys.argv[1:])
