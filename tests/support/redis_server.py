"""A Redis server of a test's own, on a port of its own: for tests that stop Redis (the shared one
at 127.0.0.1:6379 must never be stopped) or that must see every key written."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from optiflow.llm.local_model import free_port


class RedisServer:
    """``redis-server`` (no persistence) on ``port``, its output appended to ``log``; can be
    stopped and started again on the same port."""

    def __init__(self, port: int, log: Path) -> None:
        self.port, self.log = port, log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            pytest.fail("redis-server not found")
        argv = [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen(argv, stdout=self.log.open("a"), stderr=subprocess.STDOUT)
        client = redis.Redis(port=self.port)
        try:
            for _ in range(200):
                try:
                    client.ping()
                    return
                except redis.ConnectionError:
                    if self.proc.poll() is not None:
                        raise RuntimeError(f"redis-server exited at start:\n{self.log.read_text()}") from None
                    time.sleep(0.05)
            raise RuntimeError(self.log.read_text())
        finally:
            client.close()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None


@contextmanager
def private_redis(workdir: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``(url, process)`` of a fresh ``redis-server`` on a free port, killed on exit."""
    server = RedisServer(free_port(), workdir / "redis-server.log")
    server.start()
    assert server.proc is not None
    try:
        yield server.url, server.proc
    finally:
        server.stop()
