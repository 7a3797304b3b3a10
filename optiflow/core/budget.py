"""A job's hard budget, ``max_cost_usd`` and ``max_tokens``, and what the job spent (pure).

Every job kind's spec carries the two fields (:class:`JobBudget`: the one definition the specs
share). Every worker of the fleet enforces them on the job's spend, held in the job scratch
(Redis when distributed, :mod:`optiflow.distributed.scratch`):

- before a model call (an evaluation, a compression proposal, an optimizer's rewrite) the worker
  checks the spend; when the budget is exhausted the call is not made and the evaluation is
  skipped with the reason :data:`BUDGET_EXHAUSTED` (counted in :attr:`Spend.skipped`);
- after the call its actual cost and tokens (every model call it made: the answer, a judge) are
  added atomically.

Calls that passed the check before the budget ran out still finish and are charged. What they
add past the budget is the *overspend*: at most the calls in flight when the budget ran out (one
per eval thread of the fleet), never more. :attr:`Spend.over_calls` counts the calls charged at or
past the budget.

The driver reads the spend after each step and hands it to the workflow as a
:class:`BudgetReport` (``StepResults.budget``); a workflow whose step ran out of budget ends there
with what it had, and its report carries the :class:`BudgetReport`.

This is the hard budget. An optimize job's ``token_budget`` / ``cost_budget`` termination
policies are the soft one: checked between iterations, on what the iterations recorded.
"""

from __future__ import annotations

from typing import Final

from pydantic import Field, StrictFloat, StrictInt

from optiflow.core.base import Frozen

BUDGET_EXHAUSTED: Final = "budget_exhausted"
"""The reason of an evaluation skipped for the budget, the event type, and what reports say."""


class JobBudget(Frozen):
    """The hard budget fields of every job spec (none set: no budget)."""

    max_cost_usd: StrictFloat | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="the most the job's model calls may cost, in USD (as litellm prices them), "
        "across every worker; in-flight calls may overspend it",
    )
    max_tokens: StrictInt | None = Field(
        default=None,
        ge=1,
        description="the most prompt + completion tokens the job's model calls may use, across "
        "every worker; in-flight calls may overspend it",
    )

    @property
    def budget(self) -> JobBudget | None:
        """The caps alone (None when neither is set): what the workers enforce."""
        if self.max_cost_usd is None and self.max_tokens is None:
            return None
        return JobBudget(max_cost_usd=self.max_cost_usd, max_tokens=self.max_tokens)

    def exhausted_by(self, cost_usd: float, tokens: int) -> bool:
        """Nothing left: either cap reached."""
        return (self.max_cost_usd is not None and cost_usd >= self.max_cost_usd) or (
            self.max_tokens is not None and tokens >= self.max_tokens
        )


class Charge(Frozen):
    """What one task adds to its job's spend: the cost and tokens of the model calls it made, or
    a call it skipped for the budget."""

    cost_usd: float = Field(default=0.0, ge=0.0)
    tokens: int = Field(default=0, ge=0)
    skipped: int = Field(default=0, ge=0)

    @property
    def spends(self) -> bool:
        return self.cost_usd > 0 or self.tokens > 0


class Spend(Frozen):
    """A job's spend so far, fleet-wide."""

    cost_usd: float = 0.0
    tokens: int = 0
    skipped: int = 0
    """Model calls not made because the budget was exhausted."""
    over_calls: int = 0
    """Calls charged at or past the budget: the one that reached it and those still in flight."""


class BudgetReport(Frozen):
    """The budget, the spend, and what running out cost: in a step's results and in a report."""

    max_cost_usd: float | None = None
    max_tokens: int | None = None
    spent_usd: float = 0.0
    spent_tokens: int = 0
    overspend_usd: float = 0.0
    """``spent_usd - max_cost_usd`` when positive: what the calls in flight added past the cap."""
    overspend_tokens: int = 0
    over_calls: int = 0
    """Calls charged at or past the budget (in flight when it ran out); bounded by the fleet's
    eval concurrency."""
    skipped_calls: int = 0
    exhausted: bool = False
    step: str | None = None
    """The step during which the budget ran out."""


def budget_report(budget: JobBudget, spend: Spend, *, step: str | None = None) -> BudgetReport:
    """The report of ``spend`` against ``budget``; ``step`` is named when it is exhausted."""
    exhausted = budget.exhausted_by(spend.cost_usd, spend.tokens)
    return BudgetReport(
        max_cost_usd=budget.max_cost_usd,
        max_tokens=budget.max_tokens,
        spent_usd=spend.cost_usd,
        spent_tokens=spend.tokens,
        overspend_usd=max(0.0, spend.cost_usd - budget.max_cost_usd) if budget.max_cost_usd else 0.0,
        overspend_tokens=max(0, spend.tokens - budget.max_tokens) if budget.max_tokens else 0,
        over_calls=spend.over_calls,
        skipped_calls=spend.skipped,
        exhausted=exhausted,
        step=step if exhausted else None,
    )


def budget_line(report: BudgetReport) -> str:
    """One line: ``budget exhausted at step candidates: spent $0.0123 of $0.0100 (overspend
    $0.0023 by 3 calls in flight), 41 calls skipped``, or ``budget: spent $0.004 of $0.01``."""
    spent = []
    if report.max_cost_usd is not None:
        spent.append(f"${report.spent_usd:.4g} of ${report.max_cost_usd:.4g}")
    if report.max_tokens is not None:
        spent.append(f"{report.spent_tokens} of {report.max_tokens} tokens")
    what = " and ".join(spent)
    if not report.exhausted:
        return f"budget: spent {what}"
    over = []
    if report.max_cost_usd is not None:
        over.append(f"${report.overspend_usd:.4g}")
    if report.max_tokens is not None:
        over.append(f"{report.overspend_tokens} tokens")
    where = f" at step {report.step}" if report.step else ""
    return (
        f"budget exhausted{where}: spent {what} (overspend {' and '.join(over)} by "
        f"{report.over_calls} call(s) in flight), {report.skipped_calls} call(s) skipped"
    )


__all__ = [
    "BUDGET_EXHAUSTED",
    "BudgetReport",
    "Charge",
    "JobBudget",
    "Spend",
    "budget_line",
    "budget_report",
]
