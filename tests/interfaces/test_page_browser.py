"""optiflow's page in a real browser: headless Chromium (Debian's package) driven by Playwright,
against the real server (``make_app`` with an API token) on a distributed client, with real
``celery worker`` processes on Redis and a slow simulated model, so there is time to watch.

A compress job's section bars change while it runs (original, proposed and being evaluated, then
accepted or rejected) and a candidate's diff opens and reads back as the original and the proposed
body; an optimize job's best-so-far chart and trials table grow while it runs, then show the
lineage and the termination cause; a measure job shows its interval and the history of its prompt
and tag; a job is cancelled from the page. On a phone the jobs list gives the first screen to the
picked job and opens in the page with it in view, nothing scrolls inside a box, and an optimize
job's trials take a line or three each; the word diff keeps word boundaries and marks punctuation
apart. Every request the page makes stays on 127.0.0.1, no script error is raised, and no two
blocks of the layout overlap, at a laptop and a phone width. Screenshots are saved under the
test's temporary directory.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from itertools import pairwise
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
    element_box,
    foreign_requests,
    inner_scrolls,
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
        if page.get_attribute("#status", "data-status") in ("completed", "failed", "cancelled"):
            page.wait_for_timeout(500)  # the report and the last trials land
            seen.append(sample())
            return seen
        page.wait_for_timeout(100)
    raise AssertionError(f"the job did not finish within {timeout}s on the page")


def wait_done(server: Server, ids: list[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while any(
        api(server, f"/api/jobs/{i}")["status"] not in ("completed", "failed", "cancelled") for i in ids
    ):
        assert time.monotonic() < deadline, "jobs did not finish"
        time.sleep(0.2)


def colour(page: Any, selector: str, prop: str) -> str:
    return str(page.eval_on_selector(selector, f"(e) => getComputedStyle(e).{prop}"))


def diff_sides(locator: Any) -> list[str]:
    """The original and the proposed text a diff's ``pre`` reads back as."""
    return list(
        locator.evaluate(
            """(pre) => { let a = '', b = ''; for (const n of pre.childNodes) {
                 const t = n.textContent; if (n.nodeName !== 'INS') a += t; if (n.nodeName !== 'DEL') b += t; }
               return [a, b]; }"""
        )
    )


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
    # the sentence map of the accepted edit: which original sentences it dropped (issue 31)
    smap = mod["faithfulness"]["sentences"]
    summary = page.locator(f"#sections > li[data-path='{path}'] details.sentence-map summary").text_content()
    dropped = sum(o["status"] == "dropped" for o in smap["original"])
    assert f"{smap['original_count']} original sentence(s): {dropped} dropped" in summary, summary
    page.click(f"#sections > li[data-path='{path}'] details.sentence-map summary")
    struck = page.locator(f"#sections > li[data-path='{path}'] details.sentence-map li.dropped s")
    assert struck.all_text_contents() == [o["text"] for o in smap["original"] if o["status"] == "dropped"]
    steps = page.locator("#steps tr").all_text_contents()
    assert steps[0].startswith("0baseline") and any("candidates" in s for s in steps), steps
    assert not any(re.search(r"greedys|-\d+-\d+|candidates-\d", s) for s in steps), steps
    assert "saved by fail-fast" in page.text_content("#cost")
    # the share of the whole prompt saved, and pass rates over part of the dataset say so
    whole = sum(s["tokens"] for s in prompt["sections"])
    share = f"{100 * report['total_token_reduction'] / whole:.1f}% of the prompt's {whole:,}"
    assert share in page.text_content("#sections-note")
    for r in report["rejected"]:
        row = page.locator(f"#sections > li[data-path='{'/'.join(r['section_path'])}']")
        why, verdict = row.locator(".why").text_content(), row.locator(".verdict").text_content()
        g = r["gate"]
        if g["stopped_early"]:  # fail-fast: no pass rate over the few samples it ran, said once
            n = g["regression_count"] if "regression_count" in g else len(g["regressed"])
            assert (
                f"stopped early by fail-fast after {g['evaluated_samples']} of {g['samples']} samples: "
                in why
            )
            assert f"at least {n} regression" in why and "pass rate" not in why, why
            assert why.count("at least") == 1, why
        elif g["evaluated_samples"] < g["samples"]:
            assert f"on {g['evaluated_samples']} of {g['samples']} samples" in why, why
        if r["regression_count_is_lower_bound"]:
            assert f"at least {r['regression_count']} regression" in verdict and "stopped it" not in verdict
    # every mutable section is named: edited, or why it was not tried
    edited = {"/".join(m["section_path"]) for m in [*report["modifications"], *report["rejected"]]}
    for u in report["untried"]:
        path = "/".join(u["path"])
        assert u["reason"] in page.text_content(f"#sections > li[data-path='{path}'] .verdict")
        edited.add(path)
    assert edited == {s["path"] for s in prompt["sections"] if not s["frozen"]}
    # in a rejected diff, kept text reads in the text colour; only what is removed is struck red
    rejected = "/".join(report["rejected"][0]["section_path"])
    page.click(f"button.diff-toggle[data-path='{rejected}']")
    pre = f"#sections > li[data-path='{rejected}'] .diff pre"
    assert colour(page, pre, "color") == colour(page, "body", "color")
    assert colour(page, f"{pre} del", "backgroundColor") != colour(page, f"{pre} ins", "backgroundColor")
    # the ablation's and the combination's lines say fail-fast stopped them, not a pass rate of 0%
    gate = page.text_content("#gate")
    for stats in (report["ablation"]["stats"], report.get("combined")):
        if stats and stats["stopped_early"]:
            assert (
                f"stopped early by fail-fast after {stats['evaluated_samples']} of {stats['samples']}" in gate
            )
    assert "→ 0.0% on 1 of" not in gate, gate
    # on a phone an open diff flows with the page: no inner box cuts it (check_layout holds it)
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
    # the best's prompt, diffed against the baseline's (what apply writes)
    prompt = api(server, f"/api/jobs/{job_id}/prompt")
    assert report["best_overrides"], "the example's optimize job found no better prompt"
    for o in report["best_overrides"]:
        path = "/".join(o["path"])
        original = next(s["body"] for s in prompt["sections"] if s["path"] == path)
        pre = page.locator(f"#best .best-section[data-path='{path}'] .diff pre")
        assert pre.locator("del").count() + pre.locator("ins").count() >= 1
        assert diff_sides(pre) == [original, o["body"]]
    # scores in one format: the CLI's decimals, never a percentage
    scores = [row.split("\t") for row in page.locator("#trials tr td:nth-child(4)").all_text_contents()]
    assert scores and all(re.fullmatch(r"\d\.\d{2,4}|-", s[0]) for s in scores), scores
    ticks = page.locator("#chart svg text").all_text_contents()
    assert not any("%" in t for t in ticks), ticks
    check_layout(page, tmp_path, "optimize")
    # on a phone a trial is a line of figures and two lines of rationale, not a card of 8 rows: the
    # page grows by about a trial's three lines per trial
    page.set_viewport_size(PHONE)
    page.wait_for_timeout(150)
    rows = page.evaluate(
        "() => [...document.querySelectorAll('#trials tr')].map((r) => r.getBoundingClientRect().height)"
    )
    line = float(
        page.evaluate("() => parseFloat(getComputedStyle(document.querySelector('#trials td')).lineHeight)")
    )
    assert len(rows) == len(api(server, f"/api/jobs/{job_id}/trials")["trials"]) >= 8
    texts = page.locator("#trials tr").all_inner_texts()
    tall = [(h, t.replace("\n", " | ")) for h, t in zip(rows, texts, strict=True) if h > 3 * line + 14]
    assert not tall, tall
    fixed = page.evaluate("document.documentElement.scrollHeight") - sum(rows)
    assert fixed < 2900, f"the phone page is {fixed:.0f}px tall without its {len(rows)} trials"
    page.set_viewport_size(LAPTOP)
    assert page.errors == []


