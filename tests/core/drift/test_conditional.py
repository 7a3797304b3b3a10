"""The exact conditional e-values: the hypergeometric law, and E[e] = 1 under "nothing changed" by
exact enumeration, whatever the pass probabilities and however lucky the reference drew."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import pytest

from optiflow.core.drift.conditional import HyperGeometric, SampleWindow, log_evidence, shift_theta
from optiflow.core.drift.detector import Tally, evidence


def brute_pmf(total: int, passes: int, drawn: int) -> dict[int, float]:
    """P(passes among drawn) by counting subsets."""
    runs = [1] * passes + [0] * (total - passes)
    counts: dict[int, int] = {}
    subsets = list(itertools.combinations(range(total), drawn))
    for sub in subsets:
        x = sum(runs[i] for i in sub)
        counts[x] = counts.get(x, 0) + 1
    return {x: c / len(subsets) for x, c in counts.items()}


@pytest.mark.parametrize(
    ("total", "passes", "drawn"), [(7, 3, 2), (9, 9, 3), (9, 0, 4), (10, 6, 10), (8, 5, 3)]
)
def test_the_law_is_the_hypergeometric_one(total: int, passes: int, drawn: int) -> None:
    law = HyperGeometric.of(total, passes, drawn)
    expected = brute_pmf(total, passes, drawn)
    got = {law.low + j: math.exp(lp) for j, lp in enumerate(law.log_pmf)}
    assert set(got) == set(expected)
    for x, p in expected.items():
        assert got[x] == pytest.approx(p, rel=1e-12)
    theta = 0.7
    assert math.exp(law.log_mgf(theta)) == pytest.approx(
        sum(p * math.exp(-theta * x) for x, p in expected.items())
    )
    assert math.exp(law.log_mgf_of_failures(theta, drawn)) == pytest.approx(
        sum(p * math.exp(-theta * (drawn - x)) for x, p in expected.items())
    )


def test_shift_theta_is_the_log_odds_ratio_of_losing_the_margin() -> None:
    assert shift_theta(0.5, 0.1) == pytest.approx(math.log(1.0) - math.log(0.4 / 0.6))
    assert shift_theta(0.1, 0.1) == pytest.approx(math.log(0.1 / 0.9) - math.log(0.05 / 0.95))  # half of it


def _binom(n: int, k: int, p: float) -> float:
    return math.comb(n, k) * p**k * (1 - p) ** (n - k)


def exact_mean(probs: Sequence[float], r0: int, r: int, nights: int, stat: str) -> float:
    """E[exp(log e)] over every outcome of a reference of ``r0`` runs and ``nights`` nights of ``r``
    runs of samples passing with ``probs``, nothing changed: the expectation, exactly."""
    per_sample = []
    for p in probs:
        cells = []
        for ref in range(r0 + 1):
            for ks in itertools.product(range(r + 1), repeat=nights):
                weight = _binom(r0, ref, p)
                for k in ks:
                    weight *= _binom(r, k, p)
                cells.append((weight, ref, ks))
        per_sample.append(cells)
    total = 0.0
    ids = [f"s{i}" for i in range(len(probs))]
    for combo in itertools.product(*per_sample):
        weight = math.prod(c[0] for c in combo)
        ref = Tally(passes=tuple(c[1] for c in combo), runs=(r0,) * len(probs))
        tallies = [Tally(passes=tuple(c[2][t] for c in combo), runs=(r,) * len(probs)) for t in range(nights)]
        e = evidence(ref, tallies, ids=ids, margin=0.1, alpha=0.05)
        total += weight * math.exp(e.log_drop if stat == "drop" else e.log_gain)
    return total


@pytest.mark.parametrize(
    "probs",
    [(0.5, 0.5), (0.9, 0.2), (0.99, 0.03), (1.0, 0.6), (0.0, 0.97)],
    ids=["even", "spread", "extreme", "deterministic", "never"],
)
def test_tonights_evidence_has_expectation_one_when_nothing_changed(probs: tuple[float, float]) -> None:
    """Night 2 of 2 samples (reference 2 runs, nights of 1 run), every outcome enumerated: the
    mixture over windows and alternatives is an e-value, for any pass probabilities, the reference's
    luck included (it is one of the enumerated draws)."""
    for stat in ("drop", "gain"):
        assert exact_mean(probs, r0=2, r=1, nights=2, stat=stat) == pytest.approx(1.0, abs=1e-12)


def test_a_sample_with_nothing_on_one_side_is_neutral() -> None:
    drop, gain = log_evidence([SampleWindow(0, 0, 2, 3), SampleWindow(4, 6, 0, 0)], 0.1)
    assert drop.mixed == pytest.approx(0.0) and gain.mixed == pytest.approx(0.0)
    assert drop.per_sample == (0.0, 0.0)


def test_a_window_that_fails_what_passed_before_is_evidence_of_a_drop_not_a_gain() -> None:
    broke = [SampleWindow(30, 30, 0, 6)] * 5 + [SampleWindow(15, 30, 3, 6)] * 20
    drop, gain = log_evidence(broke, 0.1)
    assert drop.mixed > math.log(1e6)
    assert gain.mixed < 0
    assert drop.per_sample[0] > drop.per_sample[-1]
