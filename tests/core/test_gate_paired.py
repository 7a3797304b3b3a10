"""The paired sequential gate: decisions on seeded data, the cap, its statistics, its arithmetic."""

from __future__ import annotations

import math
import random

import pytest

from optiflow.core.gate import (
    GateSpec,
    Outcomes,
    assess,
    decide,
    drop_rates,
    estimate_rates,
    fixed_runs,
    operating_curve,
    predict,
)
from optiflow.core.gate.eprocess import (
    Block,
    accept_path,
    bets,
    lower_bound,
    pair_blocks,
    reject_path,
    upper_bound,
)
from optiflow.core.gate.power import block_distribution, detectable_drop

from .gate_support import drive, ids, rates

PAIRED = GateSpec(mode="paired")


def removed(base: dict[str, float], share: float) -> dict[str, float]:
    """An edit that removes the instruction of the first ``share`` of the samples."""
    cut = round(len(base) * share)
    return {sid: (0.0 if i < cut else p) for i, (sid, p) in enumerate(base.items())}


def test_clear_no_op_is_accepted_with_its_statistics() -> None:
    base = rates(48, "noop")
    d, a, rounds = drive(GateSpec(), base, base, "noop-1", power=True)  # auto
    assert d.verdict == "accept", d.line()
    s = d.stats
    assert s.gate == "paired" and "samples gave different results" in s.gate_reason
    assert s.drop_high < PAIRED.margin and s.drop_low < 0 < s.drop_high
    assert s.evidence_accept >= 1 / PAIRED.alpha
    assert s.pairs >= PAIRED.first_runs and s.candidate_runs == 48 * s.pairs
    assert s.baseline_runs >= s.candidate_runs
    assert a.detectable_drop is not None and 0.05 < a.detectable_drop < PAIRED.margin
    assert s.detectable_drop == a.detectable_drop
    assert a.fixed_runs is not None and 8 <= a.fixed_runs <= 13
    assert rounds >= 1


def test_clear_drop_is_rejected_early_and_names_the_regressed() -> None:
    base = rates(48, "drop")
    d, _, _ = drive(PAIRED, base, removed(base, 0.5), "drop-1")
    assert d.verdict == "reject" and not d.capped
    assert d.reason.startswith("worse: a drop shown with 95% confidence")
    assert 0 < d.stats.drop_low < d.stats.drop < d.stats.drop_high
    assert d.stats.evidence_reject >= 1 / PAIRED.beta
    assert d.stats.candidate_pass_rate < d.stats.baseline_pass_rate


def test_undecided_at_the_cap_is_not_accepted_and_says_so() -> None:
    spec = GateSpec(mode="paired", margin=0.02, max_runs=4)
    base = rates(20, "cap")
    d, _, _ = drive(spec, base, base, "cap-1")
    assert d.verdict == "reject" and d.capped
    assert (
        d.reason == "undecided after 4 pair(s) per sample (max_runs 4): not shown non-inferior at margin 2%"
    )
    assert d.stats.pairs == 4


def test_more_runs_go_to_every_paired_sample_of_an_undecided_candidate_and_extend_the_baseline() -> None:
    spec = GateSpec(mode="paired", max_error_rate=0.5)
    baseline = Outcomes.of({"a": "101", "b": "1e1", "c": "011"})
    a = assess(spec, baseline, "abc", power=False)
    candidate = Outcomes.of({"a": "100", "b": "010", "c": "111"})
    d = decide(spec, a, baseline, candidate)
    # b's baseline error is re-run to complete the third pair; nothing else is needed for it
    assert d.verdict == "continue" and d.stats.pairs == 2
    assert [(r.start, r.stop, r.sample_ids) for r in d.plan.baseline] == [(3, 4, ("b",))]
    assert d.plan.candidate == ()
    baseline = baseline.extend(Outcomes.of({"b": "...0"}))
    d = decide(spec, a, baseline, candidate)
    assert d.verdict == "continue" and d.stats.pairs == 3
    assert [(r.start, r.stop, r.sample_ids) for r in d.plan.baseline] == [(3, 4, ("a", "c")), (4, 5, ("b",))]
    assert [(r.start, r.stop, r.sample_ids) for r in d.plan.candidate] == [(3, 4, ("a", "b", "c"))]


