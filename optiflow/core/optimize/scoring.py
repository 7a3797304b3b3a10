"""Scorers: one scalar per trial from its aggregate statistics, and the objective (seed 003).

A scorer is a small JSON spec (``{type: success_rate}``, ``{type: weighted, components: [...]}``)
whose :meth:`score` reads a :class:`~optiflow.core.evaluation.TrialSummary`. The objective says
which direction is better; :meth:`Objective.better` is the only comparison the framework uses.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, StrictFloat, TypeAdapter

from optiflow.core.base import Frozen
from optiflow.core.evaluation import TrialSummary


class Objective(StrEnum):
    MAXIMIZE = "maximize"
    MINIMIZE = "minimize"

    @classmethod
    def _missing_(cls, value: object) -> Objective | None:
        if isinstance(value, str):
            for member in cls:
                if member.value == value.lower():
                    return member
        return None

    def better(self, a: float, b: float | None) -> bool:
        """``a`` strictly better than ``b`` (anything beats None)."""
        if b is None:
            return True
        return a > b if self is Objective.MAXIMIZE else a < b

    def best_first(self, score: float) -> float:
        """A sort key that puts the best score first."""
        return -score if self is Objective.MAXIMIZE else score

    @property
    def label(self) -> str:
        return self.name


class SuccessRateScorer(Frozen):
    type: Literal["success_rate"] = "success_rate"

    def score(self, s: TrialSummary) -> float:
        return s.pass_rate

    def description(self) -> str:
        return "Success rate (higher is better)"


class CostEfficiencyScorer(Frozen):
    """Success rate per 1,000 tokens: ``pass_rate * 1000 / total_tokens`` (0 without tokens)."""

    type: Literal["cost_efficiency"] = "cost_efficiency"

    def score(self, s: TrialSummary) -> float:
        if s.total_tokens <= 0:
            return 0.0
        return s.pass_rate * 1000.0 / s.total_tokens

    def description(self) -> str:
        return "Cost efficiency: success per 1k tokens"


class AvgTokensScorer(Frozen):
    """Tokens per evaluation (use with MINIMIZE)."""

    type: Literal["avg_tokens"] = "avg_tokens"

    def score(self, s: TrialSummary) -> float:
        return s.total_tokens / s.total if s.total else 0.0

    def description(self) -> str:
        return "Average tokens per evaluation (lower is better)"


class TotalCostScorer(Frozen):
    """Total cost in USD of the trial's evaluations (use with MINIMIZE)."""

    type: Literal["total_cost"] = "total_cost"

    def score(self, s: TrialSummary) -> float:
        return s.total_cost

    def description(self) -> str:
        return "Total cost in USD (lower is better)"


class AvgLatencyScorer(Frozen):
    """Mean latency in milliseconds (use with MINIMIZE)."""

    type: Literal["avg_latency_ms"] = "avg_latency_ms"

    def score(self, s: TrialSummary) -> float:
        return s.avg_latency_ms

    def description(self) -> str:
        return "Mean latency in ms (lower is better)"


BasicScorerSpec = Annotated[
    SuccessRateScorer | CostEfficiencyScorer | AvgTokensScorer | TotalCostScorer | AvgLatencyScorer,
    Field(discriminator="type"),
]


class WeightedComponent(Frozen):
    scorer: BasicScorerSpec
    weight: StrictFloat = Field(gt=0)


class WeightedScorer(Frozen):
    """``sum(weight * score) / sum(weight)`` over basic scorers (seed 003's WeightedScorer)."""

    type: Literal["weighted"] = "weighted"
    components: tuple[WeightedComponent, ...] = Field(min_length=1)

    def score(self, s: TrialSummary) -> float:
        total = sum(c.weight for c in self.components)
        return sum(c.scorer.score(s) * c.weight for c in self.components) / total

    def description(self) -> str:
        total = sum(c.weight for c in self.components)
        return " + ".join(f"{c.weight / total * 100:.0f}% {c.scorer.description()}" for c in self.components)


ScorerSpec = Annotated[
    SuccessRateScorer
    | CostEfficiencyScorer
    | AvgTokensScorer
    | TotalCostScorer
    | AvgLatencyScorer
    | WeightedScorer,
    Field(discriminator="type"),
]

_SCORER: TypeAdapter[ScorerSpec] = TypeAdapter(ScorerSpec)


def parse_scorer(data: Any) -> ScorerSpec:
    """A scorer from its spec (``"success_rate"`` is short for ``{type: success_rate}``)."""
    if isinstance(data, str):
        data = {"type": data}
    return _SCORER.validate_python(data)


__all__ = [
    "AvgLatencyScorer",
    "AvgTokensScorer",
    "BasicScorerSpec",
    "CostEfficiencyScorer",
    "Objective",
    "ScorerSpec",
    "SuccessRateScorer",
    "TotalCostScorer",
    "WeightedComponent",
    "WeightedScorer",
    "parse_scorer",
]
