"""Key theft and SSRF through the HTTP API (issue 12, serious 1).

With ``OPENAI_API_KEY`` in the server's environment, a job document that points a model call at
a listener of ours (``api_base``, a ``base_url`` / ``extra_headers`` param, the compress
strategy's or the judge's model, a provider whose default endpoint is local) is refused at the
door: 403 naming the field, no job written, and the listener receives nothing, so no key leaves
and no internal answer comes back in a job's error. The operator (the Python client, the CLI)
keeps full control: the same spec submitted through the client does reach the listener, with
the key, which is also what shows the listener would have caught a leak.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job_data
from optiflow.llm.completion import NO_KEY
from tests.security.conftest import AUTH, TOKEN, Serve, job_ids
from tests.support.http import job_document

KEY = "sk-optiflow-test-0000000000000000"
SECRET_BODY = "internal-only-answer-4f1c"


class Listener:
    """An HTTP server on 127.0.0.1 that records every request and answers 400 with a body that
    must never come back to an API client."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                listener.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": self.rfile.read(length)}
                )
                body = json.dumps({"error": {"message": SECRET_BODY, "type": "invalid_request_error"}})
                self.send_response(400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

            do_GET = do_POST

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Listener:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    with Listener() as server:
        yield server


@pytest.fixture
def key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def _vectors(base: str) -> dict[str, tuple[dict[str, Any], str]]:
    """case: (document changes, the field the refusal names)"""
    openai = {"model": "openai/gpt-4o-mini", "api_base": base}
    sim = {"model": "optiflow/sim"}
    return {
        "api_base on a provider model": ({"model": openai}, "model.model"),
        "api_base on the simulated model": ({"model": {**sim, "api_base": base}}, "model.api_base"),
        "api_base as a param": ({"model": {**sim, "params": {"api_base": base}}}, "model.params.api_base"),
        "base_url as a param": ({"model": {**sim, "params": {"base_url": base}}}, "model.params.base_url"),
        "api_key as a param": ({"model": {**sim, "params": {"api_key": "x"}}}, "model.params.api_key"),
        "extra_headers": (
            {"model": {**sim, "params": {"extra_headers": {"X": "1"}}}},
            "model.params.extra_headers",
        ),
        "the compression model": ({"strategy": {"type": "llm", "model": openai}}, "strategy.model.model"),
        "the judge's model": (
            {"check": {"type": "llm_judge", "model": openai, "rubric": "is it right?"}},
            "check.model.model",
        ),
        "a provider whose default endpoint is local": ({"model": {"model": "ollama/llama3"}}, "model.model"),
    }


def test_no_job_document_reaches_a_listener_or_brings_its_answer_back(
    serve: Serve, client: Client, listener: Listener, key_in_env: None
) -> None:
    before = job_ids(client)
    with serve(api_token=TOKEN) as server:
        http = httpx.Client(base_url=server.url, headers=AUTH, timeout=30)
        for case, (changes, field) in _vectors(listener.url).items():
            response = http.post("/api/jobs", json={**job_document(2), **changes})
            assert response.status_code == 403, (case, response.text)
            error = response.json()["error"]
            assert (error["code"], error["field"]) == ("policy_violation", field), case
        jobs = http.get("/api/jobs").text
    assert SECRET_BODY not in jobs
    assert job_ids(client) == before
    assert listener.requests == []


def test_an_operator_allowed_provider_still_cannot_choose_its_endpoint_or_credentials(
    serve: Serve, client: Client, listener: Listener, key_in_env: None
) -> None:
    before = job_ids(client)
    with serve(allowed_models=("openai/*",)) as server:
        for model, field in [
            ({"model": "openai/gpt-4o-mini", "api_base": listener.url}, "model.api_base"),
            ({"model": "openai/gpt-4o-mini", "params": {"base_url": listener.url}}, "model.params.base_url"),
            ({"model": "openai/gpt-4o-mini", "params": {"api_key": "sk-other"}}, "model.params.api_key"),
            (
                {"model": "openai/gpt-4o-mini", "params": {"custom_llm_provider": "ollama"}},
                "model.params.custom_llm_provider",
            ),
        ]:
            response = httpx.post(
                f"{server.url}/api/jobs", json={**job_document(2), "model": model}, timeout=30
            )
            assert response.status_code == 403, response.text
            assert response.json()["error"]["field"] == field
    assert job_ids(client) == before and listener.requests == []


def test_the_operator_keeps_full_control_and_the_listener_does_catch_a_call(
    client: Client, listener: Listener, key_in_env: None
) -> None:
    """The same document through the Python client (the operator) calls the listener: the vector
    is real, and the listener sees it when it happens. Even the operator's endpoint gets the
    provider's key only when the model names it (``api_key_env``); by default it gets none
    (issue 20)."""
    model = {"model": "openai/gpt-4o-mini", "api_base": listener.url, "retries": 0, "timeout": 10}
    doc = {**job_document(1), "strategy": {"type": "rule"}, "model": model}
    result = client.submit(load_job_data(doc, source="operator")).wait(timeout=60)
    assert listener.requests, result
    assert {authorization(r) for r in listener.requests} == {f"Bearer {NO_KEY}"}
    listener.requests.clear()
    doc = {**doc, "model": {**model, "api_key_env": "OPENAI_API_KEY"}}
    client.submit(load_job_data(doc, source="operator")).wait(timeout=60)
    assert listener.requests and {authorization(r) for r in listener.requests} == {f"Bearer {KEY}"}


def authorization(request: dict[str, Any]) -> str | None:
    return {k.lower(): v for k, v in request["headers"].items()}.get("authorization")


def _store_tag(client: Client, tag: str, params: dict[str, Any]) -> None:
    prompt = load_job_data(job_document(1), source="t").prompt
    client.runtime.store.store(prompt.descriptor(), [], tag=tag, model_params=params, replace=True)


@pytest.mark.parametrize(
    "params",
    [
        {"model": "openai/gpt-4o-mini", "api_base": "LISTENER"},
        {"model": "openai/gpt-4o-mini"},
        {"base_url": "LISTENER"},
        {"api_key": "sk-other", "model": "openai/gpt-4o-mini"},
    ],
    ids=["provider model at the listener", "provider model", "base_url", "api_key"],
)
def test_a_stored_tags_model_params_are_checked_as_the_job_will_run(
    serve: Serve, client: Client, listener: Listener, key_in_env: None, params: dict[str, Any]
) -> None:
    """A tag an operator wrote (``apply`` of a CLI job) names a provider model at a listener; an
    HTTP measure job of that tag, whose document says optiflow/sim, is refused: 403 naming the
    tag. Before, the policy saw only the document and the listener got the server's key."""
    params = {k: listener.url if v == "LISTENER" else v for k, v in params.items()}
    _store_tag(client, "operator-made", params)
    before = job_ids(client)
    doc = {k: v for k, v in job_document(2).items() if k in ("name", "prompt", "dataset", "check", "model")}
    doc = {**doc, "kind": "measure", "runs": 1, "tag": "operator-made"}
    with serve() as server:
        response = httpx.post(f"{server.url}/api/jobs", json=doc, timeout=30)
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("policy_violation", "tag"), error
    assert "'operator-made'" in error["message"]
    assert job_ids(client) == before and listener.requests == []


def test_a_policy_endpoint_gets_its_own_key_or_none_never_the_servers(
    serve: Serve,
    client: Client,
    listener: Listener,
    key_in_env: None,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An operator allows ``openai/local`` at an endpoint: documents may use it, and the calls
    carry the entry's own key (``api_key_env``) or none, never ``OPENAI_API_KEY``."""
    import yaml

    monkeypatch.setenv("LOCAL_LLM_KEY", "local-key-123")
    policy = tmp_path / "models.yaml"
    policy.write_text(
        yaml.safe_dump(
            {
                "models": [
                    {"model": "openai/local", "api_base": listener.url},
                    {"model": "openai/keyed", "api_base": listener.url + "/", "api_key_env": "LOCAL_LLM_KEY"},
                ]
            }
        )
    )
    doc = {**job_document(1), "strategy": {"type": "rule"}}
    with serve(model_policy=policy) as server:
        http = httpx.Client(base_url=server.url, timeout=30)
        for model, key in [
            ({"model": "openai/local", "api_base": listener.url}, NO_KEY),
            (
                {"model": "openai/keyed", "api_base": listener.url, "api_key_env": "LOCAL_LLM_KEY"},
                "local-key-123",
            ),
        ]:
            listener.requests.clear()
            body = {**doc, "model": {**model, "retries": 0, "timeout": 10}}
            response = http.post("/api/jobs", json=body)
            assert response.status_code == 201, response.text
            client.job(response.json()["id"]).wait(timeout=60)
            assert listener.requests and {authorization(r) for r in listener.requests} == {f"Bearer {key}"}
        # a document cannot pick the key: not the server's provider key, not another entry's
        for model in [
            {"model": "openai/local", "api_base": listener.url, "api_key_env": "OPENAI_API_KEY"},
            {"model": "openai/keyed", "api_base": listener.url, "api_key_env": "OPENAI_API_KEY"},
            {"model": "openai/keyed", "api_base": listener.url},
        ]:
            response = http.post("/api/jobs", json={**doc, "model": model})
            assert response.status_code == 403, response.text
            assert response.json()["error"]["field"] == "model.api_key_env"


def test_a_policy_entry_names_a_key_only_for_its_own_endpoint(tmp_path: Any) -> None:
    import yaml

    from optiflow.errors import ConfigError
    from optiflow.interfaces.http import load_model_policy
    from optiflow.settings import Settings

    policy = tmp_path / "models.yaml"
    policy.write_text(yaml.safe_dump({"models": [{"model": "openai/*", "api_key_env": "OPENAI_API_KEY"}]}))
    with pytest.raises(ConfigError, match="api_key_env"):
        load_model_policy(Settings(model_policy=policy))
