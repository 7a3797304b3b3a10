"""The HTTP server bounds slow clients (issue 27, medium 6 and low 17), over real sockets to the
real server (:func:`optiflow.interfaces.http.make_server`, what ``optiflow serve`` runs): a request
whose headers or body do not arrive in time is closed, job documents read at once and event
streams open at once are capped (503 at once, not held), and a connection over the cap is closed
as it arrives. ``GET /api/jobs`` reads summary columns only (medium 5); a MemoryError is answered
with what ran out (low 11)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx
import pytest

from optiflow.interfaces.client import Client
from optiflow.interfaces.http import HttpConfig
from tests.security.conftest import Serve
from tests.support.http import Server, job_document


@contextmanager
def bounded(client: Client, **limits: Any) -> Iterator[Server]:
    base = HttpConfig.from_settings(client.settings)
    config = HttpConfig(**{**base.__dict__, **limits})
    with Server(client, poll_s=0.05, keepalive_s=0.3, config=config) as server:
        yield server


def measure(latency_ms: int = 0) -> dict[str, Any]:
    """A small measure job (its calls take ``latency_ms`` each): quick to end on its own."""
    doc = job_document(2)
    doc = {k: doc[k] for k in ("name", "prompt", "dataset", "check")}
    model = {"model": "optiflow/sim", "params": {"sim_latency_ms": latency_ms}}
    return {**doc, "kind": "measure", "runs": 1, "model": model}


def connect(server: Server) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.settimeout(10)
    return sock


def closed_within(sock: socket.socket, seconds: float) -> bytes:
    """What the server sent before it closed ``sock``; fails if it is still open after ``seconds``."""
    sock.settimeout(seconds)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        raise AssertionError(f"the server kept the connection open for {seconds} s") from None
    except ConnectionResetError:
        pass
    return data


def half_body(server: Server, size: int = 10 * 1024 * 1024) -> socket.socket:
    sock = connect(server)
    sock.sendall(
        b"POST /api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {size}\r\n\r\n".encode()
        + b'{"name": "'
        + b"x" * 1024
    )
    return sock


def test_a_half_sent_body_and_half_sent_headers_are_closed(client: Client) -> None:
    with bounded(client, header_timeout_s=0.5, body_timeout_s=1.0) as server:
        body = half_body(server)
        headers = connect(server)
        headers.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        t0 = time.monotonic()
        assert closed_within(headers, 5) == b""
        closed_within(body, 5)
        assert time.monotonic() - t0 < 5
        assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200


def test_bodies_in_flight_are_capped_with_a_503(client: Client) -> None:
    with bounded(client, max_bodies=3, body_timeout_s=30) as server, ExitStack() as stack:
        held = [stack.enter_context(half_body(server)) for _ in range(3)]
        time.sleep(0.3)  # the server has read their headers and holds a slot for each
        response = httpx.post(f"{server.url}/api/jobs", json=measure(), timeout=10)
        assert response.status_code == 503, response.text
        error = response.json()["error"]
        assert error["code"] == "busy" and "OPTIFLOW_HTTP_MAX_BODIES" in error["message"]
        for sock in held:
            sock.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the slots come back once the server sees them closed
            response = httpx.post(f"{server.url}/api/jobs", json=measure(), timeout=10)
            if response.status_code != 503:
                break
            time.sleep(0.1)
        assert response.status_code == 201, response.text
        httpx.post(f"{server.url}/api/jobs/{response.json()['id']}/cancel", timeout=10)


def test_connections_over_the_cap_are_closed(client: Client) -> None:
    with bounded(client, max_connections=5, header_timeout_s=30) as server, ExitStack() as stack:
        idle = [stack.enter_context(connect(server)) for _ in range(5)]
        time.sleep(0.3)
        extra = connect(server)
        assert closed_within(extra, 5) == b""
        for sock in idle:
            sock.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{server.url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        else:
            raise AssertionError("the server did not answer once the connections closed")


def test_event_streams_are_capped_and_jobs_stay_answerable(client: Client) -> None:
    with bounded(client, max_streams=4) as server:
        job = httpx.post(f"{server.url}/api/jobs", json=measure(latency_ms=2000), timeout=30)
        job_id = job.json()["id"]
        url = f"{server.url}/api/jobs/{job_id}/events"
        with ExitStack() as stack:
            http = stack.enter_context(httpx.Client(timeout=30))
            streams = [stack.enter_context(http.stream("GET", url)) for _ in range(4)]
            assert all(s.status_code == 200 for s in streams)
            refused = httpx.get(url, timeout=10)
            assert refused.status_code == 503, refused.text
            assert "OPTIFLOW_HTTP_MAX_STREAMS" in refused.json()["error"]["message"]
            t0 = time.perf_counter()
            assert httpx.get(f"{server.url}/api/jobs/{job_id}", timeout=10).status_code == 200
            assert time.perf_counter() - t0 < 5
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # closed streams give their slots back
            with httpx.stream("GET", url, timeout=10) as again:
                if again.status_code != 503:
                    break
            time.sleep(0.1)
        assert again.status_code in (200, 204)
        httpx.post(f"{server.url}/api/jobs/{job_id}/cancel", timeout=10)


def test_the_jobs_list_reads_summary_columns_only(serve: Serve, client: Client) -> None:
    statements: list[str] = []
    import sqlalchemy as sa

    engine = client.runtime.jobs.engine
    listener = lambda *a: statements.append(a[2])  # noqa: E731
    sa.event.listen(engine, "before_cursor_execute", listener)
    try:
        with serve() as server:
            response = httpx.get(f"{server.url}/api/jobs", params={"limit": 100}, timeout=30)
        assert response.status_code == 200
    finally:
        sa.event.remove(engine, "before_cursor_execute", listener)
    selects = [
        s.split("FROM")[0] for s in statements if "optiflow_jobs" in s and s.lstrip().startswith("SELECT")
    ]
    assert selects and all(".spec" not in s and ".result" not in s and ".state" not in s for s in selects), (
        selects
    )


def test_a_memory_error_is_answered_saying_so(
    serve: Serve, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from optiflow.interfaces.http.api import Api

    def exhausted(self: Api, body: bytes) -> str:
        raise MemoryError

    monkeypatch.setattr(Api, "submit_body", exhausted)
    with serve() as server:
        response = httpx.post(f"{server.url}/api/jobs", json=job_document(2), timeout=30)
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "out_of_memory"
