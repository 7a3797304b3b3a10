"""A throwaway ``redis-server`` on a port of its own: tests that stop Redis never stop the shared one."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
import redis


class RedisServer:
    def __init__(self, port: int, log: Path) -> None:
        self.port, self.log = port, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            pytest.fail("redis-server not found")
        argv = [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen(argv, stdout=self.log.open("a"), stderr=subprocess.STDOUT)
        client = redis.Redis(port=self.port)
        for _ in range(100):
            try:
                client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError(self.log.read_text())

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None
