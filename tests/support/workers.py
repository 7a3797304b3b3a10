"""Start and stop real ``celery worker`` processes (for tests and benchmarks)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from optiflow.settings import Settings

ROOT = Path(__file__).resolve().parents[2]  # the checkout: workers/ and examples/ live here


def embedded_settings(home: Path) -> Settings:
    """An embedded client's settings in ``home``. The URLs are explicitly None: an ``OPTIFLOW_*``
    URL in the environment must not make it distributed."""
    return Settings(
        home=home, redis_url=None, broker_url=None, result_backend=None, database_url=None, store="auto"
    )


def worker_env(redis_url: str, prefix: str, home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPTIFLOW_")}
    env.update(
        OPTIFLOW_REDIS_URL=redis_url,
        OPTIFLOW_KEY_PREFIX=prefix,
        OPTIFLOW_HOME=str(home),
        OPTIFLOW_DATABASE_URL=f"sqlite:///{home / 'optiflow.db'}",
        PYTHONPATH=str(ROOT),
        **extra,
    )
    return env


class WorkerProcess:
    """``celery -A APP worker -Q QUEUE -P POOL -c N`` as a child process, its output in ``log``."""

    def __init__(
        self,
        env: Mapping[str, str],
        queue: str,
        *,
        pool: str,
        concurrency: int,
        log: Path,
        app: str = "workers.app",
    ) -> None:
        self.name = f"{queue.rsplit('.', maxsplit=1)[-1]}-{uuid.uuid4().hex[:6]}@%h"
        self.log_path = log
        self.log = log.open("w")
        argv = ["-A", app, "worker", "-Q", queue, "-P", pool, "-c", str(concurrency), "-n", self.name]
        argv += ["--loglevel=INFO", "--without-gossip", "--without-mingle"]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", *argv],
            env=dict(env),
            cwd=ROOT,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: kill() takes the pool children too
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited early:\n{self.log_path.read_text()[-3000:]}")
            if "ready." in self.log_path.read_text():
                return
            time.sleep(0.1)
        raise RuntimeError(f"worker not ready after {timeout}s:\n{self.log_path.read_text()[-3000:]}")

    def kill(self) -> None:
        """``kill -9`` the worker and its pool processes: no warm shutdown, nothing acked."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.log.close()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.log.close()


@contextmanager
def running_workers(
    env: Mapping[str, str], logdir: Path, *, eval_workers: int = 1, eval_concurrency: int = 8
) -> Iterator[list[WorkerProcess]]:
    procs = [
        WorkerProcess(env, "optiflow.control", pool="prefork", concurrency=1, log=logdir / "control.log"),
        *(
            WorkerProcess(
                env,
                "optiflow.eval",
                pool="threads",
                concurrency=eval_concurrency,
                log=logdir / f"eval{i}.log",
            )
            for i in range(eval_workers)
        ),
    ]
    try:
        for p in procs:
            p.wait_ready()
        yield procs
    finally:
        for p in procs:
            p.stop()


@contextmanager
def postgres_database(server_url: str) -> Iterator[str]:
    """A throwaway, migrated PostgreSQL database on ``server_url``'s server (dropped after)."""
    import sqlalchemy as sa

    from optiflow.persistence.migrate import upgrade

    def run(url: str, statement: str) -> None:
        engine = sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
        try:
            with engine.connect() as conn:
                conn.execute(sa.text(statement))
        finally:
            engine.dispose()

    name = f"optiflow_run_{uuid.uuid4().hex[:12]}"
    run(server_url, f'CREATE DATABASE "{name}"')
    url = sa.make_url(server_url).set(database=name).render_as_string(hide_password=False)
    try:
        upgrade(url)
        yield url
    finally:
        run(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
