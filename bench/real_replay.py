"""bench-real's targets 1 and 2 (:mod:`bench.real`): the gate replayed over the recorded runs of
``make record-real`` (``bench/real_runs.json``), no model.

A replay drives the gate's own pure functions exactly as the compress workflow does (the
baseline's first round, ``assess`` once, then ``decide`` after every round and the runs its plan
asks for), reading each run's outcome from the recording instead of calling the model.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import mean
from typing import Any

from bench.record_runs import Recording, effect
from optiflow.core.gate import (
    Assessment,
    GateDecision,
    GateSpec,
    Outcomes,
    RunRange,
    assess,
    decide,
    estimate_rates,
    first_round,
    predict,
)
from optiflow.core.gate.outcomes import MISSING

NOOP_PARTITIONS = 12
"""Partitions of the recorded baseline runs in the no-op study (two decisions each)."""
NOOP_RESAMPLES = 500
"""More partitions, for the rejection rate this recording gives (not a target)."""
HARMFUL_REPLAYS = 12
NOOP_SEED = "bench-real-noop"
RESAMPLE_SEED = "bench-real-noop-resample"
HARMFUL_SEED = "bench-real-harmful"


# -- replaying the gate over recorded runs --------------------------------------------------------
class OutOfRuns(RuntimeError):
    """A replay asked for a run the recording does not hold."""


def take(outcomes: Outcomes, ranges: Sequence[RunRange], source: Mapping[str, str]) -> Outcomes:
    """``outcomes`` with the runs ``ranges`` ask for, read from ``source`` (per sample, the
    recorded outcomes in the order this replay reads them)."""
    new: dict[str, str] = {}
    for r in ranges:
        for sid in r.sample_ids:
            runs = source[sid]
            if r.stop > len(runs):
                raise OutOfRuns(f"{sid}: run {r.stop - 1} asked for, {len(runs)} recorded")
            new[sid] = MISSING * r.start + runs[r.start : r.stop]
    return outcomes.extend(Outcomes(runs=new))


@dataclass
class Replayed:
    assessment: Assessment
    decision: GateDecision
    rounds: int
    baseline: Outcomes
    candidate: Outcomes


def replay(
    gate: GateSpec,
    ids: Sequence[str],
    base_src: Mapping[str, str],
    cand_src: Mapping[str, str],
    *,
    power: bool = False,
) -> Replayed:
    """One decision, driven as the compress workflow drives it: the baseline's first round,
    ``assess`` once, then ``decide`` after every round, running the runs its plan asks for."""
    baseline = take(Outcomes(), first_round(gate, ids).baseline, base_src)
    a = assess(gate, baseline, ids, power=power).require()
    candidate = Outcomes()
    rounds = 0
    while True:
        d = decide(gate, a, baseline, candidate)
        if d.decided:
            return Replayed(a, d, rounds, baseline, candidate)
        rounds += 1
        baseline = take(baseline, d.plan.baseline, base_src)
        candidate = take(candidate, d.plan.candidate, cand_src)


def decision_row(label: str, r: Replayed) -> dict[str, Any]:
    d, s = r.decision, r.decision.stats
    return {
        "label": label,
        "gate": s.gate,
        "verdict": d.verdict,
        "capped": d.capped,
        "reason": d.reason,
        "pairs": s.pairs,
        "rounds": r.rounds,
        "baseline_runs": s.baseline_runs,
        "candidate_runs": s.candidate_runs,
        "runs_per_sample": [
            max(r.baseline.next_run(x) for x in r.assessment.sample_ids),
            max(r.candidate.next_run(x) for x in r.assessment.sample_ids),
        ],
        "baseline_pass_rate": s.baseline_pass_rate,
        "candidate_pass_rate": s.candidate_pass_rate,
        "drop": s.drop,
        "drop_low": s.drop_low,
        "drop_high": s.drop_high,
        "regressed": len(s.regressed),
    }


def shuffled(runs: str, rng: random.Random) -> str:
    return "".join(runs[i] for i in rng.sample(range(len(runs)), len(runs)))


def partitions(runs: Mapping[str, str], count: int, seed: str) -> list[tuple[dict[str, str], dict[str, str]]]:
    """``count`` partitions of every sample's runs into two disjoint groups of half the runs: the
    sample's runs shuffled (seeded by ``seed`` and the partition), the first half and the rest."""
    out = []
    for k in range(count):
        rng = random.Random(f"{seed}-{k}")
        a: dict[str, str] = {}
        b: dict[str, str] = {}
        for sid in sorted(runs):
            seq = shuffled(runs[sid], rng)
            half = len(seq) // 2
            a[sid], b[sid] = seq[:half], seq[half : 2 * half]
        out.append((a, b))
    return out


def backwards(group: Mapping[str, str]) -> dict[str, str]:
    return {sid: runs[::-1] for sid, runs in group.items()}


def gate_line(g: GateSpec) -> str:
    return (
        f"mode {g.mode}, margin {g.margin:.2f}, alpha {g.alpha:.2f}, beta {g.beta:.2f}, first round "
        f"{g.first_runs} runs, +{g.round_runs} per round, max_runs {g.max_runs}"
    )


