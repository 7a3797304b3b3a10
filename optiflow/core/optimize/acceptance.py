"""When a candidate becomes the new best (seed 004 step 6).

Without a test, the best-scoring candidate of an iteration is accepted when its acceptance score
(validation's with splits) is strictly better than the current best's under the objective. With
``test: mann_whitney`` it must also pass a one-sided Mann-Whitney U test of its per-sample values
against the current best's, ``p < alpha`` (``scipy.stats.mannwhitneyu``, imported lazily). The
per-sample ``metric`` is the check score (alternative: greater) or tokens, cost or latency
(alternative: less). Candidates are tried best first; the first that passes is accepted.

:func:`decide` is shared by the workflow and by replay, so both make the same decision from the
same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import Field, StrictFloat

from optiflow.core.base import Frozen
from optiflow.core.optimize.scoring import Objective
from optiflow.core.optimize.trial import SampleMetric

Alternative = Literal["greater", "less"]


class AcceptanceSpec(Frozen):
    test: Literal["none", "mann_whitney"] = "none"
    alpha: StrictFloat = Field(default=0.05, gt=0.0, lt=1.0)
    metric: SampleMetric = "score"

    @property
    def alternative(self) -> Alternative:
        return "greater" if self.metric == "score" else "less"

    def description(self) -> str:
        if self.test == "none":
            return "strictly better score"
        return f"strictly better score and Mann-Whitney U p < {self.alpha:g} on per-sample {self.metric}"


class Contender(Frozen):
    candidate_id: str
    score: float
    values: dict[str, float] = Field(default_factory=dict)


class AcceptanceDecision(Frozen):
    accepted: str | None = None
    p_values: dict[str, float] = Field(default_factory=dict)


def mann_whitney_p(candidate: Sequence[float], best: Sequence[float], alternative: Alternative) -> float:
    """One-sided Mann-Whitney U p-value that ``candidate`` is stochastically greater (less) than
    ``best``. 1.0 when either side is empty or every value is the same (no evidence)."""
    if not candidate or not best:
        return 1.0
    if len(set(candidate) | set(best)) == 1:
        return 1.0
    from scipy.stats import mannwhitneyu  # type: ignore[import-untyped,unused-ignore]

    return float(mannwhitneyu(list(candidate), list(best), alternative=alternative).pvalue)


def decide(
    contenders: Sequence[Contender],
    *,
    best_score: float,
    best_values: Mapping[str, float],
    objective: Objective,
    spec: AcceptanceSpec,
) -> AcceptanceDecision:
    """Which contender (if any) becomes the new best; the p-values of those tested."""
    order = sorted(range(len(contenders)), key=lambda i: (objective.best_first(contenders[i].score), i))
    p_values: dict[str, float] = {}
    for i in order:
        c = contenders[i]
        if not objective.better(c.score, best_score):
            break
        if spec.test == "mann_whitney":
            p = mann_whitney_p(list(c.values.values()), list(best_values.values()), spec.alternative)
            p_values[c.candidate_id] = p
            if p >= spec.alpha:
                continue
        return AcceptanceDecision(accepted=c.candidate_id, p_values=p_values)
    return AcceptanceDecision(accepted=None, p_values=p_values)


__all__ = ["AcceptanceDecision", "AcceptanceSpec", "Contender", "decide", "mann_whitney_p"]
