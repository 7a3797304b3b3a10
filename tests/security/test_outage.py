"""Redis or the database down (issue 12): reading a job, its event stream and cancelling it answer
503 with a code, never 500, and write nothing; /healthz stays alive while /readyz names what is
down; everything answers again once Redis is back. A throwaway redis-server of its own, never the
shared one, and a throwaway PostgreSQL database."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from optiflow.core.progress import status_changed
from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job_data
from optiflow.llm.local_model import free_port
from optiflow.settings import Settings
from tests.support.http import Server, job_document, read_sse
from tests.support.redis_server import RedisServer
from tests.support.workers import embedded_settings, postgres_database


@pytest.fixture
def redis_server(redis_url: str, tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(free_port(), tmp_path / "redis.log")
    server.start()
    yield server
    server.stop()


@pytest.mark.redis
def test_redis_down_gives_503_with_a_code_and_readiness_names_it(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    settings = Settings(
        home=tmp_path,
        redis_url=f"redis://127.0.0.1:{redis_server.port}/0",
        broker_url=None,
        result_backend=None,
        database_url=f"sqlite:///{tmp_path / 'jobs.db'}",
        key_prefix=f"optiflow-outage-{uuid.uuid4().hex[:6]}",
    )
    with Client(settings) as client, Server(client, poll_s=0.05, keepalive_s=0.3) as server:
        assert not client.runtime.embedded
        spec = load_job_data(job_document(2), source="test")
        job_id = uuid.uuid4().hex  # a queued job nobody runs (no worker here)
        client.runtime.jobs.create(
            job_id, spec.kind, spec.name, spec.model_dump(mode="json"), events=[status_changed("queued")]
        )
        http = httpx.Client(base_url=server.url, timeout=10)
        assert http.get(f"/api/jobs/{job_id}").status_code == 200
        ready = http.get("/readyz")
        assert ready.status_code == 200 and ready.json()["checks"] == {"database": "ok", "redis": "ok"}

        with http.stream("GET", f"/api/jobs/{job_id}/events") as stream:
            lines = stream.iter_lines()
            assert next(lines).startswith("id: 1")  # the stream is open; now Redis goes away
            redis_server.stop()
            rest = read_sse_lines(lines)
        assert rest[-1]["event"] == "unavailable" and "redis_unavailable" in rest[-1]["data"]

        for method, path in [
            ("GET", f"/api/jobs/{job_id}"),
            ("GET", f"/api/jobs/{job_id}/events"),
            ("POST", f"/api/jobs/{job_id}/cancel"),
        ]:
            response = http.request(method, path)
            assert response.status_code == 503, (method, path, response.text)
            error = response.json()["error"]
            assert (error["code"], error["field"]) == ("redis_unavailable", "redis"), error
        assert client.runtime.jobs.get(job_id).status == "queued"  # the refused cancel wrote nothing
        assert http.get("/api/jobs").status_code == 200  # the database alone still answers lists

        assert http.get("/healthz").json() == {"ok": True}
        for path in ("/readyz", "/healthz?ready=1"):
            ready = http.get(path)
            assert ready.status_code == 503, ready.text
            assert ready.json()["down"] == ["redis"] and ready.json()["checks"]["database"] == "ok"

        redis_server.start()
        assert http.get("/readyz").status_code == 200
        assert http.get(f"/api/jobs/{job_id}").json()["status"] == "queued"


def read_sse_lines(lines: Iterator[str]) -> list[dict[str, str]]:
    class Lines:
        def iter_lines(self) -> Iterator[str]:
            return lines

    return read_sse(Lines())  # type: ignore[arg-type]


@pytest.mark.postgres
def test_database_down_gives_503_with_a_code_and_readiness_names_it(
    postgres_url: str, tmp_path: Path
) -> None:
    """The jobs database goes away (dropped under the server): every route that reads it answers
    503 database_unavailable, /readyz names it, /healthz stays alive."""
    import sqlalchemy as sa

    with postgres_database(postgres_url) as url:
        settings = embedded_settings(tmp_path).model_copy(update={"database_url": url})
        with Client(settings) as client, Server(client, poll_s=0.05, keepalive_s=0.3) as server:
            http = httpx.Client(base_url=server.url, timeout=10)
            assert http.get("/api/jobs").status_code == 200
            name = sa.make_url(url).database
            engine = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
            with engine.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
            engine.dispose()
            for method, path in [
                ("GET", "/api/jobs"),
                ("GET", "/api/jobs/0123abcd"),
                ("GET", "/api/jobs/0123abcd/events"),
                ("POST", "/api/jobs/0123abcd/cancel"),
                ("POST", "/api/jobs"),
            ]:
                response = http.request(method, path, json=job_document(2) if path == "/api/jobs" else None)
                assert response.status_code == 503, (method, path, response.text)
                assert response.json()["error"]["code"] == "database_unavailable"
            assert http.get("/healthz").json() == {"ok": True}
            ready = http.get("/readyz")
            assert ready.status_code == 503 and ready.json()["down"] == ["database"]
