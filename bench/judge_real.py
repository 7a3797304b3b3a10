"""``make bench-judge-real``: SmolLM2-135M-Instruct as the faithfulness judge (issue 31).

The judge (``faithfulness: {judge: {model: ...}}``, :mod:`optiflow.llm.faithjudge`) asks a named
model two questions per proposal: does the proposal impose every instruction of the original
(forward), and does the original impose every instruction of the proposal (backward)? This bench
runs :func:`~optiflow.llm.faithjudge.judge_proposal` unchanged on the labelled pairs of the
faithfulness suite (``tests/core/faithfulness_pairs.py``), with SmolLM2-135M-Instruct served by
llama.cpp on 127.0.0.1 (:class:`~optiflow.llm.local_model.LocalModelServer`, as ``make bench-real``
serves it) and reached through litellm as ``openai/smollm2`` with ``api_base``, at temperature 0.

It reports:

(a) the judge alone as a classifier (``same`` means faithful): accuracy, the confusion table, and
    how many answers followed neither format (``parse_same`` returned None: read as "no");
(b) the combined check the product runs (``optiflow.distributed.work.propose_edit``): the reading
    rules first, the judge only on a proposal they accepted, accepted only when both accept; per
    split, next to the reading rules alone;
(c) how often the forward and the backward answer agree;
(d) calls, seconds, seconds per call;
(e) five of the judge's answers verbatim, some right and some wrong.

The first ``PROBE_PAIRS`` pairs time the model; when every pair fits in ``--budget-min`` minutes
at that speed every pair is judged, else a seeded sample stratified by label and split (at least
``SAMPLE_MIN`` pairs). Each call's raw answer is recorded by wrapping
``optiflow.llm.completion.complete`` (the function the judge calls) for the duration of the run.

``python -m bench.judge_real --out bench/judge_real.md`` (also writes the ``.json``); needs
``make local-model``. ``--limit N`` judges only the first N selected pairs (a quick try);
``--from-json`` rewrites the markdown from a previous run's JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from optiflow.core.faithfulness import JudgeSpec
from optiflow.core.model import ModelConfig
from optiflow.errors import ModelProviderError
from optiflow.llm.faithjudge import json_verdict, parse_same
from tests.core import faithfulness_pairs as suite
from tests.core.faithfulness_pairs import Pair

ROOT = Path(__file__).resolve().parents[1]
MAX_TOKENS = 80
"""Room for the JSON answer ``{"same": ..., "reason": "<one short sentence>"}``."""
TIMEOUT_S = 300.0
"""Per call: the server answers one request at a time, and another job may share the CPU."""
PROBE_PAIRS = 10
BUDGET_MIN = 25.0
SAMPLE_MIN = 120
SAMPLE_SEED = "bench-judge-real"
SERVER_SEED = 31
EXAMPLES = 5
HONEST, CHANGED = "labelled honest", "meaning changed"


# -- recording the judge's raw answers ------------------------------------------------------------
@dataclass
class Call:
    output: str
    seconds: float
    prompt_tokens: int
    completion_tokens: int
    error: str | None


@dataclass
class Recorder:
    calls: list[Call] = field(default_factory=list)


@contextmanager
def recording() -> Iterator[Recorder]:
    """Every call of ``optiflow.llm.completion.complete`` in this process, recorded (the judge
    imports it at each call, so the wrapper is what it calls)."""
    from optiflow.llm import completion

    rec = Recorder()
    original: Callable[..., Any] = completion.complete

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        result = original(*args, **kwargs)
        rec.calls.append(
            Call(
                output=result.output,
                seconds=time.perf_counter() - t0,
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
                error=result.error,
            )
        )
        return result

    completion.complete = wrapped
    try:
        yield rec
    finally:
        completion.complete = original


# -- choosing the pairs ---------------------------------------------------------------------------
def stratum(p: Pair) -> tuple[bool, str]:
    return (p.faithful, p.split)


def stratified(ps: Sequence[Pair], n: int, seed: str) -> list[Pair]:
    """``n`` pairs, each (label, split) stratum in proportion (largest remainder, at least one
    each), drawn with a seeded RNG; in the suite's order."""
    groups: dict[tuple[bool, str], list[Pair]] = {}
    for p in ps:
        groups.setdefault(stratum(p), []).append(p)
    keys = sorted(groups)
    exact = {k: n * len(groups[k]) / len(ps) for k in keys}
    take = {k: max(1, int(exact[k])) for k in keys}
    for k in sorted(keys, key=lambda k: exact[k] - int(exact[k]), reverse=True):
        if sum(take.values()) >= n:
            break
        take[k] = min(len(groups[k]), take[k] + 1)
    rng = random.Random(seed)
    chosen = {p.id for k in keys for p in rng.sample(groups[k], min(take[k], len(groups[k])))}
    return [p for p in ps if p.id in chosen]