def test_a_sample_never_answered_by_the_baseline_is_left_out_and_listed() -> None:
    baseline = Outcomes.of({"a": "101", "b": "eee", "c": "011"})
    a = assess(GateSpec(mode="paired", max_error_rate=0.5), baseline, "abc", power=False)
    assert a.excluded == ("b",)
    d = decide(GateSpec(mode="paired"), a, baseline, Outcomes.of({"a": "101", "c": "011"}))
    assert d.stats.excluded == ("b",)
    assert all("b" not in r.sample_ids for r in (*d.plan.baseline, *d.plan.candidate))


def test_deterministic_no_op_under_paired_is_accepted_in_the_first_round() -> None:
    base = rates(48, "det", dist="0.7*fixed(1) + 0.3*fixed(0)")
    d, _, rounds = drive(PAIRED, base, base, "det-1")
    assert d.accepted and rounds == 1 and d.stats.pairs == 3  # the candidate's first round decides


def test_acceptance_is_exactly_the_upper_bound_under_the_margin() -> None:
    for seed in range(6):
        base = rates(30, f"ub-{seed}")
        d, _, _ = drive(PAIRED, base, removed(base, 0.1 * (seed % 3)), f"ub-{seed}")
        assert d.accepted == (d.stats.drop_high < PAIRED.margin), d.line()


# -- the arithmetic ------------------------------------------------------------------------------
def exact_block_factor(p: list[float], q: list[float], lam: float, m: float) -> float:
    """E[prod_i (1 + lam (m - D_i))] over independent pairs, computed exactly."""
    out = 1.0
    for pi, qi in zip(p, q, strict=True):
        up, down = pi * (1 - qi), (1 - pi) * qi
        out *= up * (1 + lam * (m - 1)) + down * (1 + lam * (m + 1)) + (1 - up - down) * (1 + lam * m)
    return out


def test_a_block_is_a_supermartingale_factor_whatever_the_per_sample_drops() -> None:
    rng = random.Random(7)
    for _ in range(200):
        p = [rng.random() for _ in range(12)]
        q = [rng.random() * x for x in p]
        delta = (sum(p) - sum(q)) / 12
        lam = rng.uniform(0.0, 0.8)
        assert exact_block_factor(p, q, lam, delta) <= 1 + 1e-12  # null boundary: margin == delta
        assert exact_block_factor(p, q, lam, max(-1.0, delta - 0.05)) <= 1 + 1e-12
    # a block that left samples out could exceed 1: the reason every block holds every sample
    p, q = [0.9, 0.9], [0.9, 0.5]
    assert exact_block_factor(p[:1], q[:1], 0.5, 0.2) > 1


def test_pairs_use_answered_baseline_runs_and_count_candidate_errors_as_failures() -> None:
    blocks = pair_blocks(
        Outcomes.of({"a": "1e0", "b": "11"}), Outcomes.of({"a": "e1", "b": "01"}), ["a", "b"]
    )
    assert blocks == [Block(plus=2, zero=0, minus=0), Block(plus=0, zero=1, minus=1)]


def test_bets_are_predictable_and_grow_when_pairs_agree() -> None:
    agree = [Block(0, 48, 0)] * 4
    lams = bets(agree, 0.1, 48)
    assert lams[0] == pytest.approx(0.1 / (0.5 + 0.01))
    assert lams == sorted(lams) and lams[-1] > lams[0]
    assert bets(agree[:2], 0.1, 48) == lams[:2]  # a bet never looks at its own block


def test_confidence_bounds_bracket_the_estimate_and_tighten_with_pairs() -> None:
    rng = random.Random(3)
    blocks = []
    for _ in range(10):
        plus, minus = rng.randint(6, 10), rng.randint(6, 10)
        blocks.append(Block(plus, 40 - plus - minus, minus))
    lams = bets(blocks, 0.1, 40)
    lo4, hi4 = lower_bound(blocks[:4], lams[:4], 0.05), upper_bound(blocks[:4], lams[:4], 0.05)
    lo10, hi10 = lower_bound(blocks, lams, 0.05), upper_bound(blocks, lams, 0.05)
    est = sum(b.total for b in blocks) / (40 * 10)
    assert lo10 < est < hi10 and lo4 <= lo10 and hi10 <= hi4
    assert max(accept_path(blocks, lams, hi10)) >= math.log(20) - 1e-6
    assert max(reject_path(blocks, lams, lo10)) >= math.log(20) - 1e-6
    assert upper_bound([], [], 0.05) == 1.0 and lower_bound([], [], 0.05) == -1.0


