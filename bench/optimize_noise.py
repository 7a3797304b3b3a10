"""``make bench-optimize-noise``: does an optimize job tell improvement from noise, on every shape?

Every job is the pure optimize workflow (:class:`~optiflow.core.optimize.workflow.OptimizeWorkflow`)
driven step by step in this process, exactly as the Celery driver drives it (the reproduction
step, the race's rounds and the held-out test included); only the evaluations are drawn here,
with the same pure functions the simulated provider's noise mode calls (:mod:`optiflow.llm.noise`),
instead of through litellm and Celery (tens of thousands of jobs would take days that way; the
workflow cannot tell). Jobs run on a process pool (``--workers``, default 2).

A row is one configuration: the **shape** of the per-sample pass probabilities (drawn fresh for
every job from ``sim_pass_dist``: U-shaped ``beta(0.3,0.3)``, uniform ``beta(1,1)``, high-pass
``beta(5,1)``, mostly deterministic ``0.4*fixed(0) + 0.4*fixed(1) + 0.2*beta(1,1)``, and the
bench's own SmolLM2-like ``beta(3.3,3.3)``), the number of **samples** (20 / 48 / 150), the number
of **variants** the job compares (2 / 12 / 24), **splits** (train / val / test thirds: selection
on val, the held-out paired test on test) or not, and the **optimizer**: ``grid`` over a model
param, or ``llm_rewrite`` (its rewrite requests answered with a new text each, so every rewrite
is a new prompt to the noise model). Every candidate is its own prompt, so its runs are drawn
independently of the baseline's.

- **No-op rows**: every candidate's per-sample probabilities are the baseline's (true gain 0.0
  on every sample). A crowned candidate is a false crown; with splits, "improved" is false.
- **Power rows** (+5 / +10 / +20 points): one candidate (at a random place) gains ``g`` on every
  sample's fail rate, ``p + (1 - p) g``, with ``g`` set so the mean gain is the row's (capped at
  ``g = 1``: a high-pass shape has little room). Power is the share of jobs that crown it (with
  splits: and confirm it on held-out data).

Every job uses ``acceptance: auto`` (the default), alpha 0.05, beta 0.05, effect 0.10, max_runs 32.
The fixed design per row runs, for the k-th comparison, the normal-theory runs per side that tell
+10 points from none at ``alpha_k`` / ``beta`` on the row's selection samples (the gate's
yardstick, :func:`optiflow.core.gate.fixed_runs`), the baseline as many as the largest of them.

It also runs the shipped optimize examples on the deterministic simulated model under ``auto`` and
under ``none`` (what the reproduction costs there) and replays their histories.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from multiprocessing import Pool
from pathlib import Path
from statistics import mean
from typing import Any

from optiflow.core.actions import Finish
from optiflow.core.dataset import Dataset, Sample
from optiflow.core.evaluation import EvalResult
from optiflow.core.gate import GateSpec, fixed_runs
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.core.optimize.selection import alpha_at
from optiflow.core.optimize.spec import OptimizeSpec
from optiflow.core.optimize.workflow import OptimizeWorkflow
from optiflow.core.prompt import Prompt, Section
from optiflow.core.step import RewriteReply, RewriteRequest, Step, StepResults
from optiflow.llm.noise import SMOLLM2_LIKE, pass_probability, passes

SHAPES = {
    "U-shaped": "beta(0.3,0.3)",
    "uniform": "beta(1,1)",
    "high-pass": "beta(5,1)",
    "mostly-det": "0.4*fixed(0) + 0.4*fixed(1) + 0.2*beta(1,1)",
    "bench": SMOLLM2_LIKE,
}
PROMPT = Prompt(
    ns="bench",
    key="noise",
    sections=(Section(path=("task",), body="Answer the question."),),
    user="${question}",
)
EFFECT = 0.10


@dataclass(frozen=True)
class Row:
    label: str
    shape: str
    n: int
    variants: int
    splits: bool = False
    optimizer: str = "grid"
    gain: float = 0.0

    @property
    def per_step(self) -> int:
        return min(3, self.variants)


def rows_of() -> list[Row]:
    """The issue's three failing configurations first, then the grid of shapes and sizes."""
    rows = [
        Row("issue 28: mostly-det, 20 samples, 12 variants", "mostly-det", 20, 12),
        Row("issue 28: mostly-det, 48 samples, splits", "mostly-det", 48, 12, splits=True),
        Row("issue 28: llm_rewrite, mostly-det, 20 samples", "mostly-det", 20, 12, optimizer="llm_rewrite"),
    ]
    for shape in SHAPES:
        for n in (20, 48, 150):
            if (shape, n) != ("mostly-det", 20):
                rows.append(Row("no-op", shape, n, 12))
    for shape in ("bench", "mostly-det", "U-shaped"):
        for v in (2, 24):
            rows.append(Row("no-op", shape, 48, v))
    for shape in SHAPES:
        if shape != "mostly-det":
            rows.append(Row("no-op", shape, 48, 12, splits=True))
    rows.append(Row("no-op", "bench", 48, 12, optimizer="llm_rewrite"))
    rows.append(Row("no-op", "U-shaped", 48, 12, optimizer="llm_rewrite"))
    rows.append(Row("no-op", "mostly-det", 48, 12, splits=True, optimizer="llm_rewrite"))
    for g in (0.10, 0.05, 0.20):  # +10 (the target) first
        for shape in SHAPES:
            rows.append(Row("power", shape, 48, 12, gain=g))
    for n in (20, 150):
        rows.append(Row("power", "bench", n, 12, gain=0.10))
    rows.append(Row("power", "bench", 48, 2, gain=0.10))
    rows.append(Row("power", "bench", 48, 24, gain=0.10))
    rows.append(Row("power", "bench", 48, 12, splits=True, gain=0.10))
    rows.append(Row("power", "mostly-det", 48, 12, splits=True, gain=0.10))
    rows.append(Row("power", "bench", 48, 12, optimizer="llm_rewrite", gain=0.10))
    rows.append(Row("power", "mostly-det", 20, 12, optimizer="llm_rewrite", gain=0.10))
    return rows


