"""Who may talk to the API: the Host allowlist (DNS rebinding), the bearer token, the same-origin
rule with its scheme, and a server that refuses to listen beyond loopback without a token."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from optiflow.interfaces.client import Client
from optiflow.interfaces.http.guard import Guard, is_loopback, tokens_match
from tests.security.conftest import AUTH, TOKEN, Serve, job_ids
from tests.support.http import Server, job_document
from tests.support.workers import ROOT

API_ROUTES = [
    ("GET", "/api/jobs"),
    ("POST", "/api/jobs"),
    ("GET", "/api/jobs/0123abcd"),
    ("POST", "/api/jobs/0123abcd/cancel"),
    ("GET", "/api/jobs/0123abcd/events"),
    ("GET", "/api/jobs/0123abcd/prompt"),
    ("GET", "/api/jobs/0123abcd/trials"),
    ("GET", "/api/measures?ns=a&key=b"),
    ("GET", "/api/limits"),
    ("GET", "/api/openapi.json"),
    ("GET", "/api/no-such-route"),
]


@pytest.fixture(scope="module")
def guarded(serve: Serve) -> Iterator[Server]:
    with serve(api_token=TOKEN, allowed_hosts=("optiflow.internal",)) as server:
        yield server


_http = httpx.Client(timeout=10)


def request(server: Server, method: str, path: str, **kwargs: object) -> httpx.Response:
    body = {"json": job_document(2)} if method == "POST" and path == "/api/jobs" else {}
    return _http.request(method, server.url + path, **body, **kwargs)  # type: ignore[arg-type]


# -- Host -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8765", "127.0.0.1.nip.io", "[::2]:80", "0.0.0.0"]
)
def test_a_foreign_host_gets_403_on_the_page_and_every_api_route(guarded: Server, host: str) -> None:
    for method, path in [("GET", "/"), ("GET", "/jobs/x"), ("GET", "/page/page.js"), *API_ROUTES]:
        response = request(guarded, method, path, headers={"Host": host, **AUTH})
        assert response.status_code == 403, (method, path, response.text)
        assert response.json()["error"]["code"] == "host_not_allowed"


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "localhost:9999", "LOCALHOST", "[::1]:8765", "optiflow.internal"]
)
def test_the_server_answers_its_own_names(guarded: Server, host: str) -> None:
    assert request(guarded, "GET", "/api/jobs", headers={"Host": host, **AUTH}).status_code == 200


def test_probes_answer_any_host_and_no_token(guarded: Server) -> None:
    """Load balancers and kubelets probe by address; the probes reveal nothing about jobs."""
    assert httpx.get(guarded.url + "/healthz", headers={"Host": "10.1.2.3:8765"}).json() == {"ok": True}
    ready = httpx.get(guarded.url + "/readyz", headers={"Host": "10.1.2.3"})
    assert ready.status_code == 200 and ready.json()["checks"] == {"database": "ok"}


def test_any_host_when_the_operator_says_so(serve: Serve) -> None:
    with serve(allowed_hosts=("*",)) as server:
        assert request(server, "GET", "/api/jobs", headers={"Host": "anything.example"}).status_code == 200


# -- token ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("auth", [None, "Bearer wrong-token", "Basic dXNlcjpwYXNz", "Bearer", TOKEN])
def test_no_or_a_wrong_token_gets_401_on_every_api_route(
    guarded: Server, client: Client, auth: str | None
) -> None:
    before = job_ids(client)
    headers = {} if auth is None else {"Authorization": auth}
    for method, path in API_ROUTES:
        response = request(guarded, method, path, headers=headers)
        assert response.status_code == 401, (method, path, response.text)
        assert response.json()["error"]["code"] == "unauthorized"
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert job_ids(client) == before


def test_the_token_opens_the_api_and_the_page_and_probes_need_none(guarded: Server, client: Client) -> None:
    assert request(guarded, "GET", "/api/jobs", headers=AUTH).status_code == 200
    assert request(guarded, "GET", "/api/openapi.json", headers=AUTH).json()["openapi"].startswith("3.")
    page = request(guarded, "GET", "/")
    assert page.status_code == 200 and '<script src="/page/page.js"' in page.text
    script = request(guarded, "GET", "/page/page.js")  # the page's files hold no data: open
    assert script.status_code == 200 and "sessionStorage" in script.text
    assert request(guarded, "GET", "/healthz").status_code == 200
    assert request(guarded, "GET", "/api/jobs/nope", headers=AUTH).status_code == 404


def test_tokens_are_compared_in_constant_time_over_their_hashes() -> None:
    assert tokens_match(TOKEN, TOKEN)
    assert not tokens_match(TOKEN[:-1], TOKEN) and not tokens_match("", TOKEN)
    assert Guard.build("").token is None  # an empty token is no token


# -- Origin ---------------------------------------------------------------------------------------
def test_a_write_from_another_scheme_host_or_port_is_refused(guarded: Server, client: Client) -> None:
    before = job_ids(client)
    port = guarded.port
    for origin in (
        f"https://127.0.0.1:{port}",
        f"http://127.0.0.1:{port + 1}",
        "http://evil.example",
        "null",
    ):
        response = request(guarded, "POST", "/api/jobs", headers={"Origin": origin, **AUTH})
        assert response.status_code == 403, origin
        assert response.json()["error"]["code"] == "forbidden"
    assert job_ids(client) == before
    same = request(
        guarded, "POST", "/api/jobs/nope/cancel", headers={"Origin": f"http://127.0.0.1:{port}", **AUTH}
    )
    assert same.status_code == 404


# -- refusing to listen beyond loopback without a token ------------------------------------------
def test_the_server_refuses_to_start_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPTIFLOW_")}
    env |= {"OPTIFLOW_HOME": str(tmp_path), "OPTIFLOW_HTTP_HOST": "0.0.0.0", "OPTIFLOW_HTTP_PORT": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "workers.api"],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error[config_error]: OPTIFLOW_API_TOKEN:"), done.stderr
    assert "serving" not in done.stdout + done.stderr


def test_optiflow_serve_refuses_too(
    cli_runner: Callable[..., tuple[int, str, str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in [k for k in os.environ if k.startswith("OPTIFLOW_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("OPTIFLOW_HOME", str(tmp_path))
    code, _, err = cli_runner("serve", "--host", "0.0.0.0", "--port", "0")
    assert code == 2 and err.strip().count("\n") == 0 and "OPTIFLOW_API_TOKEN" in err, err


def test_loopback_detection() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"))
    assert not any(
        is_loopback(h) for h in ("0.0.0.0", "::", "", "10.0.0.1", "256.1.1.1", "no-such-host.invalid")
    )


def test_the_compose_api_service_has_a_token() -> None:
    """compose's api listens on every interface of its container: without a token it would exit 2."""
    import yaml

    api = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["api"]
    argv = api["command"]
    assert not is_loopback(argv[argv.index("--host") + 1])
    assert str(api["environment"]["OPTIFLOW_API_TOKEN"]).startswith("${OPTIFLOW_API_TOKEN:?")
    assert all(str(p).startswith("127.0.0.1:") for p in api["ports"])
