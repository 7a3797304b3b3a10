"""``make bench-drift``: does the nightly drift check tell drift from noise, night after night?

Simulated years of nightly measures on the simulated model's noise mode: every year draws its own
per-sample pass probabilities from a ``sim_pass_dist`` shape and its own reference (``r0`` runs per
sample, drawn like every night: the reference is one random draw, redrawn each year), then
nights of ``r`` runs. Each run is an independent draw with its sample's probability, as the
simulated provider draws it (:mod:`optiflow.llm.noise`); the counts are drawn in numpy and the
detector is :mod:`bench.drift_sim`'s numpy copy of :func:`optiflow.core.drift.detector.evidence`,
checked against the core function on every configuration (the check is in the results).

- **No change** for 365 nights: the share of years with any false alarm, with its Clopper-Pearson
  95% interval.
- **A drop** on night ``tau`` (1: the first night after the reference; 30; 200) of 5, 10 or 20
  points, ``removal`` (the drop falls on samples that then fail outright, as a removed instruction
  does on the simulator; core's ``drop_rates``) or ``proportional`` (every sample loses the same
  share of its rate): nights until the drop is shown (1 = on the night of the drop), median and
  90th percentile, and the share of years within 3 nights; at most 60 nights are watched.
- Beside it, three rules a user could write instead: a fixed **floor** on tonight's Wilson lower
  bound (the reference's pass rate minus the margin), a **per-night test** against the reference at
  5% (tonight's paired interval of :mod:`optiflow.core.drift.estimate` entirely below no change), and
  the gate's **paired e-process multiplied night after night** against the one reference (what the
  issue's words suggest, and why it cannot be used).
- One **end-to-end** run through the real simulated model (the embedded worker, litellm, the
  simulated provider): a reference, nights with nothing changed, then the provider dropping
  samples; its per-sample outcomes are compared with the same outcomes drawn in process, and its
  recorded decisions with the core's.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import beta as beta_dist

from bench.drift_sim import (
    Years,
    detector_log_e,
    draw_rates,
    dropped,
    oracle_power,
    threshold,
    versus,
    wilson_lower,
)
from optiflow.core.drift.detector import Tally, evidence
from optiflow.core.gate.eprocess import Block, bets, reject_path
from optiflow.core.optimize.selection import alpha_at

SHAPES = {
    "U-shaped": "beta(0.3,0.3)",
    "uniform": "beta(1,1)",
    "beta(3.3,3.3)": "beta(3.3,3.3)",
    "mostly deterministic": "0.8*fixed(1) + 0.2*beta(3.3,3.3)",
}
MARGIN, ALPHA, RUNS = 0.10, 0.05, 3
HORIZON = 120
RULES = ("detector", "floor", "per-night 5%", "gate e-process x nights")


@dataclass
class Scenario:
    shape: str
    n: int
    r0: int
    years: int
    tau: int | None = None  # None: no change for 365 nights
    drop: float = 0.0
    model: str = "removal"

    @property
    def label(self) -> str:
        what = "no change" if self.tau is None else f"{self.drop:.0%} {self.model} on night {self.tau}"
        return f"{self.shape}, {self.n} x {RUNS} (reference {self.r0}), {what}"


def clopper_pearson(k: int, n: int, conf: float = 0.95) -> tuple[float, float]:
    a = (1 - conf) / 2
    lo = 0.0 if k == 0 else float(beta_dist.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta_dist.ppf(1 - a, k + 1, n - k))
    return lo, hi


def _gate_crossings(ref_runs: np.ndarray, blocks: list[tuple[np.ndarray, np.ndarray]], n: int) -> np.ndarray:
    """First night each year's gate reject e-process (every night's pairs multiplied) reaches
    1/alpha; -1 if never. Run by the core's own functions, year by year."""
    per_night = RUNS if ref_runs.shape[-1] >= RUNS else ref_runs.shape[-1]
    years = ref_runs.shape[0]
    out = np.full(years, -1)
    top = math.log(1 / ALPHA)
    for y in range(years):
        seq = []
        for plus, minus in blocks:
            for j in range(per_night):
                seq.append(Block(int(plus[y, j]), n - int(plus[y, j]) - int(minus[y, j]), int(minus[y, j])))
        path = reject_path(seq, bets(seq, MARGIN, n))
        hit = next((i for i, w in enumerate(path) if w >= top), None)
        if hit is not None:
            out[y] = hit // per_night + 1
    return out


