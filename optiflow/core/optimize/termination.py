"""Termination policies (seed 003 §4.5-4.6): pure functions of the history and an injected clock.

Each policy's :meth:`check` returns a :class:`TerminationReason` when it fires. A
:class:`CompositePolicy` fires with the first of its policies that fires (their order is the
priority). Iteration 0 (the baseline) counts as an iteration, as in seed 003.

Spec forms accepted by :func:`parse_termination` (a job file's ``termination:``)::

    [{type: max_iterations, iterations: 20}, {type: no_improvement, window: 5}, ...]   # ordered
    {max_iterations: 20, no_improvement: 5, time_budget_s: 3600, token_budget: 500000, cost_budget: 2.0}

The mapping form is applied in that fixed order. Every policy set includes a max-iterations
bound (``DEFAULT_MAX_ITERATIONS`` is appended when none is given), so a run always ends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, StrictFloat, StrictInt, TypeAdapter

from optiflow.core.base import Frozen
from optiflow.core.optimize.history import TrialHistory
from optiflow.core.optimize.protocol import StopReason

DEFAULT_MAX_ITERATIONS = 20


class TerminationCause(StrEnum):
    MAX_ITERATIONS = "max_iterations"
    NO_IMPROVEMENT = "no_improvement"
    TIME_BUDGET = "time_budget"
    TOKEN_BUDGET = "token_budget"
    COST_BUDGET = "cost_budget"
    OPTIMIZER = "optimizer"
    """The optimizer's own ``should_stop`` (its :class:`StopReason` in ``optimizer_reason``)."""
    EXHAUSTED = "exhausted"
    """The optimizer proposed nothing."""
    BUDGET_EXHAUSTED = "budget_exhausted"
    """The job's hard budget (``max_cost_usd`` / ``max_tokens``) ran out during a step."""


POLICY_CAUSES = frozenset(
    {
        TerminationCause.MAX_ITERATIONS,
        TerminationCause.NO_IMPROVEMENT,
        TerminationCause.TIME_BUDGET,
        TerminationCause.TOKEN_BUDGET,
        TerminationCause.COST_BUDGET,
    }
)


class TerminationReason(Frozen):
    cause: TerminationCause
    message: str
    optimizer_reason: StopReason | None = None

    @property
    def by_policy(self) -> bool:
        """Decided by a termination policy (replayable), not by the optimizer."""
        return self.cause in POLICY_CAUSES


class MaxIterationsPolicy(Frozen):
    type: Literal["max_iterations"] = "max_iterations"
    iterations: StrictInt = Field(ge=1)

    def check(self, history: TrialHistory, now: datetime) -> TerminationReason | None:
        if history.iteration_count >= self.iterations:
            return TerminationReason(
                cause=TerminationCause.MAX_ITERATIONS,
                message=f"Maximum of {self.iterations} iterations reached",
            )
        return None

    def description(self) -> str:
        return f"Max {self.iterations} iterations"


class NoImprovementPolicy(Frozen):
    """Stops once the last ``window`` iterations produced no new best (seed 003's rule)."""

    type: Literal["no_improvement"] = "no_improvement"
    window: StrictInt = Field(ge=1)

    def check(self, history: TrialHistory, now: datetime) -> TerminationReason | None:
        count = history.iteration_count
        best = history.best_iteration
        if count <= self.window or best is None:
            return None
        if count - best.number - 1 >= self.window:
            return TerminationReason(
                cause=TerminationCause.NO_IMPROVEMENT,
                message=f"No improvement in last {self.window} iterations",
            )
        return None

    def description(self) -> str:
        return f"No improvement for {self.window} iterations"


class TimeBudgetPolicy(Frozen):
    type: Literal["time_budget"] = "time_budget"
    seconds: StrictFloat = Field(gt=0)

    def check(self, history: TrialHistory, now: datetime) -> TerminationReason | None:
        elapsed = (now - history.started_at).total_seconds()
        if elapsed >= self.seconds:
            return TerminationReason(
                cause=TerminationCause.TIME_BUDGET,
                message=f"Time budget of {_seconds(self.seconds)} exhausted ({_seconds(elapsed)} elapsed)",
            )
        return None

    def description(self) -> str:
        return f"Time budget: {_seconds(self.seconds)}"


class TokenBudgetPolicy(Frozen):
    type: Literal["token_budget"] = "token_budget"
    tokens: StrictInt = Field(ge=1)

    def check(self, history: TrialHistory, now: datetime) -> TerminationReason | None:
        used = history.total_tokens
        if used >= self.tokens:
            return TerminationReason(
                cause=TerminationCause.TOKEN_BUDGET,
                message=f"Token budget of {self.tokens} exhausted ({used} used)",
            )
        return None

    def description(self) -> str:
        return f"Token budget: {self.tokens}"


