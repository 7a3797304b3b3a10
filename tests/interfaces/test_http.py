"""optiflow's HTTP interface against the real thing: ``make_app`` served by tornado on a free port
in a background thread (its own event loop), on an embedded client (a real in-process Celery
worker, SQLite and the filesystem store under a temporary home), driven with httpx.

One module-scoped server runs every job here, so litellm's import (seconds) is paid once. The job
is the support-bot example cut to a few samples and one run; its request body is a user-facing
job document (inline prompt, inline samples), as a user would write it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from optiflow.core.progress import status_changed
from optiflow.interfaces.client import Client
from optiflow.interfaces.http import LIVE_PROGRESS, PAGE_TITLE
from optiflow.jobfile import load_job_data
from optiflow.llm.local_model import free_port
from tests.support.http import Server, job_document, read_sse, stored
from tests.support.workers import ROOT, embedded_settings


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    with Client(embedded_settings(tmp_path_factory.mktemp("http-home"))) as c:
        assert c.runtime.embedded
        yield c


@pytest.fixture(scope="module")
def server(client: Client) -> Iterator[Server]:
    with Server(client, poll_s=0.05, keepalive_s=0.3) as s:
        yield s


@pytest.fixture(scope="module")
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=15, event_hooks={"request": [server.check_alive]}) as c:
        yield c


@pytest.fixture(scope="module")
def finished(http: httpx.Client) -> tuple[str, list[dict[str, Any]]]:
    """The example job submitted over HTTP and its event stream followed to the end."""
    started = time.monotonic()
    created = http.post("/api/jobs", json=job_document())
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    assert created.headers["Location"] == f"/api/jobs/{job_id}"
    with http.stream("GET", f"/api/jobs/{job_id}/events") as response:
        assert response.status_code == 200
        assert response.headers["Content-Type"].startswith("text/event-stream")
        messages = read_sse(response)
    print(f"\nHTTP job submitted and followed to the end: {time.monotonic() - started:.1f}s")
    return job_id, messages


def job_ids(client: Client) -> set[str]:
    return {rec.id for rec in client.runtime.jobs.list(limit=1000)}


# -- a job end to end -----------------------------------------------------------------------------
def test_event_stream_gives_every_event_once_in_order_until_run_finished(
    finished: tuple[str, list[dict[str, Any]]],
) -> None:
    job_id, messages = finished
    events = stored(messages)
    seqs = [int(m["id"]) for m in events]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) >= 4
    assert events[-1]["event"] == "run_finished"
    assert events[-1]["data"]["payload"]["status"] == "completed"
    assert events[0]["data"]["payload"] == {"status": "queued"}
    for m in events:
        assert m["data"]["type"] == m["event"] and m["data"]["seq"] == int(m["id"])
        assert m["data"]["job_id"] == job_id
    assert {"progress_changed", "trial_added_or_updated"} <= {m["event"] for m in events}
    for m in messages:  # the live counter is not stored: it carries no id to resume from
        if m.get("event") == LIVE_PROGRESS:
            assert "id" not in m and {"step", "done", "total"} <= set(json.loads(m["data"]))


def test_finished_job_shows_completed_with_its_report(
    http: httpx.Client, finished: tuple[str, list[dict[str, Any]]]
) -> None:
    job_id, _ = finished
    job = http.get(f"/api/jobs/{job_id}").json()
    assert job["id"] == job_id and job["kind"] == "compress" and job["name"] == "support-bot-http"
    assert job["status"] == "completed" and job["error"] is None and job["progress"] is None
    result = job["result"]
    assert result["status"] == "completed" and result["job_id"] == job_id
    report = result["report"]
    assert report["prompt_ns"] == "support" and report["prompt_key"] == "bot"
    assert report["modifications"] and report["total_token_reduction"] > 0

    def listed(**params: str) -> dict[str, dict[str, Any]]:
        return {j["id"]: j for j in http.get("/api/jobs", params=params).json()["jobs"]}

    everything = listed()
    assert everything[job_id]["status"] == "completed"
    assert set(everything[job_id]) == {
        "id",
        "kind",
        "name",
        "status",
        "step_index",
        "error",
        "created_at",
        "updated_at",
        "outcome",
    }
    assert everything[job_id]["outcome"]["text"].endswith(f"{report['total_token_reduction']:,} tokens · "
                                                          f"{len(report['modifications'])} accepted, "
                                                          f"{len(report['rejected'])} rejected")  # fmt: skip
    assert job_id in listed(status="completed", kind="compress")
    assert job_id not in listed(status="running,queued")
    assert job_id not in listed(kind="measure")
    assert len(listed(limit="1")) == 1


def test_resume_from_last_event_id_or_after(
    http: httpx.Client, finished: tuple[str, list[dict[str, Any]]]
) -> None:
    job_id, messages = finished
    last = len(stored(messages))
    url = f"/api/jobs/{job_id}/events"
    for request in ({"headers": {"Last-Event-ID": "2"}}, {"params": {"after": "2"}}):
        with http.stream("GET", url, **request) as response:
            assert response.status_code == 200
            assert [int(m["id"]) for m in stored(read_sse(response))] == list(range(3, last + 1))
    # the header wins over the query (an EventSource reconnects to the same URL with the header)
    with http.stream("GET", url, params={"after": "0"}, headers={"Last-Event-ID": str(last - 1)}) as response:
        assert [m["event"] for m in stored(read_sse(response))] == ["run_finished"]
    # nothing left: 204 tells an EventSource to stop reconnecting
    assert http.get(url, headers={"Last-Event-ID": str(last)}).status_code == 204
    refused = http.get(url, params={"after": "x"})
    assert refused.status_code == 400 and refused.json()["error"]["field"] == "after"


def test_cancel_of_a_finished_job_is_a_conflict(
    http: httpx.Client, finished: tuple[str, list[dict[str, Any]]]
) -> None:
    job_id, _ = finished
    response = http.post(f"/api/jobs/{job_id}/cancel")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "job_conflict" and error["field"] == "job" and "completed" in error["message"]
    assert http.get(f"/api/jobs/{job_id}").json()["status"] == "completed"


def test_queued_job_stream_keeps_alive_and_ends_when_cancelled(client: Client, http: httpx.Client) -> None:
    """A job nobody starts (its row written directly, never enqueued) streams its first event,
    then keep-alive comments; a cancel ends it, and the stream ends with it."""
    spec = load_job_data(job_document(2), source="test")
    job_id = uuid.uuid4().hex
    client.runtime.jobs.create(
        job_id, spec.kind, spec.name, spec.model_dump(mode="json"), events=[status_changed("queued")]
    )
    assert http.get(f"/api/jobs/{job_id}").json()["status"] == "queued"
    messages: list[dict[str, Any]] = []
    cancelled = None
    with http.stream("GET", f"/api/jobs/{job_id}/events") as response:
        current: dict[str, Any] = {}
        for line in response.iter_lines():
            if line:
                name, _, value = line.partition(":")
                current[name or "comment"] = value.strip()
                continue
            messages.append(current)
            if "comment" in current and cancelled is None:
                cancelled = http.post(f"/api/jobs/{job_id}/cancel")
            current = {}
    assert cancelled is not None and cancelled.status_code == 200, cancelled
    assert cancelled.json()["status"] == "cancelled"
    events = [m["event"] for m in messages if "id" in m]
    assert events == ["run_status_changed", "run_status_changed", "run_finished"]
    assert {"comment": "keep-alive"} in messages
    assert http.post(f"/api/jobs/{job_id}/cancel").status_code == 409


# -- refusals -------------------------------------------------------------------------------------
def _without(name: str) -> Callable[[dict[str, Any]], Any]:
    return lambda doc: {k: v for k, v in doc.items() if k != name}


def _with(**changes: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda doc: {**doc, **changes}


def _sample_without_id(doc: dict[str, Any]) -> dict[str, Any]:
    rows = [dict(r) for r in doc["dataset"]]
    del rows[1]["id"]
    return {**doc, "dataset": rows}


BAD_BODIES: dict[str, tuple[Callable[[dict[str, Any]], Any], int, str, str, str]] = {
    # case: (make body, status, code, field, message part)
    "missing dataset": (_without("dataset"), 400, "validation_error", "dataset", "required"),
    "bad check type": (_with(check={"type": "telepathy"}), 400, "validation_error", "check", "telepathy"),
    "sample without id": (_sample_without_id, 400, "validation_error", "dataset: sample 1: id", "required"),
    "prompt as a file path": (_with(prompt="prompt.yaml"), 400, "validation_error", "prompt", "file path"),
    "prompt as a nested path": (_with(prompt="../x/prompt"), 400, "validation_error", "prompt", "file path"),
    "dataset as a file path": (
        _with(dataset="dataset.jsonl"),
        400,
        "validation_error",
        "dataset",
        "file path",
    ),
    "prompt not in the store": (
        _with(prompt="support/nowhere"),
        404,
        "not_found",
        "prompt",
        "support/nowhere",
    ),
    "unknown kind": (_with(kind="distill"), 400, "validation_error", "kind", "distill"),
    "eval_runs 0": (_with(eval_runs=0), 400, "validation_error", "eval_runs", "greater than or equal to 1"),
    "misspelt field": (_with(eval_run=2), 400, "validation_error", "eval_run", "Extra inputs"),
    "bad baseline tag": (
        _with(baseline_tag="my tag"),
        400,
        "validation_error",
        "baseline_tag",
        "invalid tag",
    ),
    "a list, not an object": (lambda doc: [doc], 400, "validation_error", "body", "JSON object"),
}


@pytest.mark.parametrize("case", list(BAD_BODIES))
def test_invalid_job_document_is_refused_naming_the_field_and_nothing_is_written(
    case: str, client: Client, http: httpx.Client
) -> None:
    make, status, code, field, message = BAD_BODIES[case]
    before = job_ids(client)
    response = http.post("/api/jobs", json=make(job_document(2)))
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == (code, field), error
    assert message in error["message"], error
    assert job_ids(client) == before


@pytest.mark.parametrize("body", [b"", b"{kind: compress", b"\xff\xfe\x00"])
def test_non_json_body_is_refused(body: bytes, client: Client, http: httpx.Client) -> None:
    before = job_ids(client)
    response = http.post("/api/jobs", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "validation_error"
    assert response.json()["error"]["field"] == "body"
    assert job_ids(client) == before


def test_a_write_from_another_origin_is_refused(client: Client, http: httpx.Client) -> None:
    """A page elsewhere must not submit jobs through a visitor's browser."""
    before = job_ids(client)
    response = http.post("/api/jobs", json=job_document(2), headers={"Origin": "http://evil.example"})
    assert response.status_code == 403 and response.json()["error"]["code"] == "forbidden"
    assert job_ids(client) == before