# -- measure: the interval and the history of a prompt and tag -------------------------------------
def test_measure_job_shows_its_interval_and_the_history_of_its_prompt_and_tag(
    server: Server, context: Any, requests_made: list[str], tmp_path: Path
) -> None:
    ids = [submit(server, measure_document(samples=8 + 4 * i, runs=2)) for i in range(3)]
    wait_done(server, ids)
    # the prompt changes (as after an apply): a shorter "tone" section, measured on the same tag
    changed = measure_document(samples=16, runs=2)
    changed["prompt"]["sections"] = [
        {**sec, "body": sec["body"][: len(sec["body"]) // 2]} if sec["path"] == "tone" else sec
        for sec in changed["prompt"]["sections"]
    ]
    ids.append(submit(server, changed))
    wait_done(server, ids)
    page = open_page(context, server.url, TOKEN, requests_made)
    page.click(f"#jobs li[data-id='{ids[-1]}']")
    page.wait_for_selector("#history svg")
    assert int(page.get_attribute("#history", "data-points") or 0) >= 3
    report = api(server, f"/api/jobs/{ids[-1]}")["result"]["report"]
    assert f"{report['pass_rate'] * 100:.1f}%" in page.text_content("#measure .big")
    assert "Wilson" in page.text_content("#measure")
    assert "p95" in page.text_content("#measure")
    # nice ticks: evenly spaced by 1, 2, 2.5 or 5 times a power of ten, in points
    ticks = [float(t.rstrip("%")) for t in page.locator("#history svg text.ytick").all_text_contents()]
    steps = {round(b - a, 6) for a, b in pairwise(ticks)}
    assert len(ticks) >= 3 and len(steps) == 1, ticks
    assert steps.pop() in (1, 2, 2.5, 5, 10, 20, 25), ticks
    # the prompt changed between the last two runs: marked on the chart and said under it
    assert page.get_attribute("#history", "data-changes") == "1"
    assert page.locator("#history svg line.change").count() == 1
    assert "tokens per evaluation" in page.text_content("#history .changes")
    check_layout(page, tmp_path, "measure")
    assert page.errors == []


# -- compress under the paired gate: the intervals ------------------------------------------------
def test_paired_intervals_share_one_scale_and_take_the_legends_colours(
    server: Server, context: Any, requests_made: list[str], tmp_path: Path
) -> None:
    noisy = {"model": "optiflow/sim", "params": {"sim_noise": 0.1, "sim_seed": 3}}  # flaky samples: paired
    job_id = submit(server, compress_document(samples=24, latency_ms=0, model=noisy, eval_runs=3))
    wait_done(server, [job_id], timeout=300)
    page = open_page(context, f"{server.url}/jobs/{job_id}", TOKEN, requests_made)
    page.wait_for_selector("#status[data-status=completed]")
    page.wait_for_selector("#sections svg.interval")
    page.wait_for_timeout(500)
    report = api(server, f"/api/jobs/{job_id}")["result"]["report"]
    assert report["gate"] == "paired"
    svgs = page.locator("#sections svg.interval")
    # one scale: 0 and the margin fall at the same place on every row's axis
    scales = {
        (
            svgs.nth(k).locator("line.zero").get_attribute("x1"),
            svgs.nth(k).locator("line.margin").get_attribute("x1"),
        )
        for k in range(svgs.count())
    }
    assert svgs.count() >= 2 and len(scales) == 1, scales
    states = set()
    for k in range(svgs.count()):
        row_state = svgs.nth(k).evaluate("(e) => e.closest('li').dataset.state")
        states.add(row_state)
        legend = colour(page, f"#legend .swatch.{row_state}", "backgroundColor")
        ci = svgs.nth(k).locator("line.ci").evaluate("(e) => getComputedStyle(e).stroke")
        assert ci == legend, (row_state, ci, legend)
        # the margin's label sits above its line, not on it
        label = svgs.nth(k).locator("text").bounding_box()
        line = svgs.nth(k).locator("line.margin").bounding_box()
        assert label["y"] + label["height"] <= line["y"] + 0.5, (label, line)
    assert {"accepted", "rejected"} <= states, states
    # each decision shows the gate's own baseline it compares against
    for m in report["modifications"]:
        why = page.text_content(f"#sections > li[data-path='{'/'.join(m['section_path'])}'] .why")
        assert f"baseline {100 * m['gate']['baseline_pass_rate']:.1f}%" in why, why
    # one figure for the detectable drop, the CLI's
    assert f"{100 * report['assessment']['detectable_drop']:.1f}%" in page.text_content("#gate")
    steps = page.locator("#steps tr td:nth-child(2)").all_text_contents()
    assert any(" round " in s for s in steps) and not any(
        re.search(r"-\d+-\d+|candidates-\d", s) for s in steps
    )
    check_layout(page, tmp_path, "paired")
    assert page.errors == []


# -- the jobs list --------------------------------------------------------------------------------
def test_the_index_shows_results_a_hint_every_job_and_a_measure_job_below_its_floor_in_red(
    server: Server, context: Any, requests_made: list[str], tmp_path: Path
) -> None:
    below = submit(server, measure_document(samples=12, runs=2, name="under-floor", fail_below=0.99))
    above = submit(server, measure_document(samples=12, runs=2, name="over-floor", fail_below=0.2))
    ids = [below, above]
    while len(api(server, "/api/jobs?limit=50")["jobs"]) < 11:
        ids.append(submit(server, measure_document(samples=4, runs=1, name="filler")))
    wait_done(server, ids)
    page = open_page(context, server.url, TOKEN, requests_made)
    page.wait_for_selector(f"#jobs li[data-id='{above}'] .result")
    assert page.is_visible("#hint") and page.is_hidden("#detail")
    # each finished job says what it found
    for job in api(server, "/api/jobs?limit=50")["jobs"]:
        if job["status"] == "completed":
            assert job["outcome"]["text"] in page.text_content(f"#jobs li[data-id='{job['id']}'] .result")
    # under its floor: not a green "completed", in the list and in the job's badge
    red = colour(page, "#legend .swatch.rejected", "backgroundColor")
    pill = f"#jobs li[data-id='{below}'] .pill"
    assert page.text_content(pill) == "below floor" and colour(page, pill, "color") == red
    assert page.text_content(f"#jobs li[data-id='{above}'] .pill") == "completed"
    assert colour(page, f"#jobs li[data-id='{above}'] .pill", "color") != red
    # the last job of the list is shown whole, not cut by the list's box
    last = page.locator("#jobs li").last.bounding_box()
    box = page.locator("#jobs-box").bounding_box()
    assert last["y"] + last["height"] <= box["y"] + box["height"], (last, box)
    page.screenshot(path=str(tmp_path / "index.png"), full_page=True)
    page.click(f"#jobs li[data-id='{below}']")
    page.wait_for_selector("#measure .big")
    page.wait_for_function("() => document.querySelector('#status').textContent.startsWith('below floor')")
    assert page.text_content("#status") == "below floor (exit 3)" and colour(page, "#status", "color") == red
    assert page.is_hidden("#hint")
    assert page.errors == []


def test_on_a_phone_the_picked_job_has_the_first_screen_and_the_list_opens_in_the_page(
    server: Server, chromium: Any, requests_made: list[str], tmp_path: Path
) -> None:
    jobs = api(server, "/api/jobs?limit=50")["jobs"]
    assert len(jobs) >= 11, "the index test makes the long list"
    picked, other = jobs[-1]["id"], jobs[1]["id"]  # the oldest: at the list's end
    ctx = chromium.new_context(viewport=PHONE)
    try:
        page = open_page(ctx, f"{server.url}/jobs/{picked}", TOKEN, requests_made)
        page.wait_for_selector("#status[data-status=completed]")
        page.wait_for_selector(f"#jobs li.sel[data-id='{picked}']")
        # the list shows the picked job alone, in view, and a button for the others
        shown = page.evaluate(
            "() => [...document.querySelectorAll('#jobs li')].filter((li) => li.offsetParent).length"
        )
        assert shown == 1
        sel, head, box = (
            element_box(page, s) for s in (f"#jobs li[data-id='{picked}']", "#head-box", "#jobs-box")
        )
        assert sel and head and box
        assert sel["top"] >= 0 and sel["bottom"] <= PHONE["height"], sel
        assert box["h"] <= 0.25 * PHONE["height"], f"the list takes {box['h']:.0f}px of the first screen"
        assert head["top"] < 0.4 * PHONE["height"], "the job's page does not start on the first screen"
        assert page.text_content("#jobs-toggle") == f"all {len(jobs)} jobs"
        # when each ran, absolute and relative: jobs of one name differ by it
        meta = page.text_content(f"#jobs li[data-id='{picked}'] .meta")
        assert re.search(r"\d{2}:\d{2}(:\d{2})? · (just now|\d+ (min|h|days?) ago)$", meta), meta
        # opened, every job shows in the page (no inner scroll box) with the picked one in view
        page.click("#jobs-toggle")
        page.wait_for_timeout(200)
        shown = page.evaluate(
            "() => [...document.querySelectorAll('#jobs li')].filter((li) => li.offsetParent).length"
        )
        assert shown == len(jobs)
        assert inner_scrolls(page) == []
        sel = element_box(page, f"#jobs li[data-id='{picked}']")
        assert sel and sel["top"] >= 0 and sel["bottom"] <= PHONE["height"], sel
        assert page.text_content("#jobs-toggle") == "hide the other jobs"
        # picking another closes the list and shows that job's page from its top
        page.click(f"#jobs li[data-id='{other}']")
        page.wait_for_selector(f"#jobs li.sel[data-id='{other}']")
        page.wait_for_timeout(200)
        assert page.evaluate("scrollY") == 0
        shown = page.evaluate(
            "() => [...document.querySelectorAll('#jobs li')].filter((li) => li.offsetParent).length"
        )
        assert shown == 1 and layout_problems(page) == []
        page.screenshot(path=str(tmp_path / "list-phone.png"), full_page=True)
        assert page.errors == []
    finally:
        ctx.close()


DIFF_JS = """([a, b]) => { const view = diffView(a, b), pre = view.querySelector('pre');
  document.querySelector('#best').replaceChildren(view);
  document.querySelector('#best-box').hidden = false; document.querySelector('#detail').hidden = false;
  const parts = [...pre.childNodes].map((n) => [n.nodeName, n.textContent, n.className || '']);
  let x = '', y = '';
  for (const [kind, t] of parts) { if (kind !== 'INS') x += t; if (kind !== 'DEL') y += t; }
  const gaps = [...pre.querySelectorAll('del + ins')].map((ins) => {
    const d = ins.previousElementSibling.getClientRects(), i = ins.getClientRects();
    if (!d.length || !i.length) return null;  // spacing only: the old spacing is not shown
    const last = d[d.length - 1], first = i[0];
    return Math.abs(last.top - first.top) < 2 ? first.left - last.right : null; });
  return {parts, sides: [x, y], gaps, removed: +view.dataset.removed, added: +view.dataset.added,
          minor: +view.dataset.minor, stats: view.querySelector('.stats').textContent}; }"""


def assert_word_boundaries(parts: list[list[str]]) -> None:
    """No removed or added run starts or ends inside a word of its side's text."""
    for skip, mark in (("INS", "DEL"), ("DEL", "INS")):
        side = [(k, t) for k, t, _ in parts if k != skip]
        text = "".join(t for _, t in side)
        pos = 0
        for kind, t in side:
            end = pos + len(t)
            if kind == mark:
                assert not (pos and text[pos - 1].isalnum() and t[0].isalnum()), (text[:pos], t)
                assert not (end < len(text) and t[-1].isalnum() and text[end].isalnum()), (t, text[end:])
            pos = end


def test_the_word_diff_keeps_word_boundaries_and_tells_punctuation_apart(
    server: Server, context: Any, requests_made: list[str]
) -> None:
    page = open_page(context, server.url, TOKEN, requests_made)

    def diff(a: str, b: str) -> dict[str, Any]:
        out: dict[str, Any] = page.evaluate(DIFF_JS, [a, b])
        assert out["sides"] == [a, b], "the diff does not read back as both texts"
        return out

    # a rewritten phrase: the removed run, then the added run, apart ("QuestionsWhen" before)
    d = diff(
        "Questions about late parcels are filed under SHP-310.",
        "When a customer asks about late parcels, reply with code SHP-310.",
    )
    changes = [(k, t.strip()) for k, t, _ in d["parts"] if k in ("DEL", "INS")]
    assert changes == [
        ("DEL", "Questions"),
        ("INS", "When a customer asks"),
        ("DEL", "are filed under"),
        ("INS", ", reply with code"),
    ], changes
    assert all(g is None or g >= 3 for g in d["gaps"]) and any(g is not None for g in d["gaps"]), d["gaps"]
    assert_word_boundaries(d["parts"])
    assert (d["removed"], d["added"], d["minor"]) == (4, 7, 0), d
    # a word that gained a comma is the comma, marked as punctuation and not counted
    d = diff("Parcels are held for ten days.", "Parcels, are held for ten days!")
    assert [(k, t) for k, t, _ in d["parts"] if k != "#text"] == [("INS", ","), ("DEL", "."), ("INS", "!")]
    assert all("minor" in c for k, _, c in d["parts"] if k != "#text")
    assert (d["removed"], d["added"], d["minor"]) == (0, 0, 2), d
    assert "0 word(s) removed, 0 added; 2 punctuation or spacing change(s), not counted" in d["stats"]
    # spacing only (a line break become a space): not counted, not marked
    d = diff("Keep it\nshort.", "Keep it short.")
    assert (d["removed"], d["added"], d["minor"]) == (0, 0, 1), d
    # unicode, numbers and long texts read back whole
    d = diff("Prix : 12,50 € — livré en 3 jours.", "Prix : 12,90 € — livré en 2 jours ouvrés.")
    assert_word_boundaries(d["parts"])
    diff("a " * 3000, "b " * 3000)
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


# -- drift: the reference, each night against it, the night a drop was shown (issue 30) ----------
def test_measure_history_marks_the_reference_each_nights_interval_and_the_drift(
    server: Server, context: Any, requests_made: list[str], tmp_path: Path
) -> None:
    def model(dist: str) -> dict[str, Any]:
        return {"model": "optiflow/sim", "params": {"sim_pass_dist": dist, "sim_seed": 4}}

    before, after = "beta(3.3,3.3)", "0.5*beta(3.3,3.3) + 0.5*fixed(0)"
    common = {"tag": "drift-page", "name": "drift-nightly"}
    ids = [
        submit(
            server,
            measure_document(20, runs=12, model=model(before), drift={"set_reference": True}, **common),
        )
    ]
    wait_done(server, ids)
    for dist in (before, after, after, after, after):
        ids.append(submit(server, measure_document(20, runs=3, model=model(dist), **common)))
        wait_done(server, ids)
        drift = api(server, f"/api/jobs/{ids[-1]}")["result"]["report"]["drift"]
        if drift["evidence"]["first_shown"]:
            break
    shown = drift["evidence"]["first_shown"]
    assert shown, drift
    page = open_page(context, server.url, TOKEN, requests_made)
    page.wait_for_selector(f"#jobs li[data-id='{ids[-1]}'] .result")
    red = colour(page, "#legend .swatch.rejected", "backgroundColor")
    pill = f"#jobs li[data-id='{ids[-1]}'] .pill"
    assert page.text_content(pill) == "drift shown" and colour(page, pill, "color") == red
    page.click(f"#jobs li[data-id='{ids[-1]}']")
    page.wait_for_selector("#history svg.drift")
    assert page.text_content("#status") == "drift shown (exit 4)"
    note = page.text_content("#drift-note") or ""
    assert note.startswith("drift: \u2212") and f"a drop shown on night {shown}" in note
    assert "flipped most:" in note
    # read the colour of the element on the page now: a live update may have rendered a new one
    # (a detached element's computed colour is ""), as happened once with two suites on 2 cores
    page.wait_for_function(
        "(red) => { const e = document.querySelector('#drift-note'); return !!e && getComputedStyle(e).color === red; }",
        arg=red,
    )
    # the history: the reference marked on the pass-rate chart, each night against it with its
    # interval, and the night the drop was shown
    assert page.get_attribute("#history", "data-references") == "1"
    assert page.locator("#history svg rect.reference").count() == 1
    nights = len(ids) - 1
    assert page.get_attribute("#history svg.drift", "data-nights") == str(nights)
    assert page.locator("#history svg.drift line.interval").count() == nights
    assert page.get_attribute("#history svg.drift", "data-shown") == str(shown)
    assert page.locator("#history svg.drift line.drift-shown").count() == 1
    assert f"drift shown (night {shown})" in page.text_content("#history svg.drift .drift-label")
    # a quiet night of the same history says so in its own words
    page.click(f"#jobs li[data-id='{ids[1]}']")
    page.wait_for_function(
        "() => (document.querySelector('#drift-note') || {}).textContent?.startsWith('no drift shown')"
    )
    check_layout(page, tmp_path, "drift")
    assert page.errors == []
