"""``make bench-budget``: what a job's hard budget costs the evaluation hot path, and what running
out of it overspends.

The example's compress job (``make bench``'s, at 0 ms: where per-evaluation overhead shows most)
on Redis with one and with two eval worker processes (threads, 32 each) and a control worker:

- runs alternating (so both see the same machine) without a budget and with ``max_cost_usd`` far
  above the job's cost: every evaluation then also reads the job's spend in its cache lookup (two
  more keys) and adds its cost in its record (the same round trip: one script instead of a
  pipeline);
- then the job with a budget of half its cost: where it stopped, what it spent and overspent,
  and how many calls were in flight when it ran out (at most the fleet's eval threads);
- the hot path alone, free of the job's noise: one evaluation's ``scratch.lookup`` +
  ``scratch.record`` on Redis, without and with a budget, in alternating blocks.

It writes ``bench/budget_results.md`` (and ``.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis

from bench.compress import CONCURRENCY, bench_env, job_spec
from optiflow.core.budget import Charge, JobBudget
from optiflow.core.compress.report import OptimizationReport
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.evaluation import EvalResult
from optiflow.distributed.scratch import RedisJobScratch
from optiflow.interfaces.client import Client
from optiflow.settings import Settings
from tests.support.workers import ROOT, running_workers

NEVER_REACHED_USD = 1000.0


@dataclass
class Pair:
    eval_workers: int
    evaluations: int
    model_calls: int
    plain: list[float] = field(default_factory=list)
    budget: list[float] = field(default_factory=list)

    def evals_per_s(self, walls: list[float]) -> float:
        return self.evaluations / min(walls)


@dataclass
class Cut:
    eval_workers: int
    threads: int
    max_cost_usd: float
    full_cost_usd: float
    wall_s: float
    spent_usd: float
    overspend_usd: float
    over_calls: int
    skipped_calls: int
    steps: int
    step: str | None
    accepted: int
    undecided: int


def run_job(client: Client, spec: CompressSpec) -> tuple[float, OptimizationReport]:
    started = time.perf_counter()
    report = client.submit(spec).wait(timeout=900).raise_for_error().report
    assert isinstance(report, OptimizationReport)
    return time.perf_counter() - started, report


def with_budget(spec: CompressSpec, usd: float) -> CompressSpec:
    return spec.model_copy(update={"max_cost_usd": usd})


def measure(env: dict[str, str], logdir: Path, workers: int, repeat: int) -> tuple[Pair, Cut]:
    os.environ.update({k: env[k] for k in ("OPTIFLOW_REDIS_URL", "OPTIFLOW_KEY_PREFIX")})
    spec = job_spec(0)
    settings = Settings(
        redis_url=env["OPTIFLOW_REDIS_URL"],
        key_prefix=env["OPTIFLOW_KEY_PREFIX"],
        home=Path(env["OPTIFLOW_HOME"]),
        database_url=env["OPTIFLOW_DATABASE_URL"],
    )
    with (
        running_workers(env, logdir, eval_workers=workers, eval_concurrency=CONCURRENCY),
        Client(settings, embedded=False) as client,
    ):
        run_job(client, spec)  # warm-up: first connections, imports
        pair: Pair | None = None
        full_cost = 0.0
        for i in range(repeat):
            order = [False, True] if i % 2 == 0 else [True, False]
            for budgeted in order:
                wall, report = run_job(client, with_budget(spec, NEVER_REACHED_USD) if budgeted else spec)
                if pair is None:
                    pair = Pair(workers, report.stats.evaluations, report.stats.model_calls)
                (pair.budget if budgeted else pair.plain).append(wall)
                if budgeted:
                    assert report.budget is not None and not report.budget.exhausted
                    full_cost = report.budget.spent_usd
        half = round(full_cost / 2, 4)
        wall, report = run_job(client, with_budget(spec, half))
    assert pair is not None and report.budget is not None and report.budget.exhausted
    b = report.budget
    cut = Cut(
        eval_workers=workers,
        threads=workers * CONCURRENCY,
        max_cost_usd=half,
        full_cost_usd=full_cost,
        wall_s=wall,
        spent_usd=b.spent_usd,
        overspend_usd=b.overspend_usd,
        over_calls=b.over_calls,
        skipped_calls=b.skipped_calls,
        steps=report.stats.steps,
        step=b.step,
        accepted=len(report.modifications),
        undecided=sum(1 for r in report.rejected if r.reason.startswith("undecided")),
    )
    return pair, cut


def hot_path(env: dict[str, str], blocks: int = 20, per_block: int = 500) -> dict[str, list[float]]:
    """Microseconds per evaluation's lookup + record (one round trip each), per block: without a
    budget, with one (two more keys read; the record and the charge in one script)."""
    client = redis.Redis.from_url(env["OPTIFLOW_REDIS_URL"])
    scratch = RedisJobScratch(client, env["OPTIFLOW_KEY_PREFIX"])
    result = EvalResult(experiment_id="e", sample_id="s", run=0, passed=True, cost=0.001, prompt_tokens=900)
    budget = JobBudget(max_cost_usd=NEVER_REACHED_USD)
    out: dict[str, list[float]] = {"without": [], "with": []}
    for block in range(blocks):
        for budgeted in (False, True) if block % 2 == 0 else (True, False):
            job = f"hot-{block}-{budgeted}"
            started = time.perf_counter()
            for i in range(per_block):
                key = f"k{i}"
                scratch.lookup(job, "e", key, budget if budgeted else None)
                charge = Charge(cost_usd=0.001, tokens=900) if budgeted else None
                scratch.record(
                    job, "e", key, result, False, charge=charge, budget=budget if budgeted else None
                )
            out["with" if budgeted else "without"].append((time.perf_counter() - started) / per_block * 1e6)
    client.close()
    return out


def write(
    pairs: list[Pair], cuts: list[Cut], hot: dict[str, list[float]], out: Path, notes: dict[str, Any]
) -> None:
    lines = [
        "# The hard budget's cost on the hot path, and its overspend",
        "",
        f"Measured {notes['date']} on {notes['machine']} by `make bench-budget` (`python -m bench.budget`);",
        f"load average {notes['load'][0]:.2f} before, {notes['load'][1]:.2f} after (the 1-minute figure).",
        "Job: `make bench`'s (`examples/support-bot` compress, 44 samples, eval_runs 3, fail-fast on, cache",
        f"cold every run), model `optiflow/sim` at 0 ms, on Redis; eval workers `-P threads -c {CONCURRENCY}`.",
        f"Runs alternate without a budget and with `max_cost_usd: {NEVER_REACHED_USD:g}` (never reached: every",
        "evaluation checks and charges the spend), after one warm-up run; wall time best and median of",
        f"{notes['repeat']} each.",
        "",
        "| eval workers | evaluations | without budget: best / median s | evals/s | with budget: best / median s"
        " | evals/s | cost (best) | runs without | runs with |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in pairs:
        cost = min(p.budget) / min(p.plain) - 1
        lines.append(
            f"| {p.eval_workers} | {p.evaluations} | {min(p.plain):.2f} / {statistics.median(p.plain):.2f} | "
            f"{p.evals_per_s(p.plain):.0f} | {min(p.budget):.2f} / {statistics.median(p.budget):.2f} | "
            f"{p.evals_per_s(p.budget):.0f} | {cost:+.1%} | {', '.join(f'{w:.2f}' for w in p.plain)} | "
            f"{', '.join(f'{w:.2f}' for w in p.budget)} |"
        )
    lines += [
        "",
        "## Running out: a budget of half the job's cost",
        "",
        "Over calls: the call that reached the budget and those in flight then, charged past it; bounded by",
        "the fleet's eval threads.",
        "",
        "| eval workers | eval threads | full cost $ | budget $ | spent $ | overspend $ | over calls | calls skipped"
        " | ran out at | accepted | undecided | wall s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in cuts:
        lines.append(
            f"| {c.eval_workers} | {c.threads} | {c.full_cost_usd:.4f} | {c.max_cost_usd:.4f} | {c.spent_usd:.4f} | "
            f"{c.overspend_usd:.4f} | {c.over_calls} | {c.skipped_calls} | {c.step} | {c.accepted} | "
            f"{c.undecided} | {c.wall_s:.2f} |"
        )
    without, with_ = statistics.median(hot["without"]), statistics.median(hot["with"])
    lines += [
        "",
        "## The hot path alone",
        "",
        f"One evaluation's `scratch.lookup` + `scratch.record` on Redis (this process, one thread), "
        f"{len(hot['without'])} alternating blocks of 500 each way; median of the blocks' means:",
        "",
        "| | µs per evaluation | blocks (µs) |",
        "| --- | --- | --- |",
        f"| without a budget | {without:.0f} | {', '.join(f'{v:.0f}' for v in hot['without'])} |",
        f"| with a budget | {with_:.0f} | {', '.join(f'{v:.0f}' for v in hot['with'])} |",
        "",
        f"The budget adds {with_ - without:.0f} µs ({with_ / without - 1:+.0%}) to the two round trips an evaluation"
        " already makes.",
        "",
    ]
    out.write_text("\n".join(lines))
    out.with_suffix(".json").write_text(
        json.dumps(
            {
                "notes": notes,
                "pairs": [asdict(p) for p in pairs],
                "cuts": [asdict(c) for c in cuts],
                "hot_path_us": hot,
            },
            indent=2,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "budget_results.md")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    pairs, cuts = [], []
    with bench_env() as (env, home):
        hot = hot_path(env)
        print(f"hot path: without {hot['without']}\n          with    {hot['with']}", flush=True)
        for workers in (1, 2):
            print(f"{workers} eval worker(s)", flush=True)
            pair, cut = measure(env, home, workers, args.repeat)
            pairs.append(pair)
            cuts.append(cut)
            print(f"  without {pair.plain}\n  with    {pair.budget}\n  cut     {cut}", flush=True)
    notes = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}, {platform.machine()}",
        "repeat": args.repeat,
        "load": (load_before, os.getloadavg()[0]),
    }
    write(pairs, cuts, hot, args.out, notes)
    print(args.out.read_text())


if __name__ == "__main__":
    main()
