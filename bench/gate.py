"""``make bench-gate``: the paired gate's operating curve on a simulated sampled model.

Every decision is a fresh dataset of 48 samples whose pass probabilities are drawn from the
simulated model's noise mode (``sim_pass_dist = beta(3.3,3.3)``, resembling SmolLM2-135M at
temperature 0.7: mean 0.5, 46 of 48 flaky in 9 runs). A candidate with a true drop ``d`` removes the
instruction of a random set of samples whose probabilities sum to ``d * 48`` (those then fail in
every run, as the simulated provider does); a no-op changes the prompt's text only, so its runs are
drawn independently of the baseline's. The gate (``optiflow.core.gate``) is driven round by round
exactly as a workflow drives it: the baseline's first round, :func:`assess`, then :func:`decide`
after every round, running the runs its plan asks for. The outcomes come from the same pure
functions the simulated provider calls (:mod:`optiflow.llm.noise`) instead of through litellm and
Celery (tens of thousands of decisions would take hours that way); the gate cannot tell.

It writes ``bench/gate_results.md`` (and ``.json``) and ``bench/gate_curve.png``: measured
rejection (not accepted) against the true drop, with the gate's own prediction (each decision's
operating curve from its baseline's first round, averaged) and the prediction from the true
probabilities; calls per decision against fixed designs; and ``strict`` against seed 000's rule on
a deterministic model.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from statistics import NormalDist, mean
from typing import Any

from optiflow.core.evaluation import EvalResult, regressions, summarize
from optiflow.core.gate import (
    GateDecision,
    GateSpec,
    Outcomes,
    RunRange,
    assess,
    decide,
    drop_rates,
    first_round,
    fixed_runs,
    predict,
)
from optiflow.llm.noise import SMOLLM2_LIKE, pass_probability, passes

N = 48
SPEC = GateSpec(mode="paired", margin=0.10, alpha=0.05, beta=0.05, first_runs=3, round_runs=1, max_runs=24)
IDS = tuple(f"s{i:02d}" for i in range(N))


@dataclass
class Decision:
    drop: float
    verdict: str
    capped: bool
    pairs: int
    calls: int
    baseline_calls: int
    candidate_calls: int
    rounds: int
    own_prediction: float | None = None
    true_prediction: float | None = None
    own_runs: float | None = None
    fixed: int = 0
    drop_high: float = 0.0
    drop_low: float = 0.0


@dataclass
class Point:
    drop: float
    decisions: int
    rejected: float
    accepted: float
    early_rejected: float
    capped: float
    own_prediction: float
    true_prediction: float
    predicted_n: int
    calls: float
    pairs: float
    rounds: float
    seeds: str
    samples: list[Decision] = field(default_factory=list, repr=False)


def dataset(seed: str) -> list[float]:
    return [pass_probability(SMOLLM2_LIKE, seed, sid) for sid in IDS]


def harmful(p: list[float], drop: float, rng: random.Random) -> list[float]:
    """Remove the instruction of samples whose probabilities sum to ``drop * N`` (within 0.1 of a
    sample's probability-point, i.e. 0.2 points of drop); the rest keep theirs."""
    if drop <= 0:
        return list(p)
    target = drop * N
    for _ in range(1000):
        order = rng.sample(range(N), N)
        chosen: list[int] = []
        total = 0.0
        for i in order:
            if total + p[i] <= target:
                chosen.append(i)
                total += p[i]
        rest = [i for i in range(N) if i not in chosen]
        best = min(rest, key=lambda i: abs(target - total - p[i]), default=None)
        if best is not None and abs(target - total - p[best]) < abs(target - total):
            chosen.append(best)
            total += p[best]
        if target <= total <= target + 0.1:
            q = list(p)
            for i in chosen:
                q[i] = 0.0
            return q
    raise RuntimeError(f"no subset reaches a drop of {drop}")


def run_ranges(
    outcomes: Outcomes, ranges: tuple[RunRange, ...], rates: dict[str, float], seed: str, key: str
) -> Outcomes:
    new: dict[str, str] = {}
    for r in ranges:
        for sid in r.sample_ids:
            seq = outcomes.seq(sid).ljust(r.start, ".")
            seq += "".join(
                "1" if passes(rates[sid], seed, key, sid, run) else "0" for run in range(r.start, r.stop)
            )
            new[sid] = seq
    return outcomes.extend(Outcomes(runs=new))


def one_decision(drop: float, seed: str, *, predict_own: bool, predict_true: bool) -> Decision:
    rng = random.Random(f"{seed}-edit")
    p = dataset(seed)
    q = harmful(p, drop, rng)
    base_rates, cand_rates = dict(zip(IDS, p, strict=True)), dict(zip(IDS, q, strict=True))
    baseline = run_ranges(Outcomes(), first_round(SPEC, IDS).baseline, base_rates, seed, "baseline")
    a = assess(SPEC, baseline, IDS, power=False).require()
    candidate = Outcomes()
    rounds = 0
    while True:
        d: GateDecision = decide(SPEC, a, baseline, candidate)
        if d.decided:
            break
        rounds += 1
        baseline = run_ranges(baseline, d.plan.baseline, base_rates, seed, "baseline")
        candidate = run_ranges(candidate, d.plan.candidate, cand_rates, seed, "candidate")
    true_drop = (sum(p) - sum(q)) / N
    out = Decision(
        drop=true_drop,
        verdict=d.verdict,
        capped=d.capped,
        pairs=d.stats.pairs,
        calls=d.stats.baseline_runs + d.stats.candidate_runs,
        baseline_calls=d.stats.baseline_runs,
        candidate_calls=d.stats.candidate_runs,
        rounds=rounds,
        fixed=fixed_runs(SPEC, p),
        drop_high=d.stats.drop_high,
        drop_low=d.stats.drop_low,
    )
    if predict_own:  # the gate's own statement: from its baseline's first round only
        point = predict(SPEC, a.rates, drop_rates(a.rates, drop))
        out.own_prediction, out.own_runs = point.rejection, point.runs
    if predict_true:
        out.true_prediction = predict(SPEC, p, q).rejection
    return out


def run_point(drop: float, decisions: int, predicted: int, base_seed: int) -> Point:
    rows = []
    for j in range(decisions):
        seed = f"gate-bench-{base_seed}-{drop:.3f}-{j}"
        rows.append(one_decision(drop, seed, predict_own=j < predicted, predict_true=j < predicted))
    own = [r.own_prediction for r in rows if r.own_prediction is not None]
    true = [r.true_prediction for r in rows if r.true_prediction is not None]
    return Point(
        drop=mean(r.drop for r in rows),
        decisions=decisions,
        rejected=sum(r.verdict != "accept" for r in rows) / decisions,
        accepted=sum(r.verdict == "accept" for r in rows) / decisions,
        early_rejected=sum(r.verdict == "reject" and not r.capped for r in rows) / decisions,
        capped=sum(r.capped for r in rows) / decisions,
        own_prediction=mean(own),
        true_prediction=mean(true),
        predicted_n=len(own),
        calls=mean(r.calls for r in rows),
        pairs=mean(r.pairs for r in rows),
        rounds=mean(r.rounds for r in rows),
        seeds=f"gate-bench-{base_seed}-{drop:.3f}-0 .. -{decisions - 1}",
        samples=rows,
    )


def power_statements(count: int, base_seed: int) -> dict[str, Any]:
    """What the gate says of itself after a baseline's first round (``assess`` with power)."""
    rows = []
    for j in range(count):
        seed = f"gate-power-{base_seed}-{j}"
        rates = dict(zip(IDS, dataset(seed), strict=True))
        baseline = run_ranges(Outcomes(), first_round(SPEC, IDS).baseline, rates, seed, "baseline")
        a = assess(SPEC, baseline, IDS)
        rows.append((a.detectable_drop, a.no_op_accept, a.fixed_runs, a.flaky))
    return {
        "count": count,
        "detectable_drop": [min(r[0] for r in rows), mean(r[0] for r in rows), max(r[0] for r in rows)],
        "no_op_accept": mean(r[1] for r in rows),
        "fixed_runs": mean(r[2] for r in rows),
        "flaky": mean(r[3] for r in rows),
    }


# -- fixed designs ------------------------------------------------------------------------------
def fixed_test_errors(r: int, reps: int, base_seed: int) -> tuple[float, float]:
    """Error rates of the normal-theory fixed design with ``r`` runs a side: accept when the paired
    mean difference's one-sided (1 - alpha) upper bound is under the margin."""
    z = NormalDist().inv_cdf(1 - SPEC.alpha)
    rates = []
    for drop in (0.0, SPEC.margin):
        rejected = 0
        for j in range(reps):
            seed = f"gate-fixed-{base_seed}-{drop:.2f}-{j}"
            p = dataset(seed)
            q = harmful(p, drop, random.Random(f"{seed}-edit"))
            diffs = []
            for sid, pi, qi in zip(IDS, p, q, strict=True):
                x = sum(passes(pi, seed, "baseline", sid, k) for k in range(r))
                y = sum(passes(qi, seed, "candidate", sid, k) for k in range(r))
                diffs.append((x - y) / r)
            d = mean(diffs)
            var = (
                sum((pi * (1 - pi) + qi * (1 - qi)) for pi, qi in zip(p, q, strict=True)) / N
            )  # known per-pair variance (the design's best case)
            se = math.sqrt(var / (N * r))
            accepted = d + z * se < SPEC.margin
            rejected += not accepted
        rates.append(rejected / reps)
    return rates[0], 1 - rates[1]  # (false rejection of a no-op, false acceptance at the margin)


def wilson_upper(rate: float, n: int, z: float = 1.96) -> float:
    centre = (rate + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre + half


def runs_for(false_reject: float, false_accept: float, variance: float) -> int:
    z = NormalDist().inv_cdf(1 - false_accept) + NormalDist().inv_cdf(1 - false_reject)
    return math.ceil(z * z * variance / (N * SPEC.margin**2))


# -- strict on a deterministic model -----------------------------------------------------------
def strict_check(cases: int, base_seed: int) -> dict[str, Any]:
    """Deterministic model (each sample passes always or never), every edit removes instructions
    of a random subset, some calls error: the strict gate driven round by round against seed
    000's rule computed from the same runs with ``summarize`` / ``regressions``."""
    spec = GateSpec(mode="strict", first_runs=3, max_error_rate=1.0, min_baseline_pass_rate=0.0)
    same = accepted = auto_strict = 0
    mismatches: list[str] = []
    for j in range(cases):
        rng = random.Random(f"gate-strict-{base_seed}-{j}")
        ok = {sid: rng.random() < 0.75 for sid in IDS}
        share = rng.choice((0.0, 0.02, 0.1, 0.3))
        removed = {sid for sid in IDS if rng.random() < share}
        error_rate = rng.choice((0.0, 0.0, 0.02))

        def results(
            exp: str,
            removed_set: set[str],
            ok: dict[str, bool] = ok,
            rng: random.Random = rng,
            error_rate: float = error_rate,
        ) -> list[EvalResult]:
            out = []
            for sid in IDS:
                for run in range(spec.first_runs):
                    err = rng.random() < error_rate
                    out.append(
                        EvalResult(
                            experiment_id=exp,
                            sample_id=sid,
                            run=run,
                            error="boom" if err else None,
                            passed=not err and ok[sid] and sid not in removed_set,
                        )
                    )
            return out

        base_rs, cand_rs = results("b", set()), results("c", removed)
        seed_regressions = regressions(summarize(base_rs, IDS).consistently_passed, summarize(cand_rs, IDS))
        seed_accepts = len(seed_regressions) == 0
        baseline = Outcomes.from_results(base_rs, IDS)
        a = assess(spec, baseline, IDS)
        if a.failure is not None:
            # seed 000 would accept vacuously; the gate fails the job instead (evidence first)
            same += not any(summarize(base_rs, IDS).consistently_passed)
            continue
        auto = assess(spec.model_copy(update={"mode": "auto"}), baseline, IDS)
        auto_strict += auto.gate == "strict"
        full = Outcomes.from_results(cand_rs, IDS)
        candidate = Outcomes()
        for _ in range(spec.first_runs + 1):
            d = decide(spec, a, baseline, candidate)
            if d.decided:
                break
            want = {sid for r in d.plan.candidate for sid in r.sample_ids}
            candidate = candidate.extend(Outcomes(runs={s: full.seq(s) for s in want}))
        gate_accepts = d.accepted
        if gate_accepts == seed_accepts and (gate_accepts or len(d.stats.regressed) == len(seed_regressions)):
            same += 1
        elif len(mismatches) < 5:
            mismatches.append(
                f"case {j}: gate {d.verdict} {d.stats.regressed}, seed 000 {sorted(seed_regressions)}"
            )
        accepted += gate_accepts
    return {
        "cases": cases,
        "same": same,
        "accepted": accepted,
        "auto_strict": auto_strict,
        "mismatches": mismatches,
    }


# -- output -------------------------------------------------------------------------------------
def plot(points: list[Point], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drops = [100 * p.drop for p in points]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    err = [196 * math.sqrt(max(p.rejected * (1 - p.rejected), 1e-9) / p.decisions) for p in points]
    ax.errorbar(
        drops,
        [100 * p.rejected for p in points],
        yerr=err,
        fmt="o",
        color="black",
        capsize=3,
        label="measured (95% interval)",
    )
    ax.plot(
        drops,
        [100 * p.own_prediction for p in points],
        "-",
        color="tab:blue",
        label="gate's own prediction (from each baseline's first round)",
    )
    ax.plot(
        drops,
        [100 * p.true_prediction for p in points],
        "--",
        color="tab:orange",
        label="prediction from the true probabilities",
    )
    ax.axhline(5, color="grey", lw=0.8, ls=":")
    ax.axhline(95, color="grey", lw=0.8, ls=":")
    ax.axvline(100 * SPEC.margin, color="tab:red", lw=0.8, ls=":", label=f"margin {SPEC.margin:.0%}")
    ax.set_xlabel("true pass-rate drop (points)")
    ax.set_ylabel("rejection probability (%)")
    ax.set_title(f"paired gate, {N} samples, alpha {SPEC.alpha}, beta {SPEC.beta}, max_runs {SPEC.max_runs}")
    ax.set_ylim(-2, 102)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="bench/gate_results.md")
    parser.add_argument("--decisions", type=int, default=1000, help="decisions per drop on the curve")
    parser.add_argument(
        "--predicted", type=int, default=100, help="decisions per drop whose own prediction is computed"
    )
    parser.add_argument("--drops", default="0,0.02,0.04,0.05,0.06,0.08,0.10,0.12,0.15")
    parser.add_argument("--fixed-reps", type=int, default=1000)
    parser.add_argument("--strict-cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit('bench-gate draws bench/gate_curve.png with matplotlib: pip install -e ".[bench]"')
    started = time.monotonic()
    out = Path(args.out)
    points = []
    for drop in (float(x) for x in args.drops.split(",")):
        t0 = time.monotonic()
        point = run_point(drop, args.decisions, args.predicted, args.seed)
        points.append(point)
        print(
            f"drop {100 * point.drop:5.2f}: rejected {point.rejected:6.1%} (own prediction {point.own_prediction:6.1%}, "
            f"true {point.true_prediction:6.1%}), calls {point.calls:6.1f}, pairs {point.pairs:5.2f}, "
            f"{time.monotonic() - t0:.0f} s",
            flush=True,
        )
    by_drop = {round(p.drop, 2): p for p in points}
    noop, harm = by_drop[0.0], by_drop[round(SPEC.margin, 2)]
    mean_fixed = mean(r.fixed for p in (noop, harm) for r in p.samples)
    fixed_r = round(mean_fixed)
    fixed_false_reject, fixed_false_accept = fixed_test_errors(fixed_r, args.fixed_reps, args.seed)
    variance = mean(
        2 * sum(x * (1 - x) for x in dataset(f"gate-bench-{args.seed}-0.000-{j}")) / N for j in range(200)
    )
    # the fixed design with the gate's two error rates: their Wilson 95% upper ends (the cheaper
    # fixed design, so the comparison leans against the gate)
    gate_false_accept = wilson_upper(harm.accepted, harm.decisions)
    gate_false_reject = wilson_upper(noop.rejected, noop.decisions)
    equal_r = runs_for(gate_false_reject, gate_false_accept, variance)
    seq_calls = (noop.calls + harm.calls) / 2
    strict = strict_check(args.strict_cases, args.seed)
    power = power_statements(20, args.seed)
    results = {
        "notes": {
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": f"{platform.machine()}, Python {platform.python_version()}",
            "bench_s": round(time.monotonic() - started, 1),
            "spec": SPEC.model_dump(),
            "samples": N,
            "pass_dist": SMOLLM2_LIKE,
            "argv": sys.argv[1:],
            "seed": args.seed,
        },
        "curve": [{k: v for k, v in asdict(p).items() if k != "samples"} for p in points],
        "fixed": {
            "runs": fixed_r,
            "calls": 2 * N * fixed_r,
            "false_reject": fixed_false_reject,
            "false_accept": fixed_false_accept,
            "equal_error_runs": equal_r,
            "equal_error_calls": 2 * N * equal_r,
            "variance": variance,
            "gate_false_reject_upper": gate_false_reject,
            "gate_false_accept_upper": gate_false_accept,
        },
        "sequential_calls": seq_calls,
        "strict": strict,
        "power": power,
    }
    out.with_suffix(".json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    plot(points, out.parent / "gate_curve.png")
    out.write_text(render(results, points))
    print(f"wrote {out}, {out.with_suffix('.json')} and {out.parent / 'gate_curve.png'}")


def render(res: dict[str, Any], points: list[Point]) -> str:
    n = res["notes"]
    f = res["fixed"]
    by_drop = {round(p.drop, 2): p for p in points}
    noop, harm = by_drop[0.0], by_drop[round(SPEC.margin, 2)]
    seq = res["sequential_calls"]
    worst = max(abs(p.rejected - p.own_prediction) for p in points)
    s = res["strict"]
    lines = [
        "# The paired gate's operating curve (simulated sampled model)",
        "",
        f"Measured {n['date']} on {n['machine']} by `make bench-gate` (`python -m bench.gate`), "
        f"{n['bench_s'] / 60:.1f} minutes. Settings: margin {SPEC.margin}, alpha {SPEC.alpha}, beta {SPEC.beta}, "
        f"first_runs {SPEC.first_runs}, round_runs {SPEC.round_runs}, max_runs {SPEC.max_runs}; {N} samples whose pass "
        f"probabilities are drawn anew for every decision from `{n['pass_dist']}` (the simulated model's noise "
        "mode, resembling SmolLM2-135M at temperature 0.7). A drop of d removes the instruction of random samples "
        "whose probabilities sum to d x 48 (they then always fail); a no-op changes wording only (independent draws).",
        "",
        "The gate is driven round by round as a workflow drives it (first round, `assess`, `decide` after every "
        "round, the runs its plan asks for); the outcomes come from the pure functions the simulated provider "
        "calls (`optiflow.llm.noise`), not through litellm and Celery: thousands of decisions through the "
        "provider would take hours, and the gate sees the same outcomes either way.",
        "",
        "![operating curve](gate_curve.png)",
        "",
        "## Targets",
        "",
        "| target | measured | met |",
        "| --- | --- | --- |",
        f"| false rejection of no-op edits <= 5% ({noop.decisions} decisions) | {noop.rejected:.1%} "
        f"(early reject {noop.early_rejected:.1%}, undecided at the cap {noop.capped:.1%}) | "
        f"{'yes' if noop.rejected <= 0.05 else 'NO'} |",
        f"| rejection of 10-point drops >= 95% ({harm.decisions} decisions) | {harm.rejected:.1%} | "
        f"{'yes' if harm.rejected >= 0.95 else 'NO'} |",
        f"| measured within 3 points of the gate's own prediction at every drop | largest gap {100 * worst:.1f} points | "
        f"{'yes' if worst <= 0.03 else 'NO'} |",
        f"| calls per decision <= 0.6x a fixed design with the same two error rates | "
        f"{seq:.0f} vs {f['equal_error_calls']} = {seq / f['equal_error_calls']:.2f}x (error rates as measured); "
        f"{seq / f['calls']:.2f}x the nominal 5%/5% design ({f['calls']}) | "
        f"{'yes' if seq <= 0.6 * f['equal_error_calls'] else 'NO'}; {'yes' if seq <= 0.6 * f['calls'] else 'NO'} against the nominal design |",
        f"| `strict` decides as seed 000 on a deterministic model | {s['same']} of {s['cases']} cases identical | "
        f"{'yes' if s['same'] == s['cases'] else 'NO'} |",
        "",
        "## The curve",
        "",
        "Rejected = not accepted (rejected early, or undecided at the cap). The gate's own prediction is "
        "`optiflow.core.gate.predict` on the per-sample rates the gate estimates from the baseline's first round "
        "(3 runs), with the drop spread over samples in proportion to their pass rates (it cannot know which samples "
        f"an edit hurts), averaged over the first {points[0].predicted_n} decisions of each drop; 'true' uses the "
        "real probabilities and the real drop pattern. Calls count both sides: the baseline's runs are paid by "
        "each decision here (one candidate per baseline), the most a decision can cost.",
        "",
        "| true drop (points) | decisions | rejected | accepted | early reject | undecided at cap | gate's prediction | "
        "true-rate prediction | calls / decision | pairs / sample | rounds |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for p in points:
        lines.append(
            f"| {100 * p.drop:.2f} | {p.decisions} | {p.rejected:.1%} | {p.accepted:.1%} | {p.early_rejected:.1%} | "
            f"{p.capped:.1%} | {p.own_prediction:.1%} | {p.true_prediction:.1%} | {p.calls:.0f} | {p.pairs:.2f} | "
            f"{p.rounds:.2f} |"
        )
    lines += [
        "",
        "## Calls against fixed designs",
        "",
        f"- Sequential gate: {noop.calls:.0f} calls per no-op decision, {harm.calls:.0f} per 10-point drop; "
        f"mean {seq:.0f} ({seq / (2 * N):.1f} runs a side).",
        f"- Fixed design for the nominal 5% / 5% (normal theory, per-pair variance {f['variance']:.3f}): "
        f"{f['runs']} runs a side = {f['calls']} calls. Simulated with its known variance, it rejected "
        f"{f['false_reject']:.1%} of no-ops and accepted {f['false_accept']:.1%} of 10-point drops: its error "
        "rates are about the nominal ones, and it has no guarantee at 48 samples.",
        f"- The gate's measured error rates are {noop.rejected:.1%} (no-op rejected) and {harm.accepted:.1%} "
        f"(10-point drop accepted): it guarantees alpha and beta at any stopping time, so it lands below them. "
        f"A fixed design with error rates at the upper ends of their 95% intervals ({f['gate_false_reject_upper']:.1%}, "
        f"{f['gate_false_accept_upper']:.1%}) needs {f['equal_error_runs']} runs a side = "
        f"{f['equal_error_calls']} calls: the gate uses {seq / f['equal_error_calls']:.2f}x that.",
        f"- Against the nominal design the gate uses {seq / f['calls']:.2f}x: the price of exact, anytime-valid error "
        "rates is the overshoot of 48-pair blocks past the 1/alpha threshold (a decision can only be taken "
        "after a whole block).",
        "",
        "## The gate's power statement",
        "",
        f"After the baseline's first round (3 runs) on {res['power']['count']} fresh datasets, `assess` states: "
        f"smallest drop told apart from no drop at 5% / 5% within max_runs {SPEC.max_runs}: "
        f"{100 * res['power']['detectable_drop'][1]:.1f} points on average (from {100 * res['power']['detectable_drop'][0]:.1f} "
        f"to {100 * res['power']['detectable_drop'][2]:.1f}); predicted acceptance of a no-op {res['power']['no_op_accept']:.1%}; "
        f"fixed design {res['power']['fixed_runs']:.1f} runs a side; {res['power']['flaky']:.1f} of 48 samples flaky in "
        "3 runs.",
        "",
        "## strict on a deterministic model",
        "",
        f"{s['cases']} cases: every sample passes always or never; each edit removes the instruction of a random "
        "subset (each sample with probability 0, 2%, 10% or 30%, one share per case); calls error at 0% or 2%. The baseline's 3 runs go through `assess` in "
        f"`strict` mode (`auto` picks strict for {s['auto_strict']} of them: the others had a sample with fewer than 2 "
        "answered runs), then `decide` round by round; seed 000's decision is "
        "computed from the same runs with `summarize` / `regressions`. Identical decisions and regression sets: "
        f"**{s['same']} of {s['cases']}** ({s['accepted']} accepted). Baselines where nothing passed every run are "
        "a job failure under the gate (seed 000 would accept every edit), counted identical when seed 000's "
        "baseline had no consistently passing sample.",
        "",
    ]
    if s["mismatches"]:
        lines += ["Mismatches:", "", *[f"- {m}" for m in s["mismatches"]], ""]
    lines += [
        f"Seeds: decision j at drop d draws its dataset and edit from the seed `gate-bench-{n['seed']}-<d>-<j>` "
        f"(fixed design: `gate-fixed-{n['seed']}-<d>-<j>`, strict: `gate-strict-{n['seed']}-<j>`); every decision "
        "is a new dataset. `python -m bench.gate --seed N` draws another set.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
