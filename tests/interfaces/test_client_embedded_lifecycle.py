"""Embedded clients own the process's one embedded worker: closing one ends its jobs, and a
second one is refused while the first runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from optiflow.errors import ConfigError, JobError
from optiflow.interfaces.client import Client
from tests.support.workers import ROOT, embedded_settings

EXAMPLE = ROOT / "examples" / "support-bot" / "job.yaml"
NS, KEY = "support", "bot"


def test_closing_the_client_ends_its_unfinished_jobs(tmp_path: Path) -> None:
    """An embedded job lives in its client's process: closing the client must not leave it
    'running' forever in the database."""
    settings = embedded_settings(tmp_path)
    with Client(settings) as c:
        job = c.submit_file(EXAMPLE, model={"model": "optiflow/sim", "params": {"sim_latency_ms": 50}})
        with pytest.raises(JobError):
            job.wait(timeout=0.2)
    with Client(settings) as reader:
        rec = reader.job(job.id).record()
        assert rec.status == "cancelled", rec.status
        assert rec.error and "closed" in rec.error
        assert reader.job(job.id).wait(timeout=1).status == "cancelled"  # answered from the database
        assert [t for t in reader.runtime.store.list_tags(NS, KEY) if t.startswith("opt-")] == []


def test_one_embedded_worker_per_process(tmp_path: Path) -> None:
    """Celery's worker set-up is process-wide: a second embedded worker is refused clearly, and
    one can start again once the first client is closed."""
    with Client(embedded_settings(tmp_path / "a")) as a:
        a._ensure_worker()
        with Client(embedded_settings(tmp_path / "b")) as b, pytest.raises(ConfigError, match="already runs"):
            b._ensure_worker()
        assert a._worker is not None and a._worker.thread.is_alive()
    with Client(embedded_settings(tmp_path / "c")) as c:
        c._ensure_worker()
        assert c._worker is not None and c._worker.thread.is_alive()
