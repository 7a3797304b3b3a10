"""The crash matrix: every step kind of every job kind, under every gate where it occurs, and the
job documents whose runs take those steps (the suite's ``tests/distributed/test_chaos_matrix.py``
and ``make chaos``).

Documents are the examples cut small, on the simulated model: ``support-bot`` for compress (four
samples, two runs: a rejected candidate, three accepted whose combination is rejected, so greedy
runs; on the noisy model the paired gate takes rounds of the ablation, the candidates, the
combination and each greedy set), ``weak-helpdesk`` for optimize
(twelve samples in train / val / test splits, LLM rewrites; paired acceptance races its
contenders) and ``support-bot``'s measure job. The noise mode (``sim_pass_dist``) draws each answer
from a seed of (``sim_seed``, prompt, sample, run): an evaluation made again after a kill gives
the answer it gave before, so a noisy job's reference is as deterministic as a deterministic one.

:func:`comparable` is what a killed job's report must share with the undisturbed one's: all of it
but the clock (timestamps, latencies), the job's id and name, how evaluations were answered (model
call, cache or fail-fast skip: a step launched again answers from the cache what the lost chord
had made) and, under fail-fast, what a rejected set's count of regressions depends on, the
evaluations that happened to finish before its mark (the report flags that count as a lower
bound; the decision, the stage and the edit are compared).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from optiflow.core.kinds import AnySpec, parse_spec
from optiflow.jobfile import load_job
from tests.support.workers import ROOT

SUPPORT_BOT = ROOT / "examples" / "support-bot"
HELPDESK = ROOT / "examples" / "weak-helpdesk"
LATENCY_MS = 5
NOISE = "0.3*beta(3.3,3.3)+0.7*fixed(1)"
OPT_NOISE = {"sim_pass_dist": "0.6*beta(3.3,3.3)+0.4*fixed(1)", "sim_seed": 3}
COMPRESS_SAMPLES = ("double-1", "password-1")
GREEDY_SAMPLES = ("refund-1", "invoice-1", "double-1", "password-1")
HELPDESK_SAMPLES = tuple(f"{t}-{i}" for t in ("refund", "late", "damaged", "invoice") for i in (1, 3, 4))


def _model(noise: dict[str, object] | None = None) -> dict[str, object]:
    return {"model": "optiflow/sim", "params": {"sim_latency_ms": LATENCY_MS, **(noise or {})}}


def _cut(data: dict[str, Any], ids: tuple[str, ...]) -> dict[str, Any]:
    samples = [s for s in data["dataset"]["samples"] if s["id"] in ids]
    return {**data, "dataset": {**data["dataset"], "samples": samples}}


def compress_doc(
    gate: dict[str, object], *, seed: int | None = None, samples: tuple[str, ...] = COMPRESS_SAMPLES
) -> dict[str, Any]:
    """support-bot's compress job with its defaults (fail-fast on, the ablation on), two runs; on
    the noisy model with ``seed``."""
    data = load_job(SUPPORT_BOT / "job.yaml").model_dump(mode="json")
    data = _cut(data, samples)
    noise = None if seed is None else {"sim_pass_dist": NOISE, "sim_seed": seed}
    return {**data, "eval_runs": 2, "gate": gate, "model": _model(noise)}


def optimize_doc(acceptance: dict[str, object], *, noisy: bool = False) -> dict[str, Any]:
    """weak-helpdesk's optimize job (splits, LLM rewrites), two iterations."""
    data = load_job(HELPDESK / "job.yaml").model_dump(mode="json")
    data = _cut(data, HELPDESK_SAMPLES)
    return {
        **data,
        "acceptance": acceptance,
        "max_candidates_per_step": 2,
        "termination": {"max_iterations": 2, "no_improvement": 2},
        "model": _model(OPT_NOISE if noisy else None),
    }


def measure_doc() -> dict[str, Any]:
    """support-bot's measure job, recording itself as the drift reference: a comparison would read
    whichever measure of the same prompt and tag ended first in the wave (the reference job or
    another cell's), so its figures would depend on the order the wave's jobs end, not on a kill."""
    data = load_job(SUPPORT_BOT / "measure.yaml").model_dump(mode="json")
    drift = {"set_reference": True}
    return {**_cut(data, COMPRESS_SAMPLES), "runs": 3, "model": _model(), "drift": drift}


PAIRED = {"mode": "paired", "margin": 0.5, "max_runs": 4}
AUTO = {"mode": "auto", "margin": 0.5, "max_runs": 4}