class CostBudgetPolicy(Frozen):
    type: Literal["cost_budget"] = "cost_budget"
    usd: StrictFloat = Field(gt=0)

    def check(self, history: TrialHistory, now: datetime) -> TerminationReason | None:
        used = history.total_cost
        if used >= self.usd:
            return TerminationReason(
                cause=TerminationCause.COST_BUDGET,
                message=f"Cost budget of ${self.usd:.4g} exhausted (${used:.4g} used)",
            )
        return None

    def description(self) -> str:
        return f"Cost budget: ${self.usd:.4g}"


class CompositePolicy(Frozen):
    """Fires with the first of ``policies`` (in order) that fires."""

    type: Literal["composite"] = "composite"
    policies: tuple[TerminationPolicy, ...] = Field(min_length=1)

    def check(self, history: TrialHistory, now: datetime) -> TerminationReason | None:
        for policy in self.policies:
            reason = policy.check(history, now)
            if reason is not None:
                return reason
        return None

    def description(self) -> str:
        return " OR ".join(p.description() for p in self.policies)

    def max_iterations(self) -> int:
        """The fewest iterations a max-iterations policy in it allows (the first to fire)."""
        found = [p.iterations for p in self.policies if isinstance(p, MaxIterationsPolicy)]
        found += [
            p.max_iterations()
            for p in self.policies
            if isinstance(p, CompositePolicy) and p.has_max_iterations()
        ]
        return min(found, default=DEFAULT_MAX_ITERATIONS)

    def has_max_iterations(self) -> bool:
        return any(
            isinstance(p, MaxIterationsPolicy) or (isinstance(p, CompositePolicy) and p.has_max_iterations())
            for p in self.policies
        )


TerminationPolicy = Annotated[
    MaxIterationsPolicy
    | NoImprovementPolicy
    | TimeBudgetPolicy
    | TokenBudgetPolicy
    | CostBudgetPolicy
    | CompositePolicy,
    Field(discriminator="type"),
]
CompositePolicy.model_rebuild()

_POLICY: TypeAdapter[TerminationPolicy] = TypeAdapter(TerminationPolicy)
_SHORTHAND: tuple[tuple[str, str, str], ...] = (
    ("max_iterations", "max_iterations", "iterations"),
    ("no_improvement", "no_improvement", "window"),
    ("time_budget_s", "time_budget", "seconds"),
    ("token_budget", "token_budget", "tokens"),
    ("cost_budget", "cost_budget", "usd"),
)
DEFAULT_TERMINATION: tuple[dict[str, Any], ...] = (
    {"type": "max_iterations", "iterations": 10},
    {"type": "no_improvement", "window": 3},
)


def termination_items(data: Any) -> list[Any]:
    """The ordered policy list of a spec (list form, or the shorthand mapping)."""
    if data is None:
        return [dict(p) for p in DEFAULT_TERMINATION]
    if isinstance(data, Mapping) and "type" not in data:
        unknown = sorted(set(data) - {k for k, _, _ in _SHORTHAND})
        if unknown:
            raise ValueError(f"unknown termination key(s) {unknown}")
        return [{"type": t, field: data[k]} for k, t, field in _SHORTHAND if data.get(k) not in (None, 0)]
    if isinstance(data, Mapping | Frozen):
        return [data]
    if isinstance(data, Sequence) and not isinstance(data, str):
        return list(data)
    raise ValueError("termination is a list of policies or a mapping like {max_iterations: 20}")


def parse_termination(data: Any) -> CompositePolicy:
    """The composite policy of a spec, with a max-iterations bound added when missing."""
    if isinstance(data, CompositePolicy):
        items: list[Any] = list(data.policies)
    elif isinstance(data, Mapping) and data.get("type") == "composite":
        items = list(CompositePolicy.model_validate(data).policies)
    else:
        items = termination_items(data)
    policies = [p if isinstance(p, Frozen) else _POLICY.validate_python(p) for p in items]
    composite = CompositePolicy(policies=tuple(policies) or (MaxIterationsPolicy(iterations=10),))
    if not composite.has_max_iterations():
        composite = CompositePolicy(
            policies=(*composite.policies, MaxIterationsPolicy(iterations=DEFAULT_MAX_ITERATIONS))
        )
    return composite


def _seconds(value: float) -> str:
    return f"{value:.0f}s" if value >= 10 else f"{value:.3g}s"


__all__ = [
    "DEFAULT_MAX_ITERATIONS",
    "CompositePolicy",
    "CostBudgetPolicy",
    "MaxIterationsPolicy",
    "NoImprovementPolicy",
    "TerminationCause",
    "TerminationPolicy",
    "TerminationReason",
    "TimeBudgetPolicy",
    "TokenBudgetPolicy",
    "parse_termination",
]
