"""No 500 from input (issue 12, limits and errors): every hostile input the issue lists gets a 4xx
with a code, and nothing is written. On SQLite and on PostgreSQL, whose limits differ (a 32-bit
INTEGER seq, no NUL in text, VARCHAR lengths enforced)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from optiflow.core.progress import status_changed
from optiflow.interfaces.client import Client
from optiflow.interfaces.http import HttpConfig
from optiflow.jobfile import load_job_data
from tests.security.conftest import job_ids
from tests.support.http import Server, job_document
from tests.support.workers import embedded_settings, postgres_database

LIMITS = {"max_body_bytes": 64 * 1024, "max_sample_runs": 4, "max_iterations": 20}


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp(f"inputs-{request.param}")
    if request.param == "sqlite":
        yield from _serve(embedded_settings(home))
        return
    with postgres_database(request.getfixturevalue("postgres_url")) as url:
        yield from _serve(embedded_settings(home).model_copy(update={"database_url": url}))


def _serve(settings: Any) -> Iterator[Server]:
    settings = settings.model_copy(update=LIMITS)
    with Client(settings) as client, Server(client, config=HttpConfig.from_settings(settings)) as server:
        yield server


@pytest.fixture(scope="module")
def queued(backend: Server) -> str:
    """A job row nobody runs: the event routes reach the database with it."""
    spec = load_job_data(job_document(2), source="test")
    job_id = uuid.uuid4().hex
    backend.client.runtime.jobs.create(
        job_id, spec.kind, spec.name, spec.model_dump(mode="json"), events=[status_changed("queued")]
    )
    return job_id


def refused(backend: Server, response: httpx.Response, status: int, code: str, field: str | None) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == (code, field), error


def post(backend: Server, content: bytes | None = None, **kwargs: Any) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    return httpx.post(f"{backend.url}/api/jobs", content=content, headers=headers, timeout=30, **kwargs)


def with_samples(doc: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    return {**doc, "dataset": [{**doc["dataset"][0], **change}, *doc["dataset"][1:]]}


# -- bodies ---------------------------------------------------------------------------------------
def _nested(depth: int) -> bytes:
    return b'{"kind": "compress", "prompt": ' + b"[" * depth + b"]" * depth + b"}"


LONG = "n" * 201
BAD_DOCUMENTS: dict[str, tuple[Any, int, str, str]] = {
    # case: (body bytes or a document, status, code, field)
    "nested 30000 deep": (_nested(30_000), 400, "validation_error", "body"),
    "nested 70 deep": (_nested(70), 400, "validation_error", "body"),
    "NaN": (b'{"kind": "compress", "eval_runs": NaN}', 400, "validation_error", "body"),
    "an int of 5000 digits": (b'{"eval_runs": ' + b"9" * 5000 + b"}", 400, "validation_error", "body"),
    "a NUL in the name": ({"name": "a\x00b"}, 400, "validation_error", "name"),
    "a NUL in a sample": (
        lambda d: with_samples(d, {"input": "x\x00"}),
        400,
        "validation_error",
        "dataset.0.input",
    ),
    "a lone surrogate": (b'{"kind": "compress", "name": "\\ud800"}', 400, "validation_error", "name"),
    "a name longer than its column": ({"name": LONG}, 400, "validation_error", "name"),
    "a sample id longer than its column": (
        lambda d: with_samples(d, {"id": LONG}),
        400,
        "validation_error",
        "dataset: sample 0: id",
    ),
    "samples x runs over the cap": ({"eval_runs": 3}, 400, "limit_exceeded", "eval_runs"),
    "max_iterations over the cap": (
        lambda d: {
            **{k: d[k] for k in ("prompt", "dataset", "check", "model")},
            "kind": "optimize",
            "optimizer": {"type": "grid", "space": {"temperature": [0.0, 0.5]}},
            "termination": {"max_iterations": 500},
        },
        400,
        "limit_exceeded",
        "termination.max_iterations",
    ),
}


def _body(make: Any) -> bytes:
    import json

    doc = job_document(2)
    if isinstance(make, bytes):
        return make
    value = make(doc) if callable(make) else {**doc, **make}
    return json.dumps(value).encode()


@pytest.mark.parametrize("case", list(BAD_DOCUMENTS))
def test_a_hostile_document_gets_a_4xx_with_a_code_and_nothing_is_written(backend: Server, case: str) -> None:
    make, status, code, field = BAD_DOCUMENTS[case]
    before = job_ids(backend.client)
    refused(backend, post(backend, _body(make)), status, code, field)
    assert job_ids(backend.client) == before


def test_a_body_over_the_limit_is_413_before_it_is_read_whole(backend: Server) -> None:
    before = job_ids(backend.client)
    big = b'{"name": "' + b"x" * LIMITS["max_body_bytes"] + b'"}'
    refused(backend, post(backend, big), 413, "body_too_large", "body")

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"name": "'
        for _ in range(20):
            yield b"x" * 8192
        yield b'"}'

    refused(backend, post(backend, chunks()), 413, "body_too_large", "body")
    assert job_ids(backend.client) == before
    assert httpx.get(f"{backend.url}/healthz").status_code == 200


# -- event seqs and job ids -----------------------------------------------------------------------
@pytest.mark.parametrize("seq", [str(2**31), str(2**63), str(2**64), "-1", "1e3", "9" * 5000])
def test_an_event_seq_out_of_range_is_400(backend: Server, queued: str, seq: str) -> None:
    url = f"{backend.url}/api/jobs/{queued}/events"
    refused(backend, httpx.get(url, params={"after": seq}, timeout=10), 400, "validation_error", "after")
    response = httpx.get(url, headers={"Last-Event-ID": seq}, timeout=10)
    refused(backend, response, 400, "validation_error", "Last-Event-ID")


def test_the_largest_seq_is_fine(backend: Server, queued: str) -> None:
    url = f"{backend.url}/api/jobs/{queued}/events"
    with httpx.stream("GET", url, params={"after": str(2**31 - 1)}, timeout=10) as response:
        assert response.status_code == 200  # the queued job's stream: keep-alives until it ends
    assert httpx.post(f"{backend.url}/api/jobs/{queued}/cancel", timeout=10).json()["status"] == "cancelled"


@pytest.mark.parametrize("job_id", ["%00", "a%00b", "x" * 65, "%F0%9F%92%A5", "%2E%2E", "a%2Fb"])
def test_a_job_id_that_cannot_exist_is_404(backend: Server, job_id: str) -> None:
    for method, path in [("GET", ""), ("POST", "/cancel"), ("GET", "/events")]:
        response = httpx.request(method, f"{backend.url}/api/jobs/{job_id}{path}", timeout=10)
        refused(backend, response, 404, "not_found", "job")


def test_list_filters_with_hostile_values_are_400(backend: Server) -> None:
    for params, field in [
        ({"status": "x" * 300}, "status"),
        ({"kind": "x\x00"}, "kind"),
        ({"limit": "9" * 5000}, "limit"),
    ]:
        response = httpx.get(f"{backend.url}/api/jobs", params=params, timeout=10)
        refused(backend, response, 400, "validation_error", field)