def answer_form(text: str) -> str:
    """How ``parse_same`` read an answer: ``json``, ``word`` (a first word that is exactly yes or
    no) or ``neither``. (The committed run's ``prefix``, a yes/no read off the start of another
    word such as "Nordhaven", was the parser's before it read the whole first word.)"""
    same, _ = parse_same(text)
    if same is None:
        return "neither"
    return "json" if json_verdict(text) is not None else "word"


# -- judging --------------------------------------------------------------------------------------
def judge_config(model: str, api_base: str) -> ModelConfig:
    return ModelConfig(
        model=model,
        api_base=api_base,
        params={"api_key": "local", "temperature": 0.0, "max_tokens": MAX_TOKENS, "stream": False},
        timeout=TIMEOUT_S,
        retries=1,
    )


def judge_one(spec: JudgeSpec, p: Pair, rec: Recorder) -> dict[str, Any]:
    """One pair: the reading rules' verdict, then the judge's (as the product asks it), with the
    two raw answers."""
    from optiflow.llm.faithjudge import judge_proposal

    original = suite.original(p)
    structural = suite.verdict(p)
    first = len(rec.calls)
    t0 = time.perf_counter()
    error = None
    try:
        v = judge_proposal(spec, original, p.proposal, f"pair {p.id}")
        same, forward, backward, reason = v.same, v.forward, v.backward, v.reason
    except ModelProviderError as exc:  # the product fails the proposal: counted as not the same
        same, forward, backward, reason, error = False, None, None, "", str(exc)
    calls = rec.calls[first:]
    return {
        "id": p.id,
        "split": p.split,
        "kind": p.kind,
        "source": p.source,
        "faithful": p.faithful,
        "structural": structural.faithful,
        "structural_reason": structural.reason,
        "judge_same": same,
        "forward": forward,
        "backward": backward,
        "reason": reason,
        "error": error,
        "answers": [c.output for c in calls],
        "parsed": [parse_same(c.output)[0] for c in calls],
        "forms": [answer_form(c.output) for c in calls],
        "call_s": [round(c.seconds, 3) for c in calls],
        "prompt_tokens": [c.prompt_tokens for c in calls],
        "completion_tokens": [c.completion_tokens for c in calls],
        "seconds": time.perf_counter() - t0,
    }


def progress(i: int, total: int, row: dict[str, Any], started: float) -> None:
    mark = "ok " if row["judge_same"] == row["faithful"] else "BAD"
    fb = f"{row['forward']!s:>5}/{row['backward']!s:<5}"
    print(
        f"  [{i:3}/{total}] {mark} #{row['id']:<4} {row['split']:10} {'honest ' if row['faithful'] else 'changed'} "
        f"{row['kind'][:20]:20} judge {fb} {row['seconds']:5.1f}s  t={time.perf_counter() - started:.0f}s",
        flush=True,
    )