def noop_study(rec: Recording, gate: GateSpec) -> dict[str, Any]:
    """Target 1: the baseline's recorded runs against a disjoint group of its own runs."""
    runs = rec.arms["baseline"]
    ids = sorted(runs)
    half = rec.runs("baseline") // 2
    paired = gate.model_copy(update={"max_runs": min(gate.max_runs, half)})
    strict = gate.model_copy(update={"mode": "strict", "max_runs": gate.first_runs})
    rows: list[dict[str, Any]] = []
    strict_rows: list[dict[str, Any]] = []
    disjoint = 0
    power: Assessment | None = None
    for k, (a, b) in enumerate(partitions(runs, NOOP_PARTITIONS, NOOP_SEED)):
        fwd = replay(paired, ids, a, b, power=k == 0)
        bwd = replay(paired, ids, backwards(b), backwards(a))
        power = power or fwd.assessment
        rows += [decision_row(f"{k} A->B", fwd), decision_row(f"{k} B'->A'", bwd)]
        # the backward decision reads each group from its end: no run in common while the two
        # decisions together read at most the group's runs
        if all(
            fwd.baseline.next_run(s) + bwd.candidate.next_run(s) <= half
            and fwd.candidate.next_run(s) + bwd.baseline.next_run(s) <= half
            for s in ids
        ):
            disjoint += 1
        strict_rows += [
            decision_row(f"{k} A->B", replay(strict, ids, a, b)),
            decision_row(f"{k} B'->A'", replay(strict, ids, backwards(b), backwards(a))),
        ]
    assert power is not None
    resampled = strict_resampled = 0
    resample_pairs: list[int] = []
    for a, b in partitions(runs, NOOP_RESAMPLES, RESAMPLE_SEED):
        for base_src, cand_src in ((a, b), (backwards(b), backwards(a))):
            r = replay(paired, ids, base_src, cand_src)
            resampled += not r.decision.accepted
            resample_pairs.append(r.decision.stats.pairs)
            strict_resampled += not replay(strict, ids, base_src, cand_src).decision.accepted
    rates = estimate_rates(Outcomes(runs=dict(runs)), ids)
    predicted = predict(paired, rates, rates)
    predicted_full = predict(gate, rates, rates)
    rejected = [r for r in rows if r["verdict"] != "accept"]
    return {
        "gate": paired.model_dump(mode="json"),
        "example_max_runs": gate.max_runs,
        "samples": len(ids),
        "recorded_runs": rec.runs("baseline"),
        "group_runs": half,
        "partitions": NOOP_PARTITIONS,
        "seed": NOOP_SEED,
        "decisions": rows,
        "rejections": len(rejected),
        "early_rejections": sum(1 for r in rejected if not r["capped"]),
        "capped": sum(1 for r in rows if r["capped"]),
        "gates_chosen": sorted({r["gate"] for r in rows}),
        "gate_reason": power.reason,
        "disjoint_partitions": disjoint,
        "strict": strict_rows,
        "strict_rejections": sum(1 for r in strict_rows if r["verdict"] != "accept"),
        "strict_mean_regressions": mean(r["regressed"] for r in strict_rows),
        "resampled": {
            "decisions": 2 * NOOP_RESAMPLES,
            "seed": RESAMPLE_SEED,
            "rejections": resampled,
            "strict_rejections": strict_resampled,
            "mean_pairs": mean(resample_pairs),
        },
        "predicted": {
            "rejection_at_group_cap": predicted.rejection,
            "runs_at_group_cap": predicted.runs,
            "rejection_at_example_cap": predicted_full.rejection,
            "runs_at_example_cap": predicted_full.runs,
        },
        "power": {
            "detectable_drop": power.detectable_drop,
            "no_op_accept": power.no_op_accept,
            "fixed_runs": power.fixed_runs,
            "flaky_in_first_round": power.flaky,
        },
    }


def harmful_study(rec: Recording, gate: GateSpec) -> dict[str, Any]:
    """Target 2: the baseline's recorded runs against the harmful edit's."""
    base, harm = rec.arms["baseline"], rec.arms["harmful"]
    ids = sorted(base)
    cap = gate.model_copy(update={"max_runs": min(gate.max_runs, rec.runs("baseline"), rec.runs("harmful"))})
    rows = []
    for k in range(HARMFUL_REPLAYS):
        rng = random.Random(f"{HARMFUL_SEED}-{k}")
        b = {s: shuffled(base[s], rng) for s in ids}
        h = {s: shuffled(harm[s], rng) for s in ids}
        rows.append(decision_row(str(k), replay(cap, ids, b, h)))
    # every recorded run at once: the gate's statistic over all pairs, and a bootstrap over samples
    n = rec.runs("harmful")
    whole_base = Outcomes(runs={s: base[s][:n] for s in ids})
    whole = decide(
        cap,
        assess(cap, Outcomes(runs={s: base[s][: cap.first_runs] for s in ids}), ids, power=False).require(),
        whole_base,
        Outcomes(runs={s: harm[s][:n] for s in ids}),
    ).stats
    return {
        "gate": cap.model_dump(mode="json"),
        "edit": rec.settings.get("harmful_edit", {}),
        "samples": len(ids),
        "baseline_runs": rec.runs("baseline"),
        "harmful_runs": n,
        "seed": HARMFUL_SEED,
        "replays": rows,
        "rejected": sum(1 for r in rows if r["verdict"] != "accept"),
        "early_rejected": sum(1 for r in rows if r["verdict"] == "reject" and not r["capped"]),
        "all_runs": {
            "pairs": whole.pairs,
            "baseline_pass_rate": whole.baseline_pass_rate,
            "harmful_pass_rate": whole.candidate_pass_rate,
            "drop": whole.drop,
            "drop_low": whole.drop_low,
            "drop_high": whole.drop_high,
            "bootstrap": effect(dict(base), dict(harm)),
        },
    }
