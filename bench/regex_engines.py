"""Which engine runs user regexes (``check: {type: regex}``): stdlib ``re``, ``google-re2``, or
the ``regex`` module with a timeout. Writes ``bench/regex_engines.md`` (and ``.json``).

Measured per engine: compile time and search time on ordinary check patterns (a short model
answer and a 1 MB one), behaviour on catastrophic patterns (``^([A-Za-z ]+)+$`` and friends on
an input that makes a backtracking engine explode), whether the engine holds the GIL while it
matches (a thread ticking every millisecond next to a 20 MB search), feature coverage (named
groups, lookaround, backreferences, inline flags, ...) and what happens to a pattern the engine
does not support. Stdlib ``re`` on a catastrophic pattern runs in a child process killed after a
few seconds, so this script ends by itself.

    python -m bench.regex_engines --out bench/regex_engines.md
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import multiprocessing
import platform
import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import re2
import regex

ROOT = Path(__file__).resolve().parents[1]
ORDINARY = [
    r"[A-Z]{3}-\d{3}",
    r"^order \d+$",
    r"(?P<code>[A-Z]+-\d+)",
    r"(?i)refund",
    r"\b(yes|no)\b",
    r"[\w.+-]+@[\w-]+\.[\w.]+",
    r"^\s*\{.*\}\s*$",
    r"(?s)code:\s*(\w+).*thanks",
]
ANSWER = (
    "Thanks for getting in touch about refunds. Following our support policy for this case, your "
    "reference code is RFD-201. Let me know if there is anything else I can do. order 42"
)
BIG = (ANSWER + "\n") * (1_000_000 // (len(ANSWER) + 1))
CATASTROPHIC = [
    (r"^([A-Za-z ]+)+$", "a" * 28 + "!"),
    (r"^(a|aa)+$", "a" * 40 + "!"),
    (r"(\w+\s?)*$", "word " * 8 + "a" * 20 + "!"),
    (r"^(([a-z])+.)+[A-Z]([a-z])+$", "a" * 28 + "!"),
]
FEATURES = {
    "named group (?P<n>...)": (r"(?P<n>\d+)", "a 12"),
    "non-capturing (?:...)": (r"(?:ab)+", "abab"),
    "inline flags (?i) (?s) (?m)": (r"(?ims)^a.b", "x\nA\nB"),
    "character classes \\d \\w \\s \\b": (r"\b\w+\s\d\b", "ab 1"),
    "unicode class \\p{L}": (r"\p{L}+", "été"),
    "lazy quantifiers *? +?": (r"a+?", "aaa"),
    "bounded repetition {m,n}": (r"a{2,3}", "aaaa"),
    "lookahead (?=...)": (r"a(?=b)", "ab"),
    "lookbehind (?<=...)": (r"(?<=a)b", "ab"),
    "backreference \\1": (r"(a)\1", "aa"),
    "named backreference (?P=n)": (r"(?P<n>a)(?P=n)", "aa"),
    "possessive / atomic a++ (?>...)": (r"a++", "aa"),
    "verbose (?x)": (r"(?x) a b", "ab"),
    "\\Z end of string": (r"a\Z", "a"),
}
REGEX_TIMEOUT_S = 0.5
RE_LIMIT_S = 3.0


def _re2_options() -> Any:
    options = re2.Options()
    options.log_errors = False
    return options


ENGINES: dict[str, dict[str, Callable[..., Any]]] = {
    "re (stdlib)": {"compile": re.compile, "search": lambda c, s: c.search(s)},
    "google-re2": {
        "compile": lambda p: re2.compile(p, _re2_options()),
        "search": lambda c, s: c.search(s),
    },
    f"regex (timeout={REGEX_TIMEOUT_S}s)": {
        "compile": regex.compile,
        "search": lambda c, s: c.search(s, timeout=REGEX_TIMEOUT_S, concurrent=True),
    },
}


def per_call_us(fn: Callable[[], Any], seconds: float = 0.3) -> float:
    n, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        fn()
        n += 1
    return (time.perf_counter() - started) / n * 1e6


def ordinary(engine: dict[str, Callable[..., Any]]) -> dict[str, float]:
    compile_, search = engine["compile"], engine["search"]
    compiled = [compile_(p) for p in ORDINARY]
    uncached = getattr(re, "purge", None)

    def compile_all() -> None:
        if uncached is not None:
            re.purge()
            regex.purge()
            re2.purge()
        for p in ORDINARY:
            compile_(p)

    return {
        "compile_us": per_call_us(compile_all) / len(ORDINARY),
        "search_answer_us": per_call_us(lambda: [search(c, ANSWER) for c in compiled]) / len(ORDINARY),
        "search_1mb_ms": per_call_us(lambda: [search(c, BIG) for c in compiled], 1.0) / len(ORDINARY) / 1000,
    }


def _re_child(pattern: str, text: str) -> None:
    re.search(pattern, text)


def catastrophic(name: str, engine: dict[str, Callable[..., Any]]) -> list[str]:
    out = []
    for pattern, text in CATASTROPHIC:
        started = time.perf_counter()
        if name.startswith("re "):
            proc = multiprocessing.get_context("spawn").Process(target=_re_child, args=(pattern, text))
            proc.start()
            proc.join(RE_LIMIT_S)
            if proc.is_alive():
                proc.kill()
                proc.join()
                out.append(f"still running after {RE_LIMIT_S:.0f} s (killed)")
                continue
            out.append(f"{(time.perf_counter() - started) * 1000:.0f} ms (incl. process start)")
            continue
        try:
            found = engine["search"](engine["compile"](pattern), text)
            out.append(
                f"{'match' if found else 'no match'} in {(time.perf_counter() - started) * 1e6:.0f} µs"
            )
        except TimeoutError:
            out.append(f"TimeoutError after {(time.perf_counter() - started) * 1000:.0f} ms of CPU")
    return out


def gil(engine: dict[str, Callable[..., Any]]) -> dict[str, float]:
    """Ticks of a 1 ms sleeper thread during a 10 MB search, against its ticks while the main
    thread only sleeps as long: a ratio near 1 means the engine releases the GIL."""
    text = "ab" * 5_000_000
    compiled = engine["compile"](r"[ab]*c")
    ticks, stop = 0, threading.Event()

    def tick() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    def ticks_during(fn: Callable[[], Any]) -> tuple[int, float]:
        nonlocal ticks
        ticks = 0
        stop.clear()
        thread = threading.Thread(target=tick)
        thread.start()
        started = time.perf_counter()
        with contextlib.suppress(TimeoutError):
            fn()
        took = time.perf_counter() - started
        stop.set()
        thread.join()
        return ticks, took

    busy, took = ticks_during(lambda: engine["search"](compiled, text))
    idle, _ = ticks_during(lambda: time.sleep(took))
    return {"search_ms": took * 1000, "ticks": busy, "idle_ticks": idle, "ratio": busy / max(idle, 1)}


def features(engine: dict[str, Callable[..., Any]]) -> dict[str, str]:
    out = {}
    for feature, (pattern, text) in FEATURES.items():
        try:
            engine["search"](engine["compile"](pattern), text)
            out[feature] = "yes"
        except Exception as exc:
            out[feature] = f"refused: {str(exc).strip()[:60]}"
    return out


def checks_at_cap() -> list[tuple[str, str, float]]:
    """(check, output shape, ms) for optiflow's pure checks on outputs of MAX_CHECK_CHARS."""
    from optiflow.checking import MAX_CHECK_CHARS, regex_search
    from optiflow.core.checks import (
        ContainsCheck,
        ExactCheck,
        JsonFieldCheck,
        NumericCheck,
        RegexCheck,
        run_check,
    )

    n = MAX_CHECK_CHARS
    shapes = {
        "prose": (BIG * 2)[:n],
        "one JSON object": ('{"code": "RFD-201", "pad": "' + "x" * n)[: n - 2] + '"}',
        "nested JSON": "[" * (n // 2) + "]" * (n // 2),
        "digits": "7" * n,
        "spaces": " " * n,
    }
    checks = {
        "exact": ExactCheck(),
        "contains": ContainsCheck(),
        "regex `^([A-Za-z ]+)+$`": RegexCheck(pattern="^([A-Za-z ]+)+$"),
        "json_field": JsonFieldCheck(field="code"),
        "numeric": NumericCheck(tolerance=0.5),
    }
    out = []
    for name, check in checks.items():
        for shape, text in shapes.items():
            best = float("inf")
            for _ in range(3):
                started = time.perf_counter()
                with contextlib.suppress(Exception):  # the evaluator makes a crash a failing score
                    run_check(check, text, "RFD-201", search=regex_search)
                best = min(best, time.perf_counter() - started)
            out.append((name, shape, best * 1000))
    return out


def refusal() -> str:
    """What a user sees for a pattern RE2 does not run (optiflow.checking.compile_pattern)."""
    from optiflow.checking import compile_pattern
    from optiflow.errors import ValidationError

    try:
        compile_pattern("(?<=code )[A-Z]+-\\d+")
    except ValidationError as exc:
        return str(exc)
    return "(accepted?)"


def size(dist: str) -> str:
    try:
        files = importlib.metadata.files(dist) or []
    except importlib.metadata.PackageNotFoundError:
        return "n/a"
    total = sum(f.locate().stat().st_size for f in files if f.locate().exists())
    return f"{total / 1e6:.1f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "regex_engines.md")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    for name, engine in ENGINES.items():
        print(f"{name} ...", flush=True)
        results[name] = {
            "ordinary": ordinary(engine),
            "catastrophic": catastrophic(name, engine),
            "gil": gil(engine) if not name.startswith("re ") else None,
            "features": features(engine),
        }
    sizes = {"re (stdlib)": "0 (stdlib)", "google-re2": size("google-re2")}
    sizes[f"regex (timeout={REGEX_TIMEOUT_S}s)"] = size("regex")
    names = list(ENGINES)
    lines = [
        "# Regex engines for user patterns",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.machine()}, Python "
        f"{platform.python_version()}, by `python -m bench.regex_engines` (google-re2 "
        f"{importlib.metadata.version('google-re2')}, regex {importlib.metadata.version('regex')}). "
        "The machine is shared: take the timings as orders of magnitude.",
        "",
        "| | " + " | ".join(names) + " |",
        "| --- | " + " | ".join("---" for _ in names) + " |",
        "| compile, µs per ordinary pattern (cache purged) | "
        + " | ".join(f"{results[n]['ordinary']['compile_us']:.1f}" for n in names)
        + " |",
        "| search a 180-char answer, µs | "
        + " | ".join(f"{results[n]['ordinary']['search_answer_us']:.2f}" for n in names)
        + " |",
        "| search a 1 MB answer, ms | "
        + " | ".join(f"{results[n]['ordinary']['search_1mb_ms']:.2f}" for n in names)
        + " |",
    ]
    for i, (pattern, text) in enumerate(CATASTROPHIC):
        lines.append(
            f"| `{pattern}` on `{text[:12]}…` ({len(text)} chars) | "
            + " | ".join(results[n]["catastrophic"][i] for n in names)
            + " |"
        )
    lines.append(
        "| `[ab]*c` on 10 MB: search time; a 1 ms ticker thread's ticks meanwhile over its ticks "
        "while idle (a search holding the GIL gives ~0) | not measured | "
        + " | ".join(
            f"{results[n]['gil']['search_ms']:.0f} ms; {results[n]['gil']['ratio']:.2f}" for n in names[1:]
        )
        + " |"
    )
    lines.append("| installed size | " + " | ".join(sizes[n] for n in names) + " |")
    for feature in FEATURES:
        lines.append(f"| {feature} | " + " | ".join(results[n]["features"][feature] for n in names) + " |")
    cap = checks_at_cap()
    shapes = list(dict.fromkeys(shape for _, shape, _ in cap))
    lines += [
        "",
        "## optiflow's checks on an output at the cap (1,000,000 characters), ms (best of 3)",
        "",
        "A check reads at most `optiflow.checking.MAX_CHECK_CHARS` characters (a longer output is an",
        "error of its evaluation); the pure checks are linear in what they read, so this is their",
        "time bound. `python` checks run in a separate process killed after `OPTIFLOW_CHECK_TIMEOUT_S`.",
        "",
        "| check | " + " | ".join(shapes) + " |",
        "| --- | " + " | ".join("---" for _ in shapes) + " |",
    ]
    for name in dict.fromkeys(c for c, _, _ in cap):
        lines.append(f"| {name} | " + " | ".join(f"{ms:.1f}" for c, _, ms in cap if c == name) + " |")
    lines += [
        "",
        "## Choice: google-re2",
        "",
        "- Linear time by construction: every catastrophic pattern answers in microseconds, with no",
        "  timeout to tune and no CPU burnt up to it. The `regex` module's own optimizations catch",
        "  some of these, but stops the others (`^(a|aa)+$`) only at its timeout: a hostile job costs",
        "  samples x runs x timeout of CPU on the eval workers.",
        "- It releases the GIL while it matches: a long search does not stall the embedded server's",
        "  event loop or the other evaluation threads.",
        "- Ordinary patterns compile and match about as fast as stdlib `re` (compiled patterns are",
        "  cached per process); a 1 MB answer is searched in about a millisecond.",
        "- Its syntax covers what checks use (named groups, classes, inline flags, bounded",
        "  repetition, Unicode classes). What it refuses (lookaround, backreferences, possessive",
        "  quantifiers, `(?x)`, `\\Z`) is refused at submission, naming the field:",
        f"  `error[validation_error]: {refusal()}`.",
        "- Cost: one 0.6 MB wheel with no dependencies.",
        "",
    ]
    args.out.write_text("\n".join(lines))
    results["checks_at_cap_ms"] = [{"check": c, "output": o, "ms": ms} for c, o, ms in cap]
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