DOCS: dict[str, Callable[[], dict[str, Any]]] = {
    "compress-strict": lambda: compress_doc({"mode": "strict"}),
    "compress-auto": lambda: compress_doc(AUTO),
    "compress-paired": lambda: compress_doc(PAIRED, seed=2),
    "compress-paired-greedy": lambda: compress_doc(PAIRED, seed=4, samples=GREEDY_SAMPLES),
    "compress-auto-noisy": lambda: compress_doc(AUTO, seed=2),
    "optimize-strict": lambda: optimize_doc({"test": "none"}),
    "optimize-paired": lambda: optimize_doc({"test": "paired", "max_runs": 4}),
    "optimize-auto": lambda: optimize_doc({"test": "auto", "max_runs": 4}),
    "optimize-auto-noisy": lambda: optimize_doc({"test": "auto", "max_runs": 4}, noisy=True),
    "measure": measure_doc,
}
"""The job documents, by key. Under ``auto`` the deterministic model picks ``strict`` (compress) or
``none`` (optimize); the noisy one picks ``paired``."""


@functools.cache
def _document(doc: str) -> str:
    return json.dumps(DOCS[doc]())


def spec_of(doc: str, name: str) -> AnySpec:
    """The document ``doc`` as a job named ``name`` (the name tells the chaos hooks its plan)."""
    return parse_spec({**json.loads(_document(doc)), "name": name})


@dataclass(frozen=True)
class Cell:
    """One cell: a step kind of a job kind under a gate, and the document that takes it."""

    job: str
    step: str
    gate: str
    doc: str
    occurrence: int = 0
    """Which step of the kind the suite's kill lands in (1: the second, a paired gate's second
    round); ``make chaos`` draws it among the reference's steps of the kind."""

    @property
    def id(self) -> str:
        return f"{self.job}-{self.step}-{self.gate}"


_TABLE = (
    ("compress", "strict", "compress-strict", ("baseline", "ablation", "candidates", "combined", "greedy")),
    ("compress", "paired", "compress-paired", ("baseline", "ablation@1", "candidates", "candidates-rounds")),
    ("compress", "paired", "compress-paired", ("combined@1",)),
    ("compress", "paired", "compress-paired-greedy", ("greedy",)),
    ("compress", "auto", "compress-auto", ("baseline", "candidates", "combined", "greedy")),
    ("compress", "auto", "compress-auto-noisy", ("ablation", "candidates-rounds@1")),
    ("optimize", "strict", "optimize-strict", ("baseline", "iteration", "test")),
    ("optimize", "paired", "optimize-paired", ("baseline", "iteration", "race", "test")),
    ("optimize", "auto", "optimize-auto", ("baseline", "iteration", "reproduce")),
    ("optimize", "auto", "optimize-auto-noisy", ("race", "test")),
    ("measure", "-", "measure", ("measure",)),
)
"""(job kind, gate, document, step kinds); ``kind@n``: the suite kills its (n+1)-th step of that kind."""


def _cell(job: str, gate: str, doc: str, step: str) -> Cell:
    kind, _, n = step.partition("@")
    return Cell(job, kind, gate, doc, int(n or 0))


MATRIX = tuple(_cell(job, gate, doc, step) for job, gate, doc, steps in _TABLE for step in steps)
"""Compress: baseline, ablation, candidates (the strict round; ``candidates-rounds``: the paired
gate's later rounds), combined, greedy; optimize: baseline, iteration, race rounds, the
deterministic rule's reproduction, held-out test (``strict`` is acceptance ``none``); measure. Under ``auto`` the strict kinds run on the
deterministic model, the paired ones on the noisy model."""
ROLES = ("eval", "control")


# -- the chaos hooks' keys (tests.support.chaos_app) ------------------------------------------
def _key(prefix: str, *parts: str) -> str:
    return ":".join((prefix, "chaos", *parts))


def plan_key(prefix: str, name: str) -> str:
    """String (JSON): the park plan of the job named ``name``."""
    return _key(prefix, "plan", name)


def parked_key(prefix: str, name: str) -> str:
    """Hash: where the job named ``name`` parked (the first parked task writes it)."""
    return _key(prefix, "parked", name)


def count_key(prefix: str, name: str) -> str:
    """Counter: tasks of the job named ``name`` that reached its park point."""
    return _key(prefix, "count", name)


def steps_key(prefix: str, job_id: str) -> str:
    """List: ``<index>:<name>`` of every step launched for the job (a relaunch appends again)."""
    return _key(prefix, "steps", job_id)


def started_key(prefix: str, name: str, step: int) -> str:
    """Counter: evaluations of the job named ``name`` that started in its step ``step``."""
    return _key(prefix, "started", name, str(step))


def release_key(prefix: str) -> str:
    """String: when it exists, parked tasks go on (a test that ends without its kill)."""
    return _key(prefix, "release")


