"""bench/drift.py's yardsticks: its numpy detector is the core's, its shapes and drops are the ones
it names, its naive rules and its oracle compute what they say."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.drift_sim import Years, detector_log_e, draw_rates, dropped, oracle_power, versus, wilson_lower
from optiflow.core.drift.detector import Tally, evidence
from optiflow.core.drift.estimate import versus as core_versus
from optiflow.core.measure.report import wilson_interval


@pytest.mark.parametrize("shape", ["beta(0.3,0.3)", "beta(3.3,3.3)", "0.8*fixed(1) + 0.2*beta(3.3,3.3)"])
def test_the_numpy_detector_is_the_cores(shape: str) -> None:
    rng = np.random.default_rng(7)
    years, n = 3, 12
    p = draw_rates(shape, years, n, rng)
    q = dropped(p, 0.10, "removal")
    ys = Years.start(p, 12, 3, rng, keep_runs=False)
    ids = [f"s{i}" for i in range(n)]
    for k in range(1, 36):
        ys.night(q if k > 30 else p, rng)
        if k % 7 and k < 34:
            continue
        mine = detector_log_e(ys, 0.10)
        for y in range(years):
            ref = Tally(passes=tuple(int(v) for v in ys.ref[y]), runs=(12,) * n)
            nights = [
                Tally(passes=tuple(int(v) for v in ys.cum[t][y] - ys.cum[t - 1][y]), runs=(3,) * n)
                for t in range(1, k + 1)
            ]
            core = evidence(ref, nights, ids=ids, margin=0.10, alpha=0.05).log_drop
            assert mine[y] == pytest.approx(core, rel=1e-9, abs=1e-9)


def test_shapes_and_drops_are_what_they_say() -> None:
    rng = np.random.default_rng(1)
    assert draw_rates("beta(3.3,3.3)", 400, 48, rng).mean() == pytest.approx(0.5, abs=0.01)
    det = draw_rates("0.8*fixed(1) + 0.2*beta(3.3,3.3)", 400, 48, rng)
    assert (det == 1.0).mean() == pytest.approx(0.8, abs=0.01)
    p = draw_rates("beta(1,1)", 20, 48, rng)
    for model in ("removal", "proportional"):
        q = dropped(p, 0.10, model)
        assert (p.mean(-1) - q.mean(-1)) == pytest.approx(np.full(20, 0.10))
        assert (q <= p + 1e-12).all()
    assert ((dropped(p, 0.10, "removal") == 0) | np.isclose(dropped(p, 0.10, "removal"), p)).mean() > 0.95


def test_the_naive_rules_compute_what_they_name() -> None:
    passes = np.array([0, 7, 18, 12])
    for k, got in zip(passes, wilson_lower(passes, 18), strict=True):
        assert got == pytest.approx(wilson_interval(int(k), 18).lower)
    ref = np.array([[3, 0, 4, 12]])
    tonight = np.array([[0, 0, 3, 1]])
    est, low, high = versus(ref, 12, tonight, 3, z=1.959963984540054)
    core = core_versus(Tally(passes=(3, 0, 4, 12), runs=(12,) * 4), Tally(passes=(0, 0, 3, 1), runs=(3,) * 4))
    assert (est[0], low[0], high[0]) == pytest.approx((core.estimate, core.low, core.high))


def test_the_oracle_is_sure_of_a_big_drop_and_unsure_of_none() -> None:
    rng = np.random.default_rng(3)
    big = oracle_power(
        "beta(3.3,3.3)", 0.3, "proportional", n=48, runs=3, nights=3, years=200, levels={"5%": 0.05}, rng=rng
    )
    assert big["5%"] > 0.99
    none = oracle_power(
        "beta(3.3,3.3)", 1e-9, "proportional", n=48, runs=3, nights=3, years=200, levels={"5%": 0.05}, rng=rng
    )
    assert none["5%"] <= 0.05 + 1e-9 and math.isfinite(none["5%"])  # no drop: power is the level
