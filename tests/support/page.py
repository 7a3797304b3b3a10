"""The page in a real browser: Debian's Chromium driven by Playwright, the example job documents
the page is shown with, and the layout checks (boxes that overlap, a page wider than the screen).

Shared by tests/interfaces/test_page_browser.py and docs/screenshots.py."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from tests.support.workers import ROOT

CHROMIUM = os.environ.get("OPTIFLOW_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
LAPTOP = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}
LOCAL_HOSTS = {"127.0.0.1"}


def chromium_path() -> str | None:
    """The Chromium binary Playwright drives (it cannot download its own here), if installed."""
    return CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")


@contextmanager
def browser() -> Iterator[Any]:
    """A headless Chromium (Playwright's sync API); RuntimeError when it cannot start."""
    from playwright.sync_api import sync_playwright

    path = chromium_path()
    if path is None:
        raise RuntimeError(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def example_document(example: str, file: str = "job.yaml", **changes: Any) -> dict[str, Any]:
    """``examples/<example>/<file>`` as an HTTP job document: the prompt and samples inline."""
    folder = ROOT / "examples" / example
    job = yaml.safe_load((folder / file).read_text())
    prompt = yaml.safe_load((folder / job["prompt"]).read_text())
    rows = [json.loads(line) for line in (folder / job["dataset"]).read_text().splitlines() if line.strip()]
    return {**job, "prompt": prompt, "dataset": rows, **changes}


SAMPLED = {
    "model": "optiflow/sim",
    "params": {"sim_pass_dist": "0.8*beta(6,2) + 0.2*fixed(1)", "sim_seed": 3},
}
"""A sampled model: most samples pass only some runs, so ``auto`` picks the paired gate."""


def paired_document(**changes: Any) -> dict[str, Any]:
    """support-bot's compress job on :data:`SAMPLED` (the paired gate: rounds, intervals)."""
    strategy = {"type": "llm", "model": {"model": "optiflow/sim"}}
    return example_document(
        "support-bot", name="support-bot-sampled", model=SAMPLED, strategy=strategy, **changes
    )


def slow_model(latency_ms: int) -> dict[str, Any]:
    """The simulated model answering after ``latency_ms``: time to watch a job move."""
    return {"model": "optiflow/sim", "params": {"sim_latency_ms": latency_ms}}


def compress_document(samples: int, latency_ms: int, **changes: Any) -> dict[str, Any]:
    """support-bot's compress job on ``samples`` samples (one per topic first, so edits are both
    accepted and rejected), 2 runs, a slow model."""
    doc = example_document("support-bot")
    by_topic = {tuple(r.get("tags", ())): r for r in reversed(doc["dataset"])}
    picked = list({r["id"]: r for r in [*by_topic.values(), *doc["dataset"]]}.values())[:samples]
    model = slow_model(latency_ms)
    return {**doc, "dataset": picked, "model": model, "strategy": {"type": "llm", "model": model},
            "eval_runs": 2, **changes}  # fmt: skip


def optimize_document(latency_ms: int, **changes: Any) -> dict[str, Any]:
    """weak-helpdesk's optimize job (LLM rewrites of a weak section) on a slow model."""
    doc = example_document("weak-helpdesk")
    model = slow_model(latency_ms)
    return {**doc, "model": model, "optimizer": {**doc["optimizer"], "model": model}, **changes}


def measure_document(samples: int, **changes: Any) -> dict[str, Any]:
    doc = example_document("support-bot", "measure.yaml")
    return {**doc, "dataset": doc["dataset"][:samples], **changes}


# -- layout ---------------------------------------------------------------------------------------
BLOCKS = "header#top, #notice:not([hidden]), #side > .box:not([hidden]), #detail > .box:not([hidden])"
ROWS = "#sections > li > .path, #sections > li > .sbar, #sections > li > .tokens, #sections > li > .verdict"

_BOXES_JS = """(selector) => [...document.querySelectorAll(selector)]
  .filter((e) => e.offsetParent !== null || e.tagName === 'HEADER')
  .map((e) => { const r = e.getBoundingClientRect();
    return {name: e.id || e.className || e.tagName, x: r.x, y: r.y + window.scrollY, w: r.width, h: r.height}; })"""


def boxes(page: Any, selector: str) -> list[dict[str, Any]]:
    return list(page.evaluate(_BOXES_JS, selector))


def overlaps(items: list[dict[str, Any]], tolerance: float = 0.5) -> list[tuple[str, str]]:
    """Pairs of boxes whose rectangles intersect by more than ``tolerance`` pixels both ways."""
    found = []
    for i, a in enumerate(items):
        for b in items[i + 1 :]:
            dx = min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"])
            dy = min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"])
            if dx > tolerance and dy > tolerance:
                found.append((a["name"], b["name"]))
    return found


def layout_problems(page: Any) -> list[str]:
    """What is wrong with the layout as shown: overlapping blocks or section-row parts, a block
    reaching past the right edge, a page wider than the window."""
    problems = [f"blocks overlap: {a} / {b}" for a, b in overlaps(boxes(page, BLOCKS))]
    rows = page.evaluate(
        """(sel) => [...document.querySelectorAll('#sections > li')].map((li) =>
             [...li.querySelectorAll(':scope > .path, :scope > .sbar, :scope > .tokens, :scope > .verdict')]
               .map((e) => { const r = e.getBoundingClientRect();
                 return {name: li.dataset.path + ' ' + e.className, x: r.x, y: r.y, w: r.width, h: r.height}; }))"""
    )
    for parts in rows:
        problems += [f"section row parts overlap: {a} / {b}" for a, b in overlaps(parts)]
    width = page.evaluate("window.innerWidth")
    problems += [
        f"{b['name']} reaches past the right edge ({b['x'] + b['w']:.0f} > {width})"
        for b in boxes(page, BLOCKS)
        if b["x"] + b["w"] > width + 0.5
    ]
    scroll = page.evaluate("document.documentElement.scrollWidth")
    if scroll > width + 1:
        problems.append(f"the page is {scroll}px wide in a {width}px window")
    return problems + clipped(page) + inner_scrolls(page)


_CLIPPED_JS = """() => {
  const shown = (e) => e.offsetParent !== null && getComputedStyle(e).visibility !== 'hidden';
  const out = [];
  for (const e of document.querySelectorAll('#detail .scroll, #side .scroll, table.grid td, table.grid th')) {
    if (shown(e) && e.scrollWidth > e.clientWidth + 1)
      out.push(`${e.closest('.box').id} ${e.tagName.toLowerCase()}${e.dataset.label ? ' ' + e.dataset.label : ''}` +
               ` is cut: ${e.scrollWidth}px of content in ${e.clientWidth}px`);
  }
  for (const t of document.querySelectorAll('#detail svg text')) {
    if (!shown(t.closest('svg')) || !t.textContent) continue;
    const h = t.getBoundingClientRect().height;
    if (h < 9) out.push(`${t.closest('.box').id} label '${t.textContent}' is ${h.toFixed(1)}px tall`);
  }
  return out;
}"""


def clipped(page: Any) -> list[str]:
    """What the window cuts: a table (or its scroll box) wider than its room, a cell whose text
    overflows it, a chart label drawn under 9 px tall (a chart scaled down to a phone)."""
    return list(page.evaluate(_CLIPPED_JS))


_INNER_SCROLLS_JS = """() => {
  const out = [];
  for (const e of document.querySelectorAll('#side *, #detail *')) {
    if (e.offsetParent === null || e.closest('details:not([open])')) continue;
    if (e.matches('.events, #report, td.wrap:not(.open)')) continue;  // raw logs; a tap opens a clamped cell
    const style = getComputedStyle(e);
    if (!['auto', 'scroll', 'hidden'].includes(style.overflowY)) continue;
    if (e.scrollHeight > e.clientHeight + 1)
      out.push(`${e.closest('.box') ? e.closest('.box').id : '?'} ${e.tagName.toLowerCase()}` +
               `${e.id ? '#' + e.id : ''}.${e.className} shows ${e.clientHeight}px of ${e.scrollHeight}px`);
  }
  return out;
}"""


def inner_scrolls(page: Any) -> list[str]:
    """Boxes inside the page that cut their content vertically (an inner scroll box: the jobs list,
    a diff): everything flows with the page instead, except the raw event log and report JSON."""
    return list(page.evaluate(_INNER_SCROLLS_JS))


def element_box(page: Any, selector: str) -> dict[str, float] | None:
    """``selector``'s first match in page coordinates (scroll included), None when not shown."""
    return page.evaluate(  # type: ignore[no-any-return]
        """(sel) => { const e = document.querySelector(sel);
             if (!e || e.offsetParent === null) return null;
             const r = e.getBoundingClientRect();
             return {x: r.x, y: r.y + scrollY, w: r.width, h: r.height, top: r.top, bottom: r.bottom}; }""",
        selector,
    )


def foreign_requests(urls: list[str]) -> list[str]:
    """Requests that left this machine's 127.0.0.1 (``data:`` URLs stay in the page)."""
    return [u for u in urls if urlsplit(u).scheme != "data" and urlsplit(u).hostname not in LOCAL_HOSTS]


def open_page(context: Any, url: str, token: str | None, requests: list[str]) -> Any:
    """A new tab on ``url`` that records every request's URL and types the API token once into
    the form the page shows (it keeps it in the tab's sessionStorage)."""
    page = context.new_page()
    page.on("request", lambda r: requests.append(r.url))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.errors = errors
    page.goto(url)
    if token is not None:
        page.wait_for_selector("#auth:not([hidden])")
        page.fill("#token", token)
        page.click("#auth button")
        page.wait_for_selector("#auth", state="hidden")
    return page


__all__ = [
    "CHROMIUM_ARGS",
    "LAPTOP",
    "PHONE",
    "browser",
    "chromium_path",
    "clipped",
    "compress_document",
    "element_box",
    "example_document",
    "foreign_requests",
    "inner_scrolls",
    "layout_problems",
    "measure_document",
    "open_page",
    "optimize_document",
    "overlaps",
    "paired_document",
]