def run(args: argparse.Namespace, notes: dict[str, Any]) -> list[dict[str, Any]]:
    """Serve SmolLM2, time the first pairs, choose the pairs, judge them; the server stops at the end."""
    from importlib.metadata import version

    from optiflow.llm.local_model import LocalModelServer, find_gguf, free_port

    everything = suite.pairs()
    rows: dict[int, dict[str, Any]] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        server = LocalModelServer(port=free_port(), seed=SERVER_SEED, log=Path(tmp) / "llama-server.log")
        with server, recording() as rec:
            spec = JudgeSpec(model=judge_config(server.model, server.api_base))
            print(
                f"server {server.api_base} (pid {server.pid}, {server.n_threads} thread(s)), model {server.model}"
            )
            probe = list(everything[:PROBE_PAIRS])
            for i, p in enumerate(probe, 1):
                rows[p.id] = judge_one(spec, p, rec)
                progress(i, len(probe), rows[p.id], started)
            probe_calls = [c for r in rows.values() for c in r["call_s"]]
            s_per_call = sum(probe_calls) / max(len(probe_calls), 1)
            full_min = 2 * len(everything) * s_per_call / 60
            if full_min <= args.budget_min:
                chosen, selection = list(everything), f"all {len(everything)} pairs"
            else:
                n = max(SAMPLE_MIN, int(args.budget_min * 60 / (2 * s_per_call)))
                chosen = stratified(everything, n, SAMPLE_SEED)
                selection = (
                    f"a sample of {len(chosen)} of the {len(everything)} pairs, stratified by label and split "
                    f"(seed {SAMPLE_SEED!r}): all of them would take ~{full_min:.0f} min"
                )
            if args.limit:
                chosen = chosen[: args.limit]
                selection += f", cut to the first {len(chosen)} by --limit"
            print(
                f"probe: {len(probe_calls)} calls, {s_per_call:.2f} s/call -> all {len(everything)} pairs "
                f"~{full_min:.1f} min (budget {args.budget_min:g} min): judging {selection}",
                flush=True,
            )
            for i, p in enumerate(chosen, 1):
                if p.id not in rows:
                    rows[p.id] = judge_one(spec, p, rec)
                progress(i, len(chosen), rows[p.id], started)
        notes.update(
            gguf=find_gguf().name,
            llama_cpp=version("llama-cpp-python"),
            litellm=version("litellm"),
            server_threads=server.n_threads,
            server_seed=server.seed,
            model=server.model,
            params={k: v for k, v in spec.model.params.items() if k != "api_key"},
            timeout_s=spec.model.timeout,
            retries=spec.model.retries,
            probe={
                "pairs": len(probe),
                "calls": len(probe_calls),
                "s_per_call": s_per_call,
                "all_min": full_min,
            },
            selection=selection,
            pairs_total=len(everything),
            run_s=time.perf_counter() - started,
        )
    return [rows[p.id] for p in chosen]


# -- the numbers ----------------------------------------------------------------------------------
def confusion(rows: Sequence[dict[str, Any]], accepted: Callable[[dict[str, Any]], bool]) -> dict[str, int]:
    c: Counter[str] = Counter()
    for r in rows:
        c[("honest" if r["faithful"] else "changed") + (" accepted" if accepted(r) else " refused")] += 1
    keys = ("honest accepted", "honest refused", "changed accepted", "changed refused")
    return {k: c[k] for k in keys}


def accuracy(c: dict[str, int]) -> float:
    n = sum(c.values())
    return (c["honest accepted"] + c["changed refused"]) / n if n else 0.0


def judge_alone(r: dict[str, Any]) -> bool:
    return bool(r["judge_same"])


def structural(r: dict[str, Any]) -> bool:
    return bool(r["structural"])


def combined(r: dict[str, Any]) -> bool:
    return bool(r["structural"] and r["judge_same"])


def forward_alone(r: dict[str, Any]) -> bool:
    return r["forward"] is True


def backward_alone(r: dict[str, Any]) -> bool:
    return r["backward"] is True