def test_unknown_job_is_404(http: httpx.Client) -> None:
    for method, path in [
        ("GET", "/api/jobs/nope"),
        ("GET", "/api/jobs/nope/events"),
        ("POST", "/api/jobs/nope/cancel"),
    ]:
        response = http.request(method, path)
        assert response.status_code == 404, (method, path)
        assert response.json()["error"] == {"code": "not_found", "field": "job", "message": "no job 'nope'"}
    missing = http.get("/api/nothing-here")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert http.delete("/api/jobs").status_code == 405


@pytest.mark.parametrize(
    ("params", "field"),
    [({"status": "sleeping"}, "status"), ({"kind": "distill"}, "kind"), ({"limit": "0"}, "limit")],
)
def test_bad_list_filter_is_400(params: dict[str, str], field: str, http: httpx.Client) -> None:
    response = http.get("/api/jobs", params=params)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "validation_error"
    assert response.json()["error"]["field"] == field


# -- the page -------------------------------------------------------------------------------------
def test_page_and_health(http: httpx.Client) -> None:
    for path in ("/", "/jobs/some-job"):
        page = http.get(path)
        assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
        assert f"<title>{PAGE_TITLE}</title>" in page.text
        assert "://" not in page.text  # no CDN
    script = http.get("/page/page.js")
    assert script.headers["Content-Type"].startswith("text/javascript")
    assert "://" not in script.text.replace("http://www.w3.org/2000/svg", "")  # no CDN (an SVG namespace)
    # the token is kept for the tab and sent on every request, the event stream included
    assert "sessionStorage" in script.text and "Authorization: `Bearer" in script.text
    assert "getReader" in script.text
    assert http.get("/healthz").json() == {"ok": True}


