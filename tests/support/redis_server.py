"""A Redis server of a test's own, on a free port: for tests that stop Redis (the shared one at
127.0.0.1:6379 must never be stopped) or that must see every key written."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from optiflow.llm.local_model import free_port


@contextmanager
def private_redis(workdir: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``(url, process)`` of a fresh ``redis-server`` (no persistence), killed on exit."""
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    try:
        for _ in range(200):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None:
                    raise RuntimeError("redis-server exited at start") from None
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0", proc
    finally:
        client.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
