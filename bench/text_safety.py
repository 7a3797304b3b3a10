"""``make bench-text-safety``: every function that reads document text, on every family of the
adversarial corpus, up to a megabyte per text (the suite's test stops at 256 KB).

The registry, the corpus and the verdicts are the text-safety test's
(:mod:`tests.security.text_readers`, :mod:`tests.security.text_corpus`,
:mod:`tests.security.linearity`) at the ``THOROUGH`` scale: a text doubles from 4 KB until one call
takes 0.1 s or the text is 1 MB; the time must grow at most 3x faster than the text (8x the text:
24x the time) and a megabyte more must cost at most the per-megabyte budget (one second on an
idle machine, scaled by a trivial linear scan timed now). Writes ``bench/text_safety.md``: per
reader, its slowest family per megabyte and its largest growth.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.security.linearity import THOROUGH, Measured, families_for, measure, scan_seconds_per_mb
from tests.security.text_corpus import GENERIC, composite, families_of
from tests.security.text_readers import READERS


def run(only: str | None) -> dict[str, Any]:
    scan = scan_seconds_per_mb()
    rows = []
    started = time.monotonic()
    for reader in READERS:
        if only and only not in reader.name:
            continue
        scan = scan_seconds_per_mb()  # the machine's speed now: a load that comes and goes is met
        t0 = time.monotonic()
        families = families_for(reader, GENERIC, families_of)
        results: list[Measured] = [measure(reader, f, THOROUGH, scan) for f in families]
        results.append(measure(reader, composite(families), THOROUGH, scan))
        slowest = max(results, key=lambda m: m.per_mb)
        steepest = max(results, key=lambda m: m.growth / m.bound if m.bound else 0.0)
        failures = [m.line() for m in results if m.failure is not None]
        rows.append(
            {
                "reader": reader.name,
                "reads": reader.reads,
                "families": len(results),
                "slowest_family": slowest.family,
                "slowest_s_per_mb": round(slowest.per_mb, 3),
                "steepest_family": steepest.family,
                "growth": round(steepest.growth, 1),
                "bound": steepest.bound,
                "budget_s_per_mb": round(slowest.budget, 2),
                "failures": failures,
                "seconds": round(time.monotonic() - t0, 1),
            }
        )
        print(f"{reader.name}: {'FAIL' if failures else 'ok'} ({rows[-1]['seconds']} s)", flush=True)
    return {
        "scan_s_per_mb": round(scan, 4),
        "rows": rows,
        "ok": not any(r["failures"] for r in rows),
        "seconds": round(time.monotonic() - started, 1),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load": os.getloadavg()[0],
    }


def write(out: Path, data: dict[str, Any]) -> None:
    out.with_suffix(".json").write_text(json.dumps(data, indent=2) + "\n")
    lines = [
        f"| {r['reader']} | {r['reads']} | {r['families']} | {r['slowest_s_per_mb']:.2f} ({r['slowest_family'][:40]}) "
        f"| {r['growth']:.1f}x ({r['steepest_family'][:40]}) | {'FAIL' if r['failures'] else 'ok'} |"
        for r in data["rows"]
    ]
    failures = [f for r in data["rows"] for f in r["failures"]]
    verdict = (
        "**PASS**: every reader linear within its budget"
        if data["ok"]
        else "**FAIL**:\n" + "\n".join(f"- {f}" for f in failures)
    )
    out.write_text(
        f"""# Text safety up to a megabyte (`make bench-text-safety`)

{data["date"]}, {data["machine"]}, load {data["load"]:.1f}; a trivial linear scan of a megabyte took
{data["scan_s_per_mb"] * 1000:.0f} ms at the start (timed again before each reader: the per-megabyte
budget is 40 of them, at least one second).
Every reader of `tests/security/text_readers.py` on every family of the corpus (generic, its own,
derived from its patterns) and on all of them in one text, each text doubling from 4 KB until a
call takes 0.1 s or the text is 1 MB. Growth: the time at the last size over the time at an
eighth of it (a linear reader ~8x, a quadratic one 64x; the bound is 24x). {data["seconds"]:.0f} s in all.

| reader | reads | families | slowest: s per MB (family) | largest growth for 8x the text (family) | |
| --- | --- | ---: | --- | --- | --- |
{chr(10).join(lines)}

{verdict}
"""
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", default=None, help="readers whose name contains this")
    parser.add_argument("--out", type=Path, default=Path("bench/text_safety.md"))
    args = parser.parse_args()
    data = run(args.only)
    write(args.out, data)
    print(args.out.read_text())
    if not data["ok"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
