"""The job's budget as the driver hands it to a workflow: after each step of a job with a budget,
its spend (read once from the job scratch) against its ``max_cost_usd`` / ``max_tokens``, in
``StepResults.budget``. The workflow ends the job with what it has when it says ``exhausted``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from optiflow.core.budget import budget_report
from optiflow.core.step import StepResults

if TYPE_CHECKING:
    from optiflow.distributed.runtime import Runtime


def with_budget(rt: Runtime, job_id: str, results: StepResults) -> StepResults:
    """``results`` with the job's budget report (as they are for a job without a budget)."""
    budget = rt.spec(job_id).budget
    if budget is None:
        return results
    report = budget_report(budget, rt.scratch.spend(job_id), step=results.step.name)
    return results.model_copy(update={"budget": report})


__all__ = ["with_budget"]