def block(rows: Sequence[dict[str, Any]], rule: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    c = confusion(rows, rule)
    return {"n": len(rows), "accuracy": accuracy(c), "confusion": c}


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    calls = [s for r in rows for s in r["call_s"]]
    parsed = [x for r in rows for x in r["parsed"]]
    both = [r for r in rows if r["forward"] is not None and r["backward"] is not None]
    fb = Counter(f"{r['forward']}/{r['backward']}" for r in rows)
    splits = sorted({r["split"] for r in rows}, key=lambda s: (s != "tune", s))
    per_split = {}
    for s in [*splits, "all"]:
        sub = [r for r in rows if s in ("all", r["split"])]
        per_split[s] = {
            "structural": block(sub, structural),
            "combined": block(sub, combined),
            "judge": block(sub, judge_alone),
            "judged": sum(1 for r in sub if r["structural"]),
        }
    honest = sum(1 for r in rows if r["faithful"])
    return {
        "pairs": len(rows),
        "honest": honest,
        "judge": block(rows, judge_alone),
        "forward_alone": block(rows, forward_alone),
        "backward_alone": block(rows, backward_alone),
        "majority_baseline": max(honest, len(rows) - honest) / max(len(rows), 1),
        "same_rate": sum(1 for r in rows if r["judge_same"]) / max(len(rows), 1),
        "answers": len(parsed),
        "answers_yes": sum(1 for x in parsed if x is True),
        "answers_no": sum(1 for x in parsed if x is False),
        "answers_neither": sum(1 for x in parsed if x is None),
        "pairs_with_neither": sum(1 for r in rows if None in r["parsed"]),
        "forms": dict(Counter(f for r in rows for f in r["forms"]).most_common()),
        "errors": sum(1 for r in rows if r["error"]),
        "forward_backward": dict(fb.most_common()),
        "fb_both_parsed": len(both),
        "fb_agree": sum(1 for r in both if r["forward"] == r["backward"]),
        "per_split": per_split,
        "calls": len(calls),
        "call_s_total": sum(calls),
        "s_per_call": sum(calls) / max(len(calls), 1),
        "prompt_tokens_mean": mean_of([t for r in rows for t in r["prompt_tokens"]]),
        "completion_tokens_mean": mean_of([t for r in rows for t in r["completion_tokens"]]),
        "by_kind": by_kind(rows),
    }


def mean_of(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def by_kind(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    kinds: dict[tuple[str, bool], list[dict[str, Any]]] = {}
    for r in rows:
        kinds.setdefault((r["kind"], r["faithful"]), []).append(r)
    out = [
        {
            "kind": k,
            "faithful": f,
            "n": len(rs),
            "judge_right": sum(1 for r in rs if judge_alone(r) == f),
            "structural_right": sum(1 for r in rs if structural(r) == f),
            "combined_right": sum(1 for r in rs if combined(r) == f),
        }
        for (k, f), rs in kinds.items()
    ]
    return sorted(out, key=lambda x: (not x["faithful"], -x["n"], x["kind"]))


def examples(rows: Sequence[dict[str, Any]], count: int = EXAMPLES) -> list[dict[str, Any]]:
    """``count`` pairs to show verbatim, taking in turn from: right and wrong, on both labels; within
    one, answers the parser read as JSON or a plain yes/no first, then a kind of pair and a first
    answer not shown yet, then the suite's order."""
    groups: list[tuple[str, Callable[[dict[str, Any]], bool]]] = [
        ("right: meaning changed, judged differs", lambda r: not r["faithful"] and not r["judge_same"]),
        ("wrong: honest, judged differs", lambda r: r["faithful"] and not r["judge_same"]),
        ("right: honest, judged the same", lambda r: r["faithful"] and r["judge_same"]),
        ("wrong: meaning changed, judged the same", lambda r: not r["faithful"] and r["judge_same"]),
    ]
    picked: list[dict[str, Any]] = []
    for _ in range(count):
        for label, rule in groups:
            if len(picked) >= count:
                break
            ids = {p["id"] for p in picked}
            kinds = {p["kind"] for p in picked}
            starts = {p["answers"][0][:40] for p in picked if p["answers"]}
            cands = [r for r in rows if rule(r) and r["id"] not in ids]
            cands.sort(
                key=lambda r: (
                    not {"json", "word"} & set(r["forms"]),
                    r["kind"] in kinds,
                    bool(r["answers"]) and r["answers"][0][:40] in starts,
                    r["id"],
                )
            )
            if cands:
                picked.append({"label": label, **cands[0]})
    return picked


# -- the report -----------------------------------------------------------------------------------
def table(c: dict[str, int], yes: str = "judged same", no: str = "judged differs") -> list[str]:
    return [
        f"| | {yes} | {no} |",
        "|---|---:|---:|",
        f"| {HONEST} | {c['honest accepted']} | {c['honest refused']} |",
        f"| {CHANGED} | {c['changed accepted']} | {c['changed refused']} |",
    ]


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def cell(b: dict[str, Any]) -> str:
    c = b["confusion"]
    return (
        f"{pct(b['accuracy'])} ({c['honest accepted']}/{c['honest accepted'] + c['honest refused']} honest acc., "
        f"{c['changed accepted']}/{c['changed accepted'] + c['changed refused']} changed acc.)"
    )


def markdown(data: dict[str, Any]) -> str:
    n, s = data["notes"], data["summary"]
    out = [
        "# SmolLM2-135M as the faithfulness judge (issue 31)",
        "",
        f"`make bench-judge-real` (`python -m bench.judge_real`), {n['date']}, {n['machine']}, at {n['commit']}"
        f"{' (optiflow/core or tests/core changed in the work tree)' if n.get('dirty') else ''}.",
        f"Model `{n['gguf']}` served by llama-cpp-python {n['llama_cpp']} (`LocalModelServer`, "
        f"{n['server_threads']} thread(s), seed {n['server_seed']}), reached through litellm {n['litellm']} "
        f"as `{n['model']}`; params {json.dumps(n['params'])}, timeout {n['timeout_s']:g} s, "
        f"retries {n['retries']}. Judge: `optiflow.llm.faithjudge.judge_proposal` unchanged "
        "(two requests per pair, forward and backward; same only on two yeses).",
        "",
        f"Pairs: {n['selection']} (suite: {', '.join(n['files'])}). Probe: the first {n['probe']['pairs']} "
        f"pairs, {n['probe']['s_per_call']:.2f} s/call, all pairs estimated at {n['probe']['all_min']:.1f} min "
        "(probe pairs outside the selection are left out of every number below).",
        f"Other load on the machine: {n['load']}.",
        "",
        f"## (a) The judge alone ({s['pairs']} pairs, {s['honest']} labelled honest)",
        "",
        f"Accuracy **{pct(s['judge']['accuracy'])}** (always answering the majority label: "
        f"{pct(s['majority_baseline'])}); the judge said *same* on {pct(s['same_rate'])} of the pairs.",
        "",
        *table(s["judge"]["confusion"]),
        "",
        f"Answers: {s['answers']} ({s['answers_yes']} yes, {s['answers_no']} no, **{s['answers_neither']} in "
        f"neither format**, read as no; {s['pairs_with_neither']} pairs have at least one). Model errors: {s['errors']}.",
        f"How each answer was read: {', '.join(f'{k} {v}' for k, v in s['forms'].items())} (json: the asked-for "
        "JSON; word: a first word exactly yes or no; prefix: yes/no read off the start of another word such "
        'as "Nordhaven" or "Note"; neither: read as no).',
        f"One direction alone as the verdict: forward {pct(s['forward_alone']['accuracy'])}, "
        f"backward {pct(s['backward_alone']['accuracy'])}.",
        "",
        "## (b) The combined check (reading rules, then the judge on what they accept) per split",
        "",
        "| split | pairs | reading rules alone | rules + judge | judge alone | judged |",
        "|---|---:|---|---|---|---:|",
    ]
    for split, b in s["per_split"].items():
        out.append(
            f"| {split} | {b['structural']['n']} | {cell(b['structural'])} | {cell(b['combined'])} | "
            f"{cell(b['judge'])} | {b['judged']} |"
        )
    al = s["per_split"]["all"]
    out += [
        "",
        '"judged": pairs the reading rules accepted, the only ones the product asks the judge about.',
        "",
        "Reading rules alone, all pairs:",
        "",
        *table(al["structural"]["confusion"], "accepted", "refused"),
        "",
        "Rules + judge, all pairs:",
        "",
        *table(al["combined"]["confusion"], "accepted", "refused"),
        "",
        "## (c) Forward / backward",
        "",
        f"Both answers parsed on {s['fb_both_parsed']} pairs; they agree on {s['fb_agree']} "
        f"({pct(s['fb_agree'] / max(s['fb_both_parsed'], 1))}).",
        "",
        "| forward/backward | pairs |",
        "|---|---:|",
        *[f"| {k} | {v} |" for k, v in s["forward_backward"].items()],
        "",
        "## (d) Cost",
        "",
        f"{s['calls']} calls, {s['call_s_total']:.0f} s in calls, **{s['s_per_call']:.2f} s/call** (mean prompt "
        f"{s['prompt_tokens_mean']:.0f} tokens, answer {s['completion_tokens_mean']:.0f} tokens); "
        f"the whole bench {n['bench_s']:.0f} s wall, server started to stopped {n['run_s']:.0f} s.",
        "",
        "## By kind of pair",
        "",
        "| kind | label | pairs | judge right | rules right | rules + judge right |",
        "|---|---|---:|---:|---:|---:|",
        *[
            f"| {k['kind']} | {'honest' if k['faithful'] else 'changed'} | {k['n']} | {k['judge_right']} | "
            f"{k['structural_right']} | {k['combined_right']} |"
            for k in s["by_kind"]
        ],
        "",
        "## (e) Five answers verbatim",
        "",
    ]
    out += example_lines(data["examples"])
    out += ["## Reading", "", *data.get("reading", ["(none written)"]), ""]
    return "\n".join(out)


def example_lines(exs: Sequence[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for e in exs:
        out += [
            f"**{e['label']}**: pair #{e['id']} ({e['split']}, {e['kind']}); reading rules "
            f"{'accepted' if e['structural'] else 'refused'}.",
            "",
        ]
        for name, answer, form in zip(("forward", "backward"), e["answers"], e["forms"], strict=False):
            out += [f"- {name} answer (read as {form}): `{json.dumps(answer)[1:-1]}`"]
        out += [f"- the verdict's reason: `{json.dumps(e['reason'])[1:-1]}`", ""]
    return out


def reading(s: dict[str, Any]) -> list[str]:
    """A plain reading of the numbers, written from them."""
    j, al = s["judge"], s["per_split"]["all"]
    c = j["confusion"]
    out = [
        f"- The judge alone: {pct(j['accuracy'])} against {pct(s['majority_baseline'])} for always "
        f"answering the majority label; it accepted {c['honest accepted']} of {c['honest accepted'] + c['honest refused']} "
        f"honest pairs and {c['changed accepted']} of {c['changed accepted'] + c['changed refused']} meaning changes.",
        f"- {s['answers_neither']} of {s['answers']} answers followed neither format; how all were read: "
        f"{', '.join(f'{k} {v}' for k, v in s['forms'].items())}.",
        f"- Rules + judge: {pct(al['combined']['accuracy'])} against {pct(al['structural']['accuracy'])} for the "
        f"reading rules alone; meaning changes accepted {al['structural']['confusion']['changed accepted']} -> "
        f"{al['combined']['confusion']['changed accepted']}, honest pairs refused "
        f"{al['structural']['confusion']['honest refused']} -> {al['combined']['confusion']['honest refused']}.",
    ]
    if s["answers_yes"] == 0:
        out.append(
            "- The model never answered yes, so with it as the judge the product refuses every proposal: "
            'its "accuracy" is the share of meaning changes in the pairs, not a reading of them.'
        )
    if s["forms"].get("prefix"):
        out.append(
            f"- {s['forms']['prefix']} answers were read as yes/no off the start of another word (the first "
            'word starts with "no"/"yes", e.g. "Nordhaven"): `parse_same` reads a prefix, not a word.'
        )
    return out


# -- main -----------------------------------------------------------------------------------------
def git(*argv: str) -> str:
    try:
        return subprocess.run(
            ["git", *argv], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def load_line() -> str:
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "unknown"
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) at the start"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "judge_real.md")
    parser.add_argument("--budget-min", type=float, default=BUDGET_MIN, help="judge every pair when it fits")
    parser.add_argument("--limit", type=int, default=0, help="judge only the first N selected pairs")
    parser.add_argument("--from-json", type=Path, help="rewrite the markdown from this JSON")
    args = parser.parse_args()
    if args.from_json:
        write(args.out, json.loads(args.from_json.read_text()))
        return
    from optiflow.llm.local_model import missing_reason

    reason = missing_reason()
    if reason:
        print(f"bench-judge-real: the local model is not available: {reason}", file=sys.stderr)
        sys.exit(2)
    started = time.perf_counter()
    notes: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}, {platform.machine()}",
        "commit": git("rev-parse", "--short", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--", "optiflow/core", "tests/core")),
        "files": list(suite.FILES),
        "args": " ".join(sys.argv[1:]),
        "load": load_line(),
        "max_tokens": MAX_TOKENS,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows = run(args, notes)
    notes["bench_s"] = time.perf_counter() - started
    write(args.out, {"notes": notes, "rows": rows})


def write(out: Path, data: dict[str, Any]) -> None:
    """The numbers, the examples and the reading from ``data["rows"]``; the JSON and the markdown."""
    data["summary"] = summarize(data["rows"])
    data["examples"] = examples(data["rows"])
    data["reading"] = reading(data["summary"])
    data = {k: data[k] for k in ("notes", "summary", "reading", "examples", "rows")}
    out.with_suffix(".json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    out.write_text(markdown(data))
    print("\n".join(data["reading"]))
    print(f"wrote {out} and {out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