# -- step kinds -----------------------------------------------------------------------------------
_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern))
    for kind, pattern in (
        ("baseline", r"baseline"),
        ("ablation", r"ablation(-\d+)?"),
        ("candidates", r"candidates"),
        ("candidates-rounds", r"candidates-\d+"),
        ("combined", r"combined(-\d+)?"),
        ("greedy", r"greedy-\d+(-\d+)?"),
        ("propose", r"propose-\d+"),
        ("iteration", r"iteration-\d+"),
        ("race", r"iteration-\d+-round-\d+"),
        ("reproduce", r"iteration-\d+-reproduce"),
        ("test", r"test(-round-\d+)?"),
        ("measure", r"measure"),
    )
)


def step_kind(name: str) -> str:
    """The kind of a step, from its name (``candidates-2`` is a paired round of the candidates,
    ``iteration-3-round-2`` a race round, ``test-round-2`` the held-out test's)."""
    for kind, pattern in _KINDS:
        if pattern.fullmatch(name):
            return kind
    return name


# -- the reference ----------------------------------------------------------------------------------
_VOLATILE = re.compile(r".*(_at|latency.*|ttft.*|duration.*|elapsed.*)")
_HOW_ANSWERED = {"model_calls", "cache_hits", "fail_fast_skipped"}
_DIGITS = re.compile(r"\d+")


def comparable(report: Any, job_id: str, name: str, *, fail_fast: bool = False) -> Any:
    """What a report must share with the reference's (see the module's docstring)."""
    data = report.model_dump(mode="json")
    if fail_fast and data.get("kind") == "compress":
        data["rejected"] = [_cut_short(r) for r in data.get("rejected", ())]
        ablation = data.get("ablation")
        if ablation and ablation.get("noticed") and _strict(ablation.get("stats")):
            data["ablation"] = {**ablation, "stats": None, "reason": _count_free(ablation["reason"])}
        if _strict(data.get("combined")) and data["combined"].get("regressed"):
            data["combined"] = "rejected by strict under fail-fast"
    reference = (data.get("drift") or {}).get("reference")
    if isinstance(reference, dict) and "id" in reference:  # a fresh id per reference recorded
        data["drift"]["reference"] = {**reference, "id": "<reference>"}
    return _walk(data, job_id, name)


def _strict(stats: Any) -> bool:
    return isinstance(stats, dict) and stats.get("gate") == "strict"


def _count_free(reason: str) -> str:
    return _DIGITS.sub("#", reason.replace("at least ", ""))


def _cut_short(rejected: dict[str, Any]) -> dict[str, Any]:
    """A strict rejection under fail-fast: how many regressions it counted (and whether that is a
    lower bound), and the statistics it read them from, depend on which evaluations finished
    before its mark; :func:`counts_agree` checks the counts against each other."""
    if not _strict(rejected.get("gate")):
        return rejected
    return {
        **rejected,
        "regression_count": None,
        "regression_count_is_lower_bound": None,
        "gate": None,
        "reason": _count_free(rejected["reason"]),
    }


def counts_agree(got: Any, want: Any) -> list[str]:
    """Two compress reports' strict regression counts tell no contradiction: each is at least 1,
    two exact counts are equal, and an exact count is not below a lower bound."""
    out = []
    for a, b in zip(getattr(got, "rejected", ()), getattr(want, "rejected", ()), strict=False):
        if not (a.gate and b.gate and a.gate.gate == b.gate.gate == "strict"):
            continue  # compared whole by comparable()
        la, lb = a.regression_count_is_lower_bound, b.regression_count_is_lower_bound
        ok = a.regression_count >= 1 and b.regression_count >= 1
        if not la and not lb:
            ok = ok and a.regression_count == b.regression_count
        elif not la:
            ok = ok and a.regression_count >= b.regression_count
        elif not lb:
            ok = ok and b.regression_count >= a.regression_count
        if not ok:
            out.append(
                f"{a.section_path}: {a.regression_count} (lower bound {la}) vs {b.regression_count} ({lb})"
            )
    return out


def _walk(value: Any, job_id: str, name: str) -> Any:
    if isinstance(value, dict):
        return {
            k: _walk(v, job_id, name)
            for k, v in value.items()
            if not _VOLATILE.fullmatch(k) and k not in _HOW_ANSWERED
        }
    if isinstance(value, list | tuple):
        return [_walk(v, job_id, name) for v in value]
    if isinstance(value, str):
        return value.replace(job_id, "<job>").replace(name, "<name>")
    if isinstance(value, float):
        return round(value, 9)
    return value


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two comparable reports differ (paths and values), for a failure message."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += differences(a.get(k), b.get(k), f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += differences(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [f"{path}: {a!r:.200} != {b!r:.200}"]
