"""Acceptance of a new best: strictly better, optionally by a Mann-Whitney U test."""

from __future__ import annotations

import pytest
from scipy.stats import mannwhitneyu

from optiflow.core.optimize.acceptance import AcceptanceSpec, Contender, decide, mann_whitney_p
from optiflow.core.optimize.scoring import Objective

BEST = {f"s{i}": float(i < 10) for i in range(20)}  # 10 of 20 pass
MUCH_BETTER = {f"s{i}": float(i < 19) for i in range(20)}
SLIGHTLY_BETTER = {f"s{i}": float(i < 11) for i in range(20)}
MW = AcceptanceSpec(test="mann_whitney", alpha=0.05)


def test_p_value_matches_scipy_and_edge_cases() -> None:
    a, b = list(MUCH_BETTER.values()), list(BEST.values())
    assert mann_whitney_p(a, b, "greater") == pytest.approx(mannwhitneyu(a, b, alternative="greater").pvalue)
    assert mann_whitney_p(a, b, "greater") < 0.05
    assert mann_whitney_p(b, a, "greater") > 0.5
    assert mann_whitney_p([], b, "greater") == 1.0
    assert mann_whitney_p([1.0, 1.0], [1.0], "greater") == 1.0


def contenders(**values: dict[str, float]) -> list[Contender]:
    return [Contender(candidate_id=k, score=sum(v.values()) / len(v), values=v) for k, v in values.items()]


def test_without_a_test_the_best_strictly_better_contender_wins() -> None:
    cs = contenders(c1=SLIGHTLY_BETTER, c2=MUCH_BETTER)
    d = decide(cs, best_score=0.5, best_values=BEST, objective=Objective.MAXIMIZE, spec=AcceptanceSpec())
    assert d.accepted == "c2" and d.p_values == {}
    tie = contenders(c1=BEST)
    assert (
        decide(
            tie, best_score=0.5, best_values=BEST, objective=Objective.MAXIMIZE, spec=AcceptanceSpec()
        ).accepted
        is None
    )


def test_ties_between_contenders_go_to_the_first_proposed() -> None:
    cs = contenders(c1=MUCH_BETTER, c2=MUCH_BETTER)
    assert (
        decide(
            cs, best_score=0.5, best_values=BEST, objective=Objective.MAXIMIZE, spec=AcceptanceSpec()
        ).accepted
        == "c1"
    )


def test_mann_whitney_blocks_a_non_significant_improvement() -> None:
    d = decide(
        contenders(c1=SLIGHTLY_BETTER),
        best_score=0.5,
        best_values=BEST,
        objective=Objective.MAXIMIZE,
        spec=MW,
    )
    assert d.accepted is None
    assert d.p_values["c1"] >= 0.05
    d = decide(
        contenders(c1=MUCH_BETTER), best_score=0.5, best_values=BEST, objective=Objective.MAXIMIZE, spec=MW
    )
    assert d.accepted == "c1" and d.p_values["c1"] < 0.05


def test_mann_whitney_tries_the_next_contender() -> None:
    # c1 scores higher but on a handful of samples; c2 is consistently better
    few = {f"s{i}": 1.0 for i in range(3)}
    cs = [
        Contender(candidate_id="c1", score=1.0, values=few),
        Contender(candidate_id="c2", score=0.95, values=MUCH_BETTER),
    ]
    d = decide(cs, best_score=0.5, best_values=BEST, objective=Objective.MAXIMIZE, spec=MW)
    assert d.accepted == "c2"
    assert set(d.p_values) == {"c1", "c2"}


def test_minimize_with_cost_metric() -> None:
    spec = AcceptanceSpec(test="mann_whitney", metric="cost")
    assert spec.alternative == "less"
    best_costs = {f"s{i}": 2.0 + i % 3 for i in range(20)}
    cheaper = {f"s{i}": 1.0 + i % 3 * 0.1 for i in range(20)}
    cs = [Contender(candidate_id="c1", score=1.1, values=cheaper)]
    d = decide(cs, best_score=3.0, best_values=best_costs, objective=Objective.MINIMIZE, spec=spec)
    assert d.accepted == "c1"
    worse = [Contender(candidate_id="c1", score=3.5, values=cheaper)]
    assert (
        decide(
            worse, best_score=3.0, best_values=best_costs, objective=Objective.MINIMIZE, spec=spec
        ).accepted
        is None
    )


def test_description() -> None:
    assert AcceptanceSpec(test="none").description() == "strictly better score"
    assert "Mann-Whitney U p < 0.05" in MW.description()
