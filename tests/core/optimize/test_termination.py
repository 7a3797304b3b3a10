"""Termination policies: each one, the composite's order, the spec forms."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError

from optiflow.core.optimize.history import IterationRecord, TrialHistory
from optiflow.core.optimize.termination import (
    DEFAULT_MAX_ITERATIONS,
    CompositePolicy,
    CostBudgetPolicy,
    MaxIterationsPolicy,
    NoImprovementPolicy,
    TerminationCause,
    TimeBudgetPolicy,
    TokenBudgetPolicy,
    parse_termination,
)

from .harness import T0


def history(
    new_best: list[bool], *, tokens: int = 100, cost: float = 0.01, seconds: float = 10
) -> TrialHistory:
    """One iteration per flag, ``seconds`` apart, each spending ``tokens`` and ``cost``."""
    its = []
    best = 0
    for n, flag in enumerate(new_best):
        best = n if flag else best
        its.append(
            IterationRecord(
                number=n,
                new_best=flag,
                score=0.5,
                best_candidate_so_far=f"c{best}",
                best_so_far=0.5,
                tokens=tokens,
                cost=cost,
                started_at=T0 + timedelta(seconds=seconds * n),
                ended_at=T0 + timedelta(seconds=seconds * (n + 1)),
            )
        )
    return TrialHistory(started_at=T0, iterations=tuple(its))


def test_max_iterations_counts_the_baseline() -> None:
    p = MaxIterationsPolicy(iterations=3)
    assert p.check(history([True, False]), T0) is None
    reason = p.check(history([True, False, True]), T0)
    assert reason is not None and reason.cause is TerminationCause.MAX_ITERATIONS
    assert reason.by_policy
    assert p.description() == "Max 3 iterations"


def test_no_improvement_window() -> None:
    p = NoImprovementPolicy(window=2)
    assert p.check(history([True, False]), T0) is None  # not more iterations than the window yet
    assert p.check(history([True, True, False]), T0) is None
    reason = p.check(history([True, True, False, False]), T0)
    assert reason is not None and reason.cause is TerminationCause.NO_IMPROVEMENT
    assert reason.message == "No improvement in last 2 iterations"
    assert p.check(history([True, False, False, True]), T0) is None


def test_time_budget_reads_the_injected_clock() -> None:
    p = TimeBudgetPolicy(seconds=60)
    h = history([True])
    assert p.check(h, T0 + timedelta(seconds=59.9)) is None
    reason = p.check(h, T0 + timedelta(seconds=60))
    assert reason is not None and reason.cause is TerminationCause.TIME_BUDGET
    assert p.description() == "Time budget: 60s"


def test_token_and_cost_budgets() -> None:
    assert TokenBudgetPolicy(tokens=300).check(history([True, False]), T0) is None
    reason = TokenBudgetPolicy(tokens=300).check(history([True, False, False]), T0)
    assert (
        reason is not None and reason.cause is TerminationCause.TOKEN_BUDGET and "300 used" in reason.message
    )
    assert CostBudgetPolicy(usd=0.025).check(history([True, False]), T0) is None
    reason = CostBudgetPolicy(usd=0.025).check(history([True, False, False]), T0)
    assert reason is not None and reason.cause is TerminationCause.COST_BUDGET


def test_composite_first_policy_to_fire_wins_in_order() -> None:
    h = history([True, False, False, False], tokens=1000)
    tokens_first = CompositePolicy(policies=(TokenBudgetPolicy(tokens=10), MaxIterationsPolicy(iterations=2)))
    iterations_first = CompositePolicy(
        policies=(MaxIterationsPolicy(iterations=2), TokenBudgetPolicy(tokens=10))
    )
    assert tokens_first.check(h, T0).cause is TerminationCause.TOKEN_BUDGET  # type: ignore[union-attr]
    assert iterations_first.check(h, T0).cause is TerminationCause.MAX_ITERATIONS  # type: ignore[union-attr]
    quiet = CompositePolicy(policies=(MaxIterationsPolicy(iterations=20), NoImprovementPolicy(window=5)))
    assert quiet.check(h, T0) is None
    assert quiet.description() == "Max 20 iterations OR No improvement for 5 iterations"


def test_nested_composite() -> None:
    inner = CompositePolicy(policies=(TimeBudgetPolicy(seconds=5),))
    outer = CompositePolicy(policies=(inner, MaxIterationsPolicy(iterations=100)))
    reason = outer.check(history([True]), T0 + timedelta(seconds=6))
    assert reason is not None and reason.cause is TerminationCause.TIME_BUDGET
    assert outer.has_max_iterations()


def test_spec_forms() -> None:
    short = parse_termination(
        {
            "max_iterations": 20,
            "no_improvement": 5,
            "time_budget_s": 3600,
            "token_budget": 500000,
            "cost_budget": 2,
        }
    )
    assert [p.type for p in short.policies] == [
        "max_iterations",
        "no_improvement",
        "time_budget",
        "token_budget",
        "cost_budget",
    ]
    listed = parse_termination(
        [{"type": "token_budget", "tokens": 10}, {"type": "max_iterations", "iterations": 3}]
    )
    assert [p.type for p in listed.policies] == ["token_budget", "max_iterations"]
    assert parse_termination(listed.model_dump(mode="json")) == listed
    default = parse_termination(None)
    assert default.description() == "Max 10 iterations OR No improvement for 3 iterations"


def test_a_max_iterations_bound_is_always_there() -> None:
    p = parse_termination({"time_budget_s": 60})
    assert p.policies[-1] == MaxIterationsPolicy(iterations=DEFAULT_MAX_ITERATIONS)


def test_bad_forms() -> None:
    with pytest.raises(ValueError):
        parse_termination({"max_iteration": 3})
    with pytest.raises(ValidationError):
        parse_termination([{"type": "max_iterations", "iterations": 0}])