# -- entry points ---------------------------------------------------------------------------------
def test_serve_help(cli_runner: Callable[..., tuple[int, str, str]]) -> None:
    code, out, _ = cli_runner("serve", "--help")
    assert code == 0 and "--host" in out and "--port" in out


def test_workers_api_process_serves_then_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPTIFLOW_")}
    env |= {"OPTIFLOW_HOME": str(tmp_path / "home"), "OPTIFLOW_HTTP_PORT": str(port)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "workers.api"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.communicate()[0]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "workers.api did not answer within 30 s"
                time.sleep(0.1)
        assert httpx.get(f"http://127.0.0.1:{port}/api/jobs").json() == {"jobs": []}
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, output
    assert f"serving on http://127.0.0.1:{port}" in output and "stopped" in output


def test_a_baseline_passing_nothing_ends_the_job_failed_with_its_cause(http: httpx.Client) -> None:
    """Issue 11: a check nothing passes gives the gate nothing to stand on: the job fails, named."""
    document = {**job_document(6), "name": "passes-nothing", "check": {"type": "regex", "pattern": "^NEVER$"}}
    created = http.post("/api/jobs", json=document)
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    with http.stream("GET", f"/api/jobs/{job_id}/events") as response:
        events = stored(read_sse(response))
    assert events[-1]["event"] == "run_finished"
    assert events[-1]["data"]["payload"]["status"] == "failed"
    job = http.get(f"/api/jobs/{job_id}").json()
    assert job["status"] == "failed"
    assert "nothing to stand on" in job["error"] and "min_baseline_pass_rate" in job["error"]
    assert job["result"]["report"] is None
