"""Every scorer, and the objective's comparisons (MAXIMIZE and MINIMIZE)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from optiflow.core.evaluation import TrialSummary
from optiflow.core.optimize.scoring import (
    AvgLatencyScorer,
    AvgTokensScorer,
    CostEfficiencyScorer,
    Objective,
    SuccessRateScorer,
    TotalCostScorer,
    WeightedScorer,
    parse_scorer,
)

S = TrialSummary(
    total=20,
    passed=15,
    failed=5,
    pass_rate=0.75,
    total_cost=0.02,
    avg_latency_ms=250.0,
    avg_ttft_ms=90.0,
    total_tokens=5000,
)


def test_success_rate() -> None:
    assert SuccessRateScorer().score(S) == 0.75
    assert SuccessRateScorer().description() == "Success rate (higher is better)"


def test_cost_efficiency_is_success_per_1k_tokens() -> None:
    assert CostEfficiencyScorer().score(S) == pytest.approx(0.75 * 1000 / 5000)
    assert CostEfficiencyScorer().score(S.model_copy(update={"total_tokens": 0})) == 0.0
    assert CostEfficiencyScorer().description() == "Cost efficiency: success per 1k tokens"


def test_minimizing_scorers() -> None:
    assert AvgTokensScorer().score(S) == 250.0
    assert AvgTokensScorer().score(S.model_copy(update={"total": 0})) == 0.0
    assert TotalCostScorer().score(S) == 0.02
    assert AvgLatencyScorer().score(S) == 250.0


def test_weighted_is_the_weighted_mean_and_describes_its_parts() -> None:
    w = parse_scorer(
        {
            "type": "weighted",
            "components": [
                {"scorer": {"type": "success_rate"}, "weight": 0.7},
                {"scorer": {"type": "cost_efficiency"}, "weight": 0.3},
            ],
        }
    )
    assert isinstance(w, WeightedScorer)
    assert w.score(S) == pytest.approx(0.7 * 0.75 + 0.3 * 0.15)
    assert (
        w.description() == "70% Success rate (higher is better) + 30% Cost efficiency: success per 1k tokens"
    )
    unnormalized = parse_scorer(
        {
            "type": "weighted",
            "components": [
                {"scorer": {"type": "success_rate"}, "weight": 2},
                {"scorer": {"type": "total_cost"}, "weight": 2},
            ],
        }
    )
    assert unnormalized.score(S) == pytest.approx((0.75 + 0.02) / 2)
    assert unnormalized.description().startswith("50% ")


def test_weighted_rejects_zero_weights_and_nesting() -> None:
    with pytest.raises(ValidationError):
        parse_scorer({"type": "weighted", "components": [{"scorer": {"type": "success_rate"}, "weight": 0}]})
    with pytest.raises(ValidationError):
        parse_scorer({"type": "weighted", "components": []})
    with pytest.raises(ValidationError):
        parse_scorer(
            {
                "type": "weighted",
                "components": [{"scorer": {"type": "weighted", "components": []}, "weight": 1}],
            }
        )


def test_parse_short_form() -> None:
    assert parse_scorer("cost_efficiency") == CostEfficiencyScorer()


def test_objective() -> None:
    assert Objective("MAXIMIZE") is Objective.MAXIMIZE
    assert Objective("Minimize") is Objective.MINIMIZE
    assert Objective.MAXIMIZE.better(0.9, 0.8) and not Objective.MAXIMIZE.better(0.8, 0.8)
    assert Objective.MINIMIZE.better(0.1, 0.2) and not Objective.MINIMIZE.better(0.2, 0.1)
    assert Objective.MINIMIZE.better(5.0, None)
    scores = [0.3, 0.9, 0.5]
    assert min(scores, key=Objective.MAXIMIZE.best_first) == 0.9
    assert min(scores, key=Objective.MINIMIZE.best_first) == 0.3
    assert Objective.MINIMIZE.label == "MINIMIZE"