# -- the prediction --------------------------------------------------------------------------------
def test_block_distribution_is_the_exact_convolution() -> None:
    dist = block_distribution([1.0, 0.5], [0.0, 0.5])
    # sample 1 always +1; sample 2: -1, 0, +1 with 1/4, 1/2, 1/4
    assert dist == pytest.approx([0, 0, 0.25, 0.5, 0.25])


def test_drop_models_move_the_mean_by_the_drop() -> None:
    base = list(rates(48, "dm").values())
    for model in ("removal", "proportional"):
        for drop in (0.0, 0.05, 0.1, -0.05):
            q = drop_rates(base, drop, model)
            assert (sum(base) - sum(q)) / 48 == pytest.approx(drop)
            assert all(0 <= x <= 1 for x in q)
    q = drop_rates(base, 0.1)
    broken = [p for p, x in zip(base, q, strict=True) if x == 0]
    partial = [x for p, x in zip(base, q, strict=True) if 0 < x < p]
    assert 8 <= len(broken) <= 11 and len(partial) <= 1  # whole samples fail, as a removed instruction does
    assert min(broken) < sorted(base)[12] and max(broken) > sorted(base)[-12]  # spread over the ranking


def test_operating_curve_rises_with_the_drop() -> None:
    curve = operating_curve(PAIRED, list(rates(48, "curve").values()), [0.0, 0.05, 0.1])
    assert [round(p.drop, 6) for p in curve] == [0.0, 0.05, 0.1]
    assert curve[0].rejection < PAIRED.beta + 0.02 < curve[1].rejection < curve[2].rejection
    assert curve[2].rejection >= 1 - PAIRED.alpha
    assert all(p.blocks <= p.runs <= PAIRED.max_runs for p in curve)


def test_prediction_holds_alpha_at_the_margin_and_matches_a_direct_simulation() -> None:
    base = rates(48, "oc")
    p = list(base.values())
    q = list(removed(base, 0.2).values())
    at_margin = [x * (1 - 0.1 / (sum(p) / 48)) for x in p]
    assert predict(PAIRED, p, at_margin).accept <= PAIRED.alpha
    point = predict(PAIRED, p, q)
    rng = random.Random(11)
    reps, rejected = 400, 0
    top = math.log(20)
    for _ in range(reps):
        blocks = []
        for _ in range(PAIRED.max_runs):
            d = [(rng.random() < a) - (rng.random() < b) for a, b in zip(p, q, strict=True)]
            blocks.append(Block(d.count(1), d.count(0), d.count(-1)))
        lams = bets(blocks, 0.1, 48)
        acc, rej = accept_path(blocks, lams, 0.1), reject_path(blocks, lams)
        first = next((k for k in range(len(blocks)) if acc[k] >= top or rej[k] >= top), None)
        rejected += first is None or acc[first] < top
    assert abs(rejected / reps - point.rejection) < 0.06  # 400 draws: sd ~0.02 around the prediction


def test_estimated_rates_shrink_three_run_noise() -> None:
    baseline = Outcomes.of(
        {sid: "".join(random.Random(sid).choice("01") for _ in range(3)) for sid in ids(40)}
    )
    est = estimate_rates(baseline, ids(40))
    raw = [sum(baseline.answered(s)) / 3 for s in ids(40)]
    assert max(est) - min(est) < max(raw) - min(raw)
    assert sum(est) / 40 == pytest.approx(sum(raw) / 40)


def test_detectable_drop_and_fixed_runs_follow_the_dataset_size() -> None:
    flaky48 = list(rates(48, "pw").values())
    flaky12 = flaky48[:12]
    assert detectable_drop(PAIRED, flaky48) < PAIRED.margin < detectable_drop(PAIRED, flaky12)
    assert fixed_runs(PAIRED, flaky12) > fixed_runs(PAIRED, flaky48)
