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

from pydantic import Field, StrictFloat, StrictInt, model_validator

from optiflow.core.base import Frozen
from optiflow.core.optimize.scoring import Objective
from optiflow.core.optimize.trial import SampleMetric

Alternative = Literal["greater", "less"]


Rule = Literal["none", "mann_whitney", "paired"]


class AcceptanceSpec(Frozen):
    """``test``: ``none`` (strictly better score), ``mann_whitney`` (and a U test), ``paired`` (the
    paired sequential selection of :mod:`optiflow.core.optimize.selection`), or ``auto`` (default):
    ``none`` when the baseline's own runs (at least 2 per selection sample) show the model
    deterministic, else ``paired``.

    Paired settings: ``alpha`` is the job-wide chance of ever crowning a candidate that is not
    better (spent over comparisons); ``min_gain`` the pass-rate gain to show (0..0.2); ``effect``
    the gain the race is sized to find (a contender shown below ``min_gain + effect`` at ``beta`` is
    dropped); ``margin`` the pass-rate non-inferiority margin of cost-type objectives;
    ``first_runs`` / ``round_runs`` / ``max_runs`` the runs per sample of the first round, of each
    later round, and the cap.
    """

    test: Literal["auto", "none", "mann_whitney", "paired"] = "auto"
    alpha: StrictFloat = Field(default=0.05, gt=0.0, lt=1.0)
    metric: SampleMetric = "score"
    beta: StrictFloat = Field(default=0.05, gt=0.0, lt=0.5)
    min_gain: StrictFloat = Field(default=0.0, ge=0.0, le=0.2)
    effect: StrictFloat = Field(default=0.10, gt=0.0, lt=1.0)
    margin: StrictFloat = Field(default=0.10, gt=0.0, lt=1.0)
    first_runs: StrictInt = Field(default=2, ge=1, le=50)
    round_runs: StrictInt = Field(default=2, ge=1, le=50)
    max_runs: StrictInt = Field(default=32, ge=1, le=200)

    @model_validator(mode="after")
    def _budget(self) -> AcceptanceSpec:
        if self.max_runs < self.first_runs:
            raise ValueError(f"max_runs ({self.max_runs}) is below first_runs ({self.first_runs})")
        if self.test == "auto" and self.first_runs < 2:
            raise ValueError("test auto needs first_runs >= 2 (two baseline runs show a deterministic model)")
        return self

    @property
    def sequential(self) -> bool:
        """Whether the baseline gets ``first_runs`` runs (auto and paired)."""
        return self.test in ("auto", "paired")

    @property
    def alternative(self) -> Alternative:
        return "greater" if self.metric == "score" else "less"

    def description(self, rule: Rule | None = None) -> str:
        test = rule or self.test
        if test == "none":
            return "strictly better score"
        if test == "mann_whitney":
            return f"strictly better score and Mann-Whitney U p < {self.alpha:g} on per-sample {self.metric}"
        paired = (
            f"paired sequential selection: gain over the best above {self.min_gain:.0%} shown at job-wide "
            f"alpha {self.alpha:g} (alpha_k = alpha*6/(pi^2 k^2)), runs {self.first_runs}+{self.round_runs}"
            f"..{self.max_runs} per sample"
        )
        if test == "paired":
            return paired
        return f"auto: strictly better score on a deterministic model, else {paired}"


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


__all__ = ["AcceptanceDecision", "AcceptanceSpec", "Contender", "Rule", "decide", "mann_whitney_p"]
