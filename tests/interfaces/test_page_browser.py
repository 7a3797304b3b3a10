"""optiflow's page in a real browser: headless Chromium (Debian's package) driven by Playwright,
against the real server (``make_app`` with an API token) on a distributed client, with real
``celery worker`` processes on Redis and a slow simulated model, so there is time to watch.

A compress job's section bars change while it runs (original, proposed and being evaluated, then
accepted or rejected) and a candidate's diff opens and reads back as the original and the proposed
body; an optimize job's best-so-far chart and trials table grow while it runs, then show the
lineage and the termination cause; a measure job shows its interval and the history of its prompt
and tag; a job is cancelled from the page. Every request the page makes stays on 127.0.0.1, no
script error is raised, and no two blocks of the layout overlap, at a laptop and a phone width.
Screenshots are saved under the test's temporary directory.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from optiflow.interfaces.client import Client
from optiflow.interfaces.http import HttpConfig
from optiflow.settings import Settings
from tests.conftest import _unavailable
from tests.support.http import Server
from tests.support.page import (
    LAPTOP,
    PHONE,
    browser,
    compress_document,
    foreign_requests,
    layout_problems,
    measure_document,
    open_page,
    optimize_document,
)
from tests.support.workers import running_workers, worker_env

pytestmark = [pytest.mark.redis, pytest.mark.workers]
TOKEN = "page-token-3c9e1f"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        _unavailable("Playwright (pip install playwright)", exc)
    try:
        with browser() as b:
            yield b
    except RuntimeError as exc:
        _unavailable("Chromium", exc)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("page-home")


@pytest.fixture(scope="module")
def env(redis_url: str, home: Path) -> Iterator[dict[str, str]]:
    import redis

    prefix = f"optiflow-test-{uuid.uuid4().hex[:10]}"
    yield worker_env(redis_url, prefix, home)
    r = redis.Redis.from_url(redis_url)
    keys = list(r.scan_iter(match=f"{prefix}*", count=1000))
    if keys:
        r.delete(*keys)
    r.close()


@pytest.fixture(scope="module")
def server(env: dict[str, str], home: Path) -> Iterator[Server]:
    settings = Settings(
        redis_url=env["OPTIFLOW_REDIS_URL"],
        key_prefix=env["OPTIFLOW_KEY_PREFIX"],
        home=home,
        database_url=env["OPTIFLOW_DATABASE_URL"],
    )
    with (
        Client(settings, embedded=False) as client,
        running_workers(env, home, eval_workers=1, eval_concurrency=8),
    ):
        config = HttpConfig.from_settings(settings.model_copy(update={"api_token": SecretStr(TOKEN)}))
        with Server(client, poll_s=0.1, keepalive_s=5, config=config) as s:
            yield s


@pytest.fixture(scope="module")
def requests_made() -> list[str]:
    return []


@pytest.fixture(scope="module")
def context(chromium: Any) -> Iterator[Any]:
    ctx = chromium.new_context(viewport=LAPTOP)
    yield ctx
    ctx.close()


def submit(server: Server, document: dict[str, Any]) -> str:
    created = httpx.post(f"{server.url}/api/jobs", json=document, headers=AUTH, timeout=30)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def api(server: Server, path: str) -> Any:
    response = httpx.get(f"{server.url}{path}", headers=AUTH, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def watch(page: Any, sample: Callable[[], Any], timeout: float = 60) -> list[Any]:
    """Samples of the page every 0.1 s until its status pill says the job finished."""
    seen: list[Any] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen.append(sample())
        if page.text_content("#status") in ("completed", "failed", "cancelled"):
            page.wait_for_timeout(500)  # the report and the last trials land
            seen.append(sample())
            return seen
        page.wait_for_timeout(100)
    raise AssertionError(f"the job did not finish within {timeout}s on the page")


def check_layout(page: Any, shots: Path, name: str) -> None:
    for size, label in ((LAPTOP, "laptop"), (PHONE, "phone")):
        page.set_viewport_size(size)
        page.wait_for_timeout(150)
        page.screenshot(path=str(shots / f"{name}-{label}.png"), full_page=True)
        assert layout_problems(page) == [], f"{name} at {label} width ({size['width']}px)"
    page.set_viewport_size(LAPTOP)


# -- compress -------------------------------------------------------------------------------------
def test_compress_job_bars_change_live_and_a_diff_opens(
    server: Server, context: Any, requests_made: list[str], tmp_path: Path
) -> None:
    job_id = submit(server, compress_document(samples=12, latency_ms=250))
    page = open_page(context, f"{server.url}/jobs/{job_id}", TOKEN, requests_made)

    def sample() -> tuple[dict[str, str], int, str]:
        states = page.evaluate(
            "() => Object.fromEntries([...document.querySelectorAll('#sections > li')]"
            ".map((li) => [li.dataset.path, li.dataset.state]))"
        )
        return states, int(page.get_attribute("#bar-track", "data-done") or 0), page.text_content("#count")

    seen = watch(page, sample)
    finals = seen[-1][0]
    history = {path: [s[0].get(path) for s in seen] for path in finals}
    edited = {p for p, final in finals.items() if final in ("accepted", "rejected")}
    assert {"accepted", "rejected"} <= set(finals.values()), finals
    # a bar was shown as proposed and being evaluated before its verdict
    assert any("pending" in history[p] for p in edited), history
    assert len({done for _, done, _ in seen}) >= 3, "the progress bar did not move while the job ran"
    # the running step's rate and time left, once it has seen enough of the step
    assert any(re.search(r"candidates: \d+/\d+ evaluations · [\d.]+/s · about .* left", c) for *_, c in seen)
    assert page.text_content("#status") == "completed"

    report = api(server, f"/api/jobs/{job_id}")["result"]["report"]
    prompt = api(server, f"/api/jobs/{job_id}/prompt")
    mod = report["modifications"][0]
    path = "/".join(mod["section_path"])
    original = next(s["body"] for s in prompt["sections"] if s["path"] == path)
    page.click(f"button.diff-toggle[data-path='{path}']")
    diff = page.locator(f"#sections > li[data-path='{path}'] .diff pre")
    assert diff.locator("del").count() >= 1
    sides = diff.evaluate(
        """(pre) => { let a = '', b = ''; for (const n of pre.childNodes) {
             const t = n.textContent; if (n.nodeName !== 'INS') a += t; if (n.nodeName !== 'DEL') b += t; }
           return [a, b]; }"""
    )
    assert sides == [original, mod["proposed_body"]], "the diff does not read back as both bodies"
    steps = page.locator("#steps tr").all_text_contents()
    assert steps[0].startswith("0baseline") and any("candidates" in s for s in steps), steps
    assert "saved by fail-fast" in page.text_content("#cost")
    check_layout(page, tmp_path, "compress")
    assert page.errors == []


# -- optimize -------------------------------------------------------------------------------------
def test_optimize_job_chart_and_trials_grow_live_then_lineage_and_termination(
    server: Server, context: Any, requests_made: list[str], tmp_path: Path
) -> None:
    job_id = submit(server, optimize_document(latency_ms=80))
    page = open_page(context, f"{server.url}/jobs/{job_id}", TOKEN, requests_made)

    def sample() -> tuple[int, int]:
        points = int(page.get_attribute("#chart", "data-points") or 0)
        return points, page.locator("#trials tr").count()

    seen = watch(page, sample)
    points = [p for p, _ in seen]
    assert len(set(points)) >= 3 and points == sorted(points), f"the chart did not grow: {points}"
    assert seen[-1][1] > seen[0][1]
    report = api(server, f"/api/jobs/{job_id}")["result"]["report"]
    assert points[-1] == len(report["iterations"])
    assert page.locator("#chart svg circle").count() == len(report["iterations"])
    best = report["best_candidate_id"]
    assert page.locator("#trials tr.best").get_attribute("data-candidate") == best
    lineage = page.locator("#lineage li").all_text_contents()
    assert lineage[0].startswith(best) and lineage[-1].startswith(report["baseline_candidate_id"])
    assert report["termination_reason"]["message"] in page.text_content("#termination")
    if report["rejections"]:
        assert report["rejections"][0]["reason_code"] in page.text_content("#rejections")
    check_layout(page, tmp_path, "optimize")
    assert page.errors == []


# -- measure: the interval and the history of a prompt and tag -------------------------------------
def test_measure_job_shows_its_interval_and_the_history_of_its_prompt_and_tag(
    server: Server, context: Any, requests_made: list[str], tmp_path: Path
) -> None:
    ids = [submit(server, measure_document(samples=8 + 4 * i, runs=2)) for i in range(3)]
    deadline = time.monotonic() + 60
    while any(api(server, f"/api/jobs/{i}")["status"] != "completed" for i in ids):
        assert time.monotonic() < deadline, "measure jobs did not complete"
        time.sleep(0.2)
    page = open_page(context, server.url, TOKEN, requests_made)
    page.click(f"#jobs li[data-id='{ids[-1]}']")
    page.wait_for_selector("#history svg")
    assert int(page.get_attribute("#history", "data-points") or 0) >= 3
    report = api(server, f"/api/jobs/{ids[-1]}")["result"]["report"]
    assert f"{report['pass_rate'] * 100:.1f}%" in page.text_content("#measure .big")
    assert "Wilson" in page.text_content("#measure")
    assert "p95" in page.text_content("#measure")
    check_layout(page, tmp_path, "measure")
    assert page.errors == []


# -- cancel ---------------------------------------------------------------------------------------
def test_cancel_a_running_job_from_the_page(
    server: Server, context: Any, requests_made: list[str], tmp_path: Path
) -> None:
    job_id = submit(server, compress_document(samples=44, latency_ms=300, eval_runs=3))
    page = open_page(context, f"{server.url}/jobs/{job_id}", TOKEN, requests_made)
    page.wait_for_function(
        "() => document.querySelector('#status').textContent === 'running'", timeout=30_000
    )
    page.click("#cancel")
    page.wait_for_function(
        "() => document.querySelector('#status').textContent === 'cancelled'", timeout=30_000
    )
    assert page.is_hidden("#cancel")
    assert api(server, f"/api/jobs/{job_id}")["status"] == "cancelled"
    page.screenshot(path=str(tmp_path / "cancelled.png"), full_page=True)
    assert page.errors == []


def test_every_request_stayed_on_this_machine(requests_made: list[str]) -> None:
    assert requests_made, "the browser tests made no request"
    assert foreign_requests(requests_made) == []