def samples_of(row: Row) -> tuple[Sample, ...]:
    def split(i: int) -> str | None:
        if not row.splits:
            return None
        return ("train", "val", "test")[i * 3 // row.n]

    return tuple(
        Sample(id=f"s{i:03d}", input={"question": f"q{i}"}, expected="x", split=split(i))
        for i in range(row.n)
    )


def spec_of(row: Row) -> OptimizeSpec:
    common: dict[str, Any] = {
        "name": "noise",
        "prompt": PROMPT,
        "dataset": Dataset(name="noise", samples=samples_of(row)),
        "check": {"type": "contains"},
        "max_candidates_per_step": row.per_step,
        "acceptance": {"test": "auto"},
        "eval_runs": 1,
        "splits": row.splits,
    }
    iterations = -(-row.variants // row.per_step) + 1
    if row.optimizer == "grid":
        return OptimizeSpec.model_validate(
            {
                **common,
                "model": {"model": "optiflow/sim", "params": {"variant": 0}},
                "treatment": {"model_params": ["variant"]},
                "optimizer": {"type": "grid", "space": {"variant": list(range(1, row.variants + 1))}},
                "termination": {"max_iterations": iterations + 1},
            }
        )
    return OptimizeSpec.model_validate(
        {
            **common,
            "model": {"model": "optiflow/sim"},
            "treatment": {"sections": ["task"]},
            "optimizer": {"type": "llm_rewrite", "model": {"model": "optiflow/sim"}, "max_length": 4000},
            "termination": {"max_iterations": iterations},
        }
    )


def candidate_of(experiment_id: str) -> int:
    """``j7-c3`` / ``j7-test-c3`` -> 3."""
    return int(experiment_id.rsplit("-c", 1)[1])


def probabilities(
    row: Row, job: str, ids: Sequence[str], rng: random.Random
) -> tuple[list[float], list[float], int | None]:
    """The baseline's per-sample pass probabilities, the gaining candidate's, and its number."""
    base = [pass_probability(SHAPES[row.shape], job, sid) for sid in ids]
    if not row.gain:
        return base, base, None
    room = mean(1 - p for p in base)
    g = min(1.0, row.gain / room) if room > 0 else 0.0
    # llm_rewrite's jobs here make 9 or 10 comparisons (3 iterations of 3 rewrites, and one more
    # iteration's when the termination allows it): the gain goes to one of the first 9
    last = row.variants if row.optimizer == "grid" else min(row.variants, 9)
    return base, [p + (1 - p) * g for p in base], rng.randrange(1, last + 1)


def drive(
    spec: OptimizeSpec,
    evaluate: Callable[[Step], list[EvalResult]],
    job_id: str,
    answer: Callable[[Step], tuple[RewriteReply, ...]] = lambda step: (),
) -> tuple[OptimizationHistory, int]:
    """The pure optimize workflow as the Celery driver runs it: (its history, evaluations made)."""
    wf = OptimizeWorkflow(spec, job_id)
    tr = wf.start()
    state, action = tr.state, tr.action
    calls = 0
    while isinstance(action, Step):
        evals = evaluate(action)
        calls += len(evals)
        tr = wf.advance(state, StepResults(step=action, evals=tuple(evals), rewrites=answer(action)))
        state, action = tr.state, tr.action
    assert isinstance(action, Finish), action
    assert isinstance(action.report, OptimizationHistory)
    return action.report, calls


def run_job(args: tuple[Row, int, int]) -> dict[str, Any]:
    row, seed, index = args
    job = f"{seed}-{row}-{index}"
    rng = random.Random(job)
    spec = spec_of(row)
    ids = [s.id for s in spec.dataset.samples]
    where = {sid: i for i, sid in enumerate(ids)}
    base, better, gainer = probabilities(row, job, ids, rng)

    def evaluate(step: Step) -> list[EvalResult]:
        out = []
        for t in step.targets:
            k = candidate_of(t.experiment.id)
            p = better if k == gainer else base
            for run in t.run_indices:
                for sid in t.sample_ids:
                    ok = passes(p[where[sid]], job, f"c{k}", sid, run)
                    out.append(
                        EvalResult.model_construct(
                            experiment_id=t.experiment.id,
                            sample_id=sid,
                            run=run,
                            passed=ok,
                            score=float(ok),
                            output=None,
                            reason="",
                            prompt_tokens=100,
                            completion_tokens=10,
                            cost=0.0,
                            latency_ms=1.0,
                            ttft_ms=None,
                            error=None,
                            cached=False,
                            skipped=False,
                        )
                    )
        return out

    def answer(step: Step) -> tuple[RewriteReply, ...]:
        replies = []
        for req in step.rewrites:
            assert isinstance(req, RewriteRequest)
            text = f"{req.current} (variant {req.variant}, iteration {len(req.iterations)})"
            replies.append(RewriteReply(id=req.id, text=text, prompt_tokens=10, completion_tokens=10))
        return tuple(replies)

    h, calls = drive(spec, evaluate, f"j{index}", answer)
    best = None if not h.changed else candidate_of(f"x-{h.best_candidate_id}")
    sel = spec.validation_ids() or spec.trial_ids()
    true_gain = 0.0
    if best is not None and best == gainer:
        true_gain = mean(better[where[s]] - base[where[s]] for s in sel)
    return {
        "crowned": best is not None,
        "crowned_gainer": best is not None and best == gainer,
        "crowned_noop": best is not None and best != gainer,
        "improved": bool(h.improved),
        "improved_gainer": bool(h.improved) and best == gainer,
        "rule": "switched" if h.acceptance_rule_switched_at is not None else str(h.acceptance_rule),
        "calls": calls,
        "comparisons": sum(1 for t in h.trials if t.candidate_id != h.baseline_candidate_id),
        "true_gain": true_gain,
    }


def fixed_design_calls(row: Row, seed: int) -> float:
    """Calls per job of the fixed design with the same error rates (see the module docstring),
    on the row's selection samples, averaged over a few drawn jobs."""
    spec = spec_of(row)
    sel = list(spec.validation_ids() or spec.trial_ids())
    a = spec.acceptance
    totals = []
    for j in range(20):
        rates = [pass_probability(SHAPES[row.shape], f"fixed-{seed}-{j}", sid) for sid in sel]
        per_k = [
            fixed_runs(
                GateSpec(mode="paired", alpha=min(0.49, alpha_at(a.alpha, k)), beta=a.beta, margin=EFFECT),
                rates,
            )
            for k in range(1, row.variants + 1)
        ]
        totals.append(len(sel) * (max(per_k) + sum(per_k)))
    return float(mean(totals))


def study(row: Row, jobs: int, seed: int, pool: Any) -> dict[str, Any]:
    started = time.monotonic()
    got = pool.map(run_job, [(row, seed, i) for i in range(jobs)], chunksize=4)
    rules: dict[str, int] = {}
    for g in got:
        rules[g["rule"]] = rules.get(g["rule"], 0) + 1
    calls = mean(g["calls"] for g in got)
    fixed = fixed_design_calls(row, seed)
    return {
        **asdict(row),
        "jobs": jobs,
        "false_crown": mean(g["crowned_noop"] for g in got),
        "false_improved": mean(g["improved"] and not g["improved_gainer"] for g in got)
        if row.splits
        else None,
        "power": mean(g["crowned_gainer"] for g in got) if row.gain else None,
        "power_improved": mean(g["improved_gainer"] for g in got) if row.gain and row.splits else None,
        "rules": rules,
        "mean_calls": calls,
        "fixed_calls": fixed,
        "ratio": calls / fixed if fixed else None,
        "comparisons": mean(g["comparisons"] for g in got),
        "seconds": round(time.monotonic() - started, 1),
    }


def deterministic_examples() -> list[dict[str, Any]]:
    """The shipped optimize examples on the deterministic simulated model: auto vs none."""
    from optiflow.core.checks import run_check
    from optiflow.core.optimize.document import history_document
    from optiflow.core.optimize.replay import replay
    from optiflow.core.overrides import PromptOverrides
    from optiflow.core.step import RewriteReply, RewriteRequest
    from optiflow.files import load_dataset, load_prompt, read_yaml
    from optiflow.llm.compress import clean_output
    from optiflow.llm.rewrite import rewrite_messages
    from optiflow.llm.simulated import SimulatedModel

    sim = SimulatedModel()
    root = Path(__file__).resolve().parents[1] / "examples"
    rows = []
    for name in ("weak-helpdesk", "agent-policy"):
        folder = root / name
        data = dict(read_yaml(folder / "job.yaml"))
        data["prompt"] = load_prompt(folder / data["prompt"])
        data["dataset"] = load_dataset(folder / data["dataset"])
        outcome: dict[str, Any] = {"example": name}
        for rule in ("auto", "none"):
            spec = OptimizeSpec.model_validate(
                {**data, "acceptance": {**(data.get("acceptance") or {}), "test": rule}}
            )

            def evaluate(step: Step, spec: OptimizeSpec = spec) -> list[EvalResult]:
                out = []
                for target in step.targets:
                    ov = PromptOverrides(
                        ns=spec.prompt.ns,
                        key=spec.prompt.key,
                        tag=target.experiment.overrides_tag,
                        sections=target.overrides,
                        model_params=target.model_params,
                    )
                    model = spec.model.with_params(target.model_params)
                    for run in target.run_indices:
                        for sid in target.sample_ids:
                            sample = spec.dataset.by_id(sid)
                            rendered = spec.prompt.render(sample.input, overrides=ov)
                            reply = sim.reply(
                                rendered.messages(),
                                dict(model.params),
                                {"sample_id": sid, "run": run},
                                sleep=False,
                            )
                            score = run_check(spec.check, reply.text, sample.expected, input=sample.input)
                            out.append(
                                EvalResult(
                                    experiment_id=target.experiment.id,
                                    sample_id=sid,
                                    run=run,
                                    passed=score.passed,
                                    score=score.value,
                                    prompt_tokens=reply.prompt_tokens,
                                    completion_tokens=reply.completion_tokens,
                                )
                            )
                return out

            def answer(step: Step) -> tuple[RewriteReply, ...]:
                replies = []
                for req in step.rewrites:
                    assert isinstance(req, RewriteRequest)
                    reply = sim.reply(rewrite_messages(req), dict(req.model.params), {}, sleep=False)
                    replies.append(RewriteReply(id=req.id, text=clean_output(reply.text)))
                return tuple(replies)

            h, calls = drive(spec, evaluate, f"det-{name}-{rule}", answer)
            outcome[rule] = {
                "rule_used": h.acceptance_rule,
                "best": h.best_candidate_id,
                "new_best": [it.new_best for it in h.iterations],
                "score": [h.baseline_score, h.best_score],
                "calls": calls,
            }
            if rule == "auto":
                outcome["replay"] = replay(history_document(h)).lines()[0]
        outcome["same_decisions"] = (
            outcome["auto"]["best"] == outcome["none"]["best"]
            and outcome["auto"]["new_best"] == outcome["none"]["new_best"]
        )
        rows.append(outcome)
    return rows


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def verdict(r: dict[str, Any]) -> str:
    ok = r["false_crown"] <= 0.05 and (r["false_improved"] is None or r["false_improved"] <= 0.05)
    if r["gain"] == 0.10 and not r["splits"] and r["power"] is not None:
        ok = ok and r["power"] >= 0.90
    return "yes" if ok else "**NO**"


def write(out: Path, rows: list[dict[str, Any]], det: list[dict[str, Any]], args: Any) -> None:
    lines = [
        "# Optimize under noise: every shape, `acceptance: auto`",
        "",
        f"Generated by `make bench-optimize-noise` ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
        f"python {platform.python_version()}, seed {args.seed}, {args.workers} worker processes). "
        "The pure optimize workflow is driven in process (the reproduction step, the race and the "
        "held-out paired test included); outcomes come from `optiflow.llm.noise` (the simulated provider's "
        "noise mode). Settings: `acceptance: auto`, alpha 0.05 job-wide, beta 0.05, effect 0.10, min_gain 0, "
        "first_runs 2, round_runs 2, max_runs 32, `eval_runs: 1`; 3 candidates per iteration (2 with 2 variants).",
        "",
        "Shapes (`sim_pass_dist`): " + ", ".join(f"{k} `{v}`" for k, v in SHAPES.items()) + ". "
        "Splits: train / val / test thirds (selection on val, the held-out paired test on test).",
        "",
        'Targets: false crown <= 5% and false "improved" <= alpha (5%) in every row; power for +10 >= 90% '
        "without splits. *false crown*: a candidate with no gain (every no-op candidate: true gain 0.0 on every "
        'sample) ended as the best; *false improved*: such a best reported "improved" on held-out data; '
        "*power*: the gaining candidate ended as the best (with splits: *confirmed*, and reported improved). "
        "*rules*: how `auto` decided (none = the deterministic rule throughout, every crowning reproduced; "
        "switched = a reproduction flipped and the job went on under paired; paired = chosen at the baseline). "
        "*ratio*: mean calls / the fixed design's (see the bench's docstring).",
        "",
        "| row | shape | samples | variants | splits | optimizer | gain | jobs | false crown | false improved | "
        "power | confirmed | rules (none/switched/paired) | comparisons/job | calls/job | fixed-design ratio | meets targets | s |",
        "| --- | --- | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | ---: |",
    ]
    for r in rows:
        rules = r["rules"]
        mix = "/".join(str(rules.get(k, 0)) for k in ("none", "switched", "paired"))
        gain = f"+{100 * r['gain']:.0f}" if r["gain"] else "0"
        lines.append(
            f"| {r['label']} | {r['shape']} | {r['n']} | {r['variants']} | {'yes' if r['splits'] else 'no'} | "
            f"{r['optimizer']} | {gain} | {r['jobs']} | {pct(r['false_crown'])} | {pct(r['false_improved'])} | "
            f"{pct(r['power'])} | {pct(r['power_improved'])} | {mix} | {r['comparisons']:.1f} | {r['mean_calls']:.0f} | "
            f"{r['ratio']:.2f}x | {verdict(r)} | {r['seconds']} |"
        )
    failing = [r for r in rows if verdict(r) != "yes"]
    noop = [r for r in rows if not r["gain"]]
    lines += [
        "",
        f"**{len(rows) - len(failing)} of {len(rows)} rows meet their targets.** Over the no-op rows: "
        f"{sum(r['false_crown'] * r['jobs'] for r in noop) / max(1, sum(r['jobs'] for r in noop)):.1%} of "
        f"{sum(r['jobs'] for r in noop)} jobs crowned a no-op; the worst row {max((r['false_crown'] for r in noop), default=0.0):.1%}.",
    ]
    if failing:
        lines.append("")
        lines.append(
            "Rows that miss a target: "
            + "; ".join(
                f"{r['label']} {r['shape']} n={r['n']} v={r['variants']} "
                f"{'splits ' if r['splits'] else ''}{r['optimizer']} gain {r['gain']}"
                for r in failing
            )
            + "."
        )
    lines += ["", "## Deterministic model: decides as today, and what the reproduction costs", ""]
    lines += [
        "| example | rule used under auto | best (auto / none) | same decisions | calls (auto / none) | extra calls under auto | replay of auto's history |",
        "| --- | --- | --- | --- | ---: | ---: | --- |",
    ]
    for d in det:
        lines.append(
            f"| {d['example']} | {d['auto']['rule_used']} | {d['auto']['best']} / {d['none']['best']} | "
            f"{'yes' if d['same_decisions'] else 'NO'} | {d['auto']['calls']} / {d['none']['calls']} | "
            f"{d['auto']['calls'] - d['none']['calls']} | {d.get('replay', '')} |"
        )
    lines += [
        "",
        "Under `auto` the baseline gets a second run on the selection samples (how it sees the model "
        "deterministic) and every crowning one more run of the contender and the best on the selection "
        "samples (the reproduction); `none` pays neither. Both confirm on held-out data with the paired test.",
    ]
    out.write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps({"rows": rows, "deterministic": det}, indent=2) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("bench/optimize_noise.md"))
    ap.add_argument("--jobs", type=int, default=120, help="jobs per no-op row")
    ap.add_argument("--power-jobs", type=int, default=80, help="jobs per power row")
    ap.add_argument("--issue-jobs", type=int, default=300, help="jobs per row of the issue's configurations")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default="", help="run only rows whose label/shape contain this text")
    ap.add_argument("--no-examples", action="store_true")
    ap.add_argument("--render", action="store_true", help="only re-render the .md from the .json")
    args = ap.parse_args(argv)
    if args.render:
        saved = json.loads(args.out.with_suffix(".json").read_text())
        write(args.out, saved["rows"], saved["deterministic"], args)
        return 0
    results = []
    with Pool(args.workers) as pool:
        for row in rows_of():
            if args.only and args.only not in f"{row.label} {row.shape} {row.optimizer}":
                continue
            jobs = (
                args.issue_jobs
                if row.label.startswith("issue")
                else args.power_jobs
                if row.gain
                else args.jobs
            )
            r = study(row, jobs, args.seed, pool)
            print(json.dumps(r), file=sys.stderr, flush=True)
            results.append(r)
            write(args.out, results, [], args)  # what is done so far, should the run be stopped
    det = [] if args.no_examples else deterministic_examples()
    write(args.out, results, det, args)
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