def run(sc: Scenario, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    p = draw_rates(SHAPES[sc.shape], sc.years, sc.n, rng)
    q = dropped(p, sc.drop, sc.model) if sc.tau is not None else p
    ys = Years.start(p, sc.r0, RUNS, rng, keep_runs=True)
    ref_rate = ys.ref.sum(-1) / (sc.n * sc.r0)
    first = sc.tau or 1
    last = 365 if sc.tau is None else sc.tau + HORIZON - 1
    alarm = {rule: np.full(sc.years, -1) for rule in RULES}
    blocks: list[tuple[np.ndarray, np.ndarray]] = []
    covered = checked = 0
    true_change = (q.mean(-1) - p.mean(-1))[:, None]
    for k in range(1, last + 1):
        rates = q if sc.tau is not None and k >= sc.tau else p
        runs = rng.random((sc.years, sc.n, RUNS)) < rates[..., None]
        passes = runs.sum(-1)
        ys.cum.append(ys.cum[-1] + passes)
        paired = min(RUNS, sc.r0)
        assert ys.ref_runs is not None
        a, b = ys.ref_runs[:, :, :paired], runs[:, :, :paired]
        blocks.append(((a & ~b).sum(1), (~a & b).sum(1)))
        if k < first:
            continue
        new = {
            "detector": detector_log_e(ys, MARGIN) >= threshold(ALPHA, k),
            "floor": wilson_lower(passes.sum(-1), sc.n * RUNS) < ref_rate - MARGIN,
        }
        _, _low, high = versus(ys.ref, sc.r0, passes, RUNS, z=1.6448536269514722)
        new["per-night 5%"] = high < 0
        _, low95, high95 = versus(ys.ref, sc.r0, passes, RUNS, z=1.959963984540054)
        truth = true_change[:, 0] if sc.tau is not None and k >= sc.tau else 0.0
        covered += int(((low95 <= truth) & (truth <= high95)).sum())
        checked += sc.years
        for rule, hit in new.items():
            alarm[rule][(alarm[rule] < 0) & hit] = k
        if sc.tau is not None and all((alarm[r] >= 0).all() for r in ("detector", "floor", "per-night 5%")):
            break
    gate = _gate_crossings(ys.ref_runs, blocks, sc.n)
    alarm["gate e-process x nights"] = np.where(gate >= first, gate, np.where(gate > 0, -2, -1))
    return {"alarm": alarm, "coverage": covered / max(1, checked), "p": p, "ys": ys, "q": q}


def summarize(sc: Scenario, res: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"scenario": sc.__dict__, "label": sc.label, "coverage": res["coverage"]}
    for rule, nights in res["alarm"].items():
        if sc.tau is None:
            k = int((nights != -1).sum())
            lo, hi = clopper_pearson(k, sc.years)
            out[rule] = {"false_alarm": k / sc.years, "ci": [lo, hi], "years": sc.years, "alarms": k}
            continue
        delay = np.where(nights > 0, nights - sc.tau + 1, HORIZON + 1).astype(float)
        early = int((nights == -2).sum()) if rule == "gate e-process x nights" else 0
        out[rule] = {
            "within_3": float((delay <= 3).mean()),
            "median": float(np.median(delay)),
            "p90": float(np.percentile(delay, 90, method="inverted_cdf")),
            "undetected": float((delay > HORIZON).mean()),
            "alarmed_before": early / sc.years,
            "years": sc.years,
        }
    return out


def differential(sc: Scenario, res: dict[str, Any], years: int = 2) -> float:
    """The numpy detector against the core's ``evidence`` on the first ``years`` years of ``sc``,
    every night simulated: the largest relative difference of the log e-values."""
    ys: Years = res["ys"]
    ids = [f"s{i}" for i in range(sc.n)]
    worst = 0.0
    nights_to_check = range(max(1, ys.k - 8), ys.k + 1)
    for y in range(min(years, sc.years)):
        ref = Tally(passes=tuple(int(v) for v in ys.ref[y]), runs=(sc.r0,) * sc.n)
        tallies = [
            Tally(passes=tuple(int(v) for v in (ys.cum[k][y] - ys.cum[k - 1][y])), runs=(RUNS,) * sc.n)
            for k in range(1, ys.k + 1)
        ]
        for k in nights_to_check:
            core = evidence(ref, tallies[:k], ids=ids, margin=MARGIN, alpha=ALPHA).log_drop
            cut = Years(r0=ys.r0, r=ys.r, ref=ys.ref[y : y + 1], cum=[c[y : y + 1] for c in ys.cum[: k + 1]])
            mine = float(detector_log_e(cut, MARGIN)[0])
            worst = max(worst, abs(core - mine) / max(1.0, abs(core)))
    return worst


def grid(years: int, null_years: int, quick: bool) -> list[Scenario]:
    """The scenarios: no change and drops at 48 x 3 with the apply's 12-run reference on every
    shape; the 3-run reference (a nightly measure that became the reference) at 48; 20 and 150
    samples."""
    out: list[Scenario] = []
    shapes = list(SHAPES)
    for shape in shapes:
        out.append(Scenario(shape, 48, 12, null_years))
        out.append(Scenario(shape, 48, 3, null_years))
        for n in (20, 150):
            out.append(Scenario(shape, n, 12, null_years // 2))
    drops = (0.05, 0.10, 0.20)
    for shape in shapes:
        for model in ("removal", "proportional"):
            for tau in (1, 30, 200):
                for drop in drops:
                    out.append(Scenario(shape, 48, 12, years, tau, drop, model))
                out.append(Scenario(shape, 48, 3, years, tau, 0.10, model))
            for n in (20, 150):
                out.append(Scenario(shape, n, 12, years, 30, 0.10, model))
    if quick:
        out = [
            s for s in out if s.shape == "beta(3.3,3.3)" and s.n == 48 and s.r0 == 12 and s.tau in (None, 30)
        ]
    return out


def oracle_rows(seed: int) -> list[dict[str, Any]]:
    """The Neyman-Pearson oracle's power after 3 nights of a 10-point drop, at 5% and at the levels
    this spending gives the nights 3, 32 and 202 (``bench.drift_sim.oracle_power``)."""
    rng = np.random.default_rng(seed)
    levels = {
        "single test at 5%": 0.05,
        "alpha_3 (drop on night 1)": alpha_at(ALPHA, 3),
        "alpha_32 (night 30)": alpha_at(ALPHA, 32),
        "alpha_202 (night 200)": alpha_at(ALPHA, 202),
    }
    out = []
    for shape, dist in SHAPES.items():
        for model in ("removal", "proportional"):
            power = oracle_power(
                dist, 0.10, model, n=48, runs=RUNS, nights=3, years=1000, levels=levels, rng=rng
            )
            out.append({"shape": shape, "model": model, "power": power})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="bench/drift_results.md")
    parser.add_argument("--years", type=int, default=500, help="simulated years per drop scenario")
    parser.add_argument(
        "--null-years", type=int, default=1000, help="simulated no-change years at 48 samples"
    )
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="beta(3.3,3.3), 48 samples, a few scenarios")
    parser.add_argument("--e2e-quiet", type=int, default=15, help="end-to-end: nights with nothing changed")
    parser.add_argument("--e2e-drop", type=int, default=10, help="end-to-end: nights after the drop, at most")
    parser.add_argument("--no-e2e", action="store_true")
    parser.add_argument("--render", action="store_true", help="only write the .md again from the .json")
    parser.add_argument(
        "--oracle", action="store_true", help="only compute the oracle table again (into the .json)"
    )
    args = parser.parse_args()
    if args.render or args.oracle:
        from bench.drift_report import render

        out = Path(args.out)
        results = json.loads(out.with_suffix(".json").read_text())
        if args.oracle:
            results["oracle"] = oracle_rows(args.seed)
            results["notes"]["oracle_argv"] = sys.argv[1:]
            out.with_suffix(".json").write_text(json.dumps(results, indent=1, default=float) + "\n")
        out.write_text(render(results))
        print(f"wrote {out}")
        return
    started = time.monotonic()
    rows = []
    worst = 0.0
    for i, sc in enumerate(grid(args.years, args.null_years, args.quick)):
        t0 = time.monotonic()
        res = run(sc, args.seed * 1000 + i)
        row = summarize(sc, res)
        row["differential"] = differential(sc, res)
        worst = max(worst, row["differential"])
        row["seconds"] = round(time.monotonic() - t0, 1)
        rows.append(row)
        det = row["detector"]
        shown = (
            f"false alarm {det['false_alarm']:.2%}"
            if sc.tau is None
            else f"within 3 {det['within_3']:.1%}, median {det['median']:g}, p90 {det['p90']:g}"
        )
        print(f"{sc.label}: {shown} ({row['seconds']} s, core diff {row['differential']:.1e})", flush=True)
    oracle = oracle_rows(args.seed)
    e2e = None
    if not args.no_e2e:
        from bench import drift_e2e

        e2e = drift_e2e.run(args.e2e_quiet, args.e2e_drop)
        print(
            f"end to end: shown on night {e2e['shown_on_night']} (drop from night {e2e['quiet_nights'] + 1}); "
            f"same outcomes {e2e['same_outcomes']}, same decisions {e2e['same_decisions']}, {e2e['seconds']} s",
            flush=True,
        )
    results = {
        "notes": {
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": f"{platform.machine()}, Python {platform.python_version()}",
            "bench_s": round(time.monotonic() - started, 1),
            "argv": sys.argv[1:],
            "margin": MARGIN,
            "alpha": ALPHA,
            "runs": RUNS,
            "horizon": HORIZON,
            "shapes": SHAPES,
            "differential_max": worst,
        },
        "rows": rows,
        "oracle": oracle,
        "e2e": e2e,
    }
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(results, indent=1, default=float) + "\n")
    from bench.drift_report import render

    out.write_text(render(results))
    print(f"wrote {out} and {out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
