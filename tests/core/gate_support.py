"""Drive a gate round by round on outcomes drawn from per-sample probabilities (no model, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from optiflow.core.gate import (
    Assessment,
    GateDecision,
    GateSpec,
    Outcomes,
    RunRange,
    assess,
    decide,
    first_round,
)
from optiflow.llm.noise import SMOLLM2_LIKE, pass_probability, passes


def ids(n: int) -> tuple[str, ...]:
    return tuple(f"s{i:02d}" for i in range(n))


def rates(n: int, seed: str, dist: str = SMOLLM2_LIKE) -> dict[str, float]:
    return {sid: pass_probability(dist, seed, sid) for sid in ids(n)}


def draw(
    outcomes: Outcomes, ranges: Sequence[RunRange], probs: Mapping[str, float], seed: str, key: str
) -> Outcomes:
    new = {}
    for r in ranges:
        for sid in r.sample_ids:
            runs = "".join(
                "1" if passes(probs[sid], seed, key, sid, k) else "0" for k in range(r.start, r.stop)
            )
            new[sid] = outcomes.seq(sid).ljust(r.start, ".") + runs
    return outcomes.extend(Outcomes(runs=new))


def drive(
    spec: GateSpec,
    base: Mapping[str, float],
    cand: Mapping[str, float],
    seed: str,
    *,
    protected: Sequence[str] = (),
    power: bool = False,
) -> tuple[GateDecision, Assessment, int]:
    """One candidate from the baseline's first round to its decision; (decision, assessment, candidate
    rounds run)."""
    sample_ids = tuple(base)
    baseline = draw(Outcomes(), first_round(spec, sample_ids).baseline, base, seed, "baseline")
    a = assess(spec, baseline, sample_ids, protected, power=power).require()
    candidate = Outcomes()
    for rounds in range(200):
        d = decide(spec, a, baseline, candidate)
        if d.decided:
            return d, a, rounds
        baseline = draw(baseline, d.plan.baseline, base, seed, "baseline")
        candidate = draw(candidate, d.plan.candidate, cand, seed, "candidate")
    raise AssertionError("no decision after 200 rounds")
