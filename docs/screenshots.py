"""Screenshots of optiflow's page for the README, from real jobs.

    python docs/screenshots.py [--out docs]

Runs the examples on the embedded default (an in-process worker, SQLite and the filesystem store
in a temporary home, the simulated model): support-bot's compress job as shipped and on a sampled
model (the paired gate), weak-helpdesk's optimize job, and a week of support-bot's nightly measure
job with a little noise (the compress job applied to stable mid-week, so the prompt changes), then
one measure run under a strict floor. Serves the page on 127.0.0.1 and takes the jobs list with
nothing picked, each job's page in headless Chromium (Debian's package, driven by Playwright) at a
laptop width, and at a phone width the compress page (a diff open), the optimize page and the
jobs list opened over a picked nightly measure job. Needs Chromium
(``apt-get install -y chromium``) and the dev extra.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from optiflow.interfaces.client import Client  # noqa: E402
from optiflow.jobfile import load_job_data  # noqa: E402
from tests.support.http import Server  # noqa: E402
from tests.support.page import (  # noqa: E402
    LAPTOP,
    PHONE,
    browser,
    example_document,
    layout_problems,
    paired_document,
)
from tests.support.workers import embedded_settings  # noqa: E402


def run(client: Client, document: dict[str, Any]) -> str:
    spec = load_job_data(document, source="docs", store=client.runtime.store)
    job = client.submit(spec)
    result = job.wait(timeout=900)
    print(f"{document['kind']:8} {document.get('name')}: {result.status} ({job.id})")
    return job.id


def shoot(
    page: Any, url: str, path: Path, *, size: dict[str, int], diff: str | None = None, open_list: bool = False
) -> None:
    page.set_viewport_size(size)
    page.goto(url)
    if "/jobs/" in url:
        page.wait_for_selector("#status[data-status=completed]")
    else:
        page.wait_for_selector("#jobs li .result")
    page.wait_for_timeout(1500)  # the prompt, the trials and the history land
    if diff is not None:
        page.click(f"button.diff-toggle[data-path='{diff}']")
    if open_list:
        page.click("#jobs-toggle")
        page.evaluate("scrollTo(0, 0)")
    problems = layout_problems(page)
    if problems:
        raise SystemExit(f"{path.name}: {problems}")
    page.screenshot(path=str(path), full_page=True)
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    out = parser.parse_args().out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as home, Client(embedded_settings(Path(home))) as warm:
        # a throwaway job first, elsewhere: the process's first model call (imports) is not timed on a page
        document = example_document("support-bot", "measure.yaml", runs=1)
        run(warm, {**document, "dataset": document["dataset"][:2]})
    with tempfile.TemporaryDirectory() as home, Client(embedded_settings(Path(home))) as client:
        compress = run(client, example_document("support-bot"))
        sampled = run(client, paired_document())
        optimize = run(client, example_document("weak-helpdesk"))

        def measure(i: int, noise: float, floor: float = 0.8) -> str:
            model = {"model": "optiflow/sim", "params": {"sim_noise": noise, "sim_seed": i}}
            document = example_document("support-bot", "measure.yaml", runs=3, fail_below=floor, model=model)
            return run(client, document)

        nightly = [measure(i, noise) for i, noise in enumerate((0.0, 0.01, 0.0, 0.03))]
        client.apply(compress)  # the nightly cron measures the compressed prompt from here on
        nightly += [measure(i, noise) for i, noise in enumerate((0.02, 0.06, 0.04), start=4)]
        measure(7, 0.02, floor=0.95)  # under its floor: red in the list
        with Server(client) as server, browser() as chromium:
            page = chromium.new_page()
            page.on("pageerror", lambda e: print(f"page error: {e}", file=sys.stderr))
            shoot(page, f"{server.url}/jobs/{compress}", out / "page-compress.png", size=LAPTOP, diff="tone")
            shoot(page, f"{server.url}/jobs/{sampled}", out / "page-compress-paired.png", size=LAPTOP)
            shoot(page, f"{server.url}/jobs/{optimize}", out / "page-optimize.png", size=LAPTOP)
            shoot(page, f"{server.url}/jobs/{nightly[-1]}", out / "page-measure.png", size=LAPTOP)
            shoot(
                page,
                f"{server.url}/jobs/{compress}",
                out / "page-compress-phone.png",
                size=PHONE,
                diff="tone",
            )
            shoot(page, f"{server.url}/jobs/{optimize}", out / "page-optimize-phone.png", size=PHONE)
            shoot(page, f"{server.url}/", out / "page-index.png", size=LAPTOP)
            picked = f"{server.url}/jobs/{nightly[3]}"
            shoot(page, picked, out / "page-index-phone.png", size=PHONE, open_list=True)


if __name__ == "__main__":
    main()
