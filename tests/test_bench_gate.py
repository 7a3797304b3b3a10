"""bench/gate.py's yardsticks: edits with exact true drops, and the fixed designs it compares with."""

from __future__ import annotations

import random

import pytest

from bench.gate import N, dataset, harmful, runs_for, wilson_upper


@pytest.mark.parametrize("drop", [0.02, 0.05, 0.10, 0.15])
def test_harmful_edits_remove_whole_samples_for_an_exact_drop(drop: float) -> None:
    for j in range(5):
        p = dataset(f"t-{j}")
        q = harmful(p, drop, random.Random(j))
        assert all(b in (a, 0.0) for a, b in zip(p, q, strict=True))  # an instruction kept or removed
        true = (sum(p) - sum(q)) / N
        assert drop <= true <= drop + 0.1 / N


def test_a_no_op_keeps_every_probability() -> None:
    p = dataset("t-noop")
    assert harmful(p, 0.0, random.Random(0)) == p


def test_fixed_design_runs_grow_as_error_rates_shrink() -> None:
    assert runs_for(0.05, 0.05, 0.434) == 10  # the yardstick at this spread
    assert runs_for(0.02, 0.02, 0.434) > runs_for(0.05, 0.05, 0.434)
    assert wilson_upper(0.03, 2000) == pytest.approx(0.0384, abs=1e-3)
