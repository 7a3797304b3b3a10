"""The nightly decision: windows and their weights, a drop shown (and kept shown), the samples
named, a gain reported, and a lucky reference that the evidence does not keep counting against."""

from __future__ import annotations

import math
import random

import pytest

from optiflow.core.drift.detector import Tally, evidence, sequence, window_grid, window_weights, windows_at
from optiflow.core.drift.estimate import versus
from optiflow.core.gate.eprocess import Block, bets, reject_path
from optiflow.core.optimize.selection import alpha_at

N = 40
IDS = [f"s{i:02d}" for i in range(N)]


def draw(rng: random.Random, probs: list[float], runs: int) -> Tally:
    return Tally(
        passes=tuple(sum(rng.random() < p for _ in range(runs)) for p in probs), runs=(runs,) * len(probs)
    )


def test_windows_grow_without_end_and_their_weights_sum_to_one() -> None:
    assert windows_at(1) == (1,)
    assert windows_at(5) == (1, 2, 3, 4, 5)
    assert window_grid(400) == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384]
    assert windows_at(400)[-1] == 400
    for night in (1, 7, 33, 400, 5000):
        weights = window_weights(night)
        assert sum(weights.values()) == pytest.approx(1.0)
        assert list(weights) == sorted(weights, key=lambda w: -weights[w])  # shorter: heavier


def test_tally_counts_answers_only() -> None:
    t = Tally.of({"a": "1e0.1", "b": ""}, ["a", "b", "c"])
    assert t.passes == (2, 0, 0) and t.runs == (3, 0, 0)


def test_a_drop_is_shown_named_and_stays_shown_until_a_new_reference() -> None:
    rng = random.Random(3)
    p = [rng.betavariate(3.3, 3.3) for _ in range(N)]
    broken = [0.0 if i % 5 == 0 else x for i, x in enumerate(p)]
    reference = draw(rng, p, 12)
    nights = (
        [draw(rng, p, 3) for _ in range(20)] + [draw(rng, broken, 3) for _ in range(6)] + [draw(rng, p, 3)]
    )
    decided = sequence(reference, nights, ids=IDS, margin=0.1, alpha=0.05)
    assert all(e.shown == "none" for e in decided[:20])
    first = next(e for e in decided if e.shown == "drop")
    assert 21 <= first.night <= 23
    assert first.log_drop >= first.threshold == pytest.approx(math.log(1 / alpha_at(0.05, first.night)))
    assert {f.sample_id for f in first.flips} <= {IDS[i] for i in range(0, N, 5)}
    assert all(f.window == 0.0 for f in first.flips)
    last = decided[-1]  # the samples are back, but the drop was shown: it stays until re-referenced
    assert last.first_shown == first.night and last.drop_shown


def test_a_gain_is_reported_and_a_drop_is_not_claimed() -> None:
    rng = random.Random(5)
    p = [0.3] * N
    better = [0.9] * N
    reference = draw(rng, p, 12)
    nights = [draw(rng, p, 3) for _ in range(5)] + [draw(rng, better, 3) for _ in range(3)]
    e = evidence(reference, nights, ids=IDS, margin=0.1, alpha=0.05)
    assert e.shown == "gain" and e.first_shown is None and e.log_drop < 0


def test_the_reference_is_one_draw_and_a_lucky_one_is_not_counted_against_night_after_night() -> None:
    """Samples at 0.5 and a lucky reference: 7 of 12 runs passed on every sample (its first three
    runs 1, 1, 0), 3.6 standard errors above the truth over 40 samples. The gate's paired e-process,
    each night's k-th run against the reference's k-th run, multiplied over the nights as if the
    reference were fresh every night, alarms; the detector, whose windows compare recent nights
    with everything before them (the nights soon outweigh the reference), never does over 80
    nights, and its evidence does not grow."""
    rng = random.Random(11)
    p = [0.5] * N
    lucky = Tally(passes=(7,) * N, runs=(12,) * N)
    nights = [draw(rng, p, 3) for _ in range(80)]
    decided = sequence(lucky, nights, ids=IDS, margin=0.1, alpha=0.05)
    assert all(e.shown != "drop" for e in decided)
    assert max(e.log_drop for e in decided[40:]) < max(e.log_drop for e in decided[:40]) + 1.0
    blocks = []
    for t in nights:
        for k, ref_passed in enumerate((True, True, False)):
            # the night's k-th run: the first passes[i] of a sample's runs passed
            failed = sum(1 for i in range(N) if k >= t.passes[i])
            blocks.append(Block(failed, N - failed, 0) if ref_passed else Block(0, failed, N - failed))
    path = reject_path(blocks, bets(blocks, 0.1, N))
    assert max(path) >= math.log(1 / 0.05)


def test_versus_pairs_by_sample_and_counts_both_sides_noise() -> None:
    ref = Tally(passes=(3, 0, 4), runs=(4, 4, 4))
    tonight = Tally(passes=(0, 0, 3), runs=(3, 3, 0))
    c = versus(ref, tonight)
    assert c.samples == 2  # the third sample has no answer tonight
    assert c.estimate == pytest.approx(((0 - 0.75) + 0) / 2)
    assert c.low < c.estimate < c.high and c.drop_bound == pytest.approx(-c.low)
    wide = versus(Tally(passes=(3, 0), runs=(4, 4)), Tally(passes=(0, 0), runs=(3, 3)))
    narrow = versus(Tally(passes=(30, 0), runs=(40, 40)), Tally(passes=(0, 0), runs=(3, 3)))
    assert narrow.high - narrow.low < wide.high - wide.low  # a stronger reference, a narrower interval


def test_a_night_weighs_at_most_the_work_bound_and_its_shortest_windows_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The control worker's work per night is bounded whatever the history's size: the windows are
    taken shortest first while their laws fit in ``WORK_BOUND`` terms, the choice made from run
    counts alone (the same counts, any outcomes: the same windows), and the report says so."""
    from optiflow.core.drift import detector
    from optiflow.core.drift.conditional import HyperGeometric

    rng = random.Random(5)
    p = [rng.random() for _ in range(N)]
    reference = draw(rng, p, 12)
    nights = [draw(rng, p, 3) for _ in range(200)]
    full = evidence(reference, nights, ids=IDS, margin=0.1, alpha=0.05)
    assert full.windows == 0  # 40 samples x 200 nights: every window of the grid fits

    bound = 20_000
    monkeypatch.setattr(detector, "WORK_BOUND", bound)
    terms = 0
    real = HyperGeometric.of.__func__  # type: ignore[attr-defined]

    def counted(cls: type[HyperGeometric], total: int, passes: int, drawn: int) -> HyperGeometric:
        nonlocal terms
        law = real(cls, total, passes, drawn)
        terms += len(law.log_pmf)
        return law

    monkeypatch.setattr(HyperGeometric, "of", classmethod(counted))
    cut = evidence(reference, nights, ids=IDS, margin=0.1, alpha=0.05)
    grid = windows_at(200)
    assert 1 <= cut.windows < len(grid)
    assert 0 < terms <= bound  # each (window, sample) law computed once
    assert cut.window in grid[: cut.windows] and cut.gain_window in grid[: cut.windows]
    weights = window_weights(200, cut.windows)
    assert sum(weights.values()) == pytest.approx(1.0) and list(weights) == list(grid[: cut.windows])
    flipped = [
        Tally(passes=tuple(r - x for x, r in zip(t.passes, t.runs, strict=True)), runs=t.runs) for t in nights
    ]
    assert evidence(reference, flipped, ids=IDS, margin=0.1, alpha=0.05).windows == cut.windows
