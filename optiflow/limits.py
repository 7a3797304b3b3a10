"""Size limits of a job, checked at submission (``OPTIFLOW_MAX_EVALUATIONS_PER_JOB``,
``OPTIFLOW_MAX_ITERATIONS_CAP``): a job may not ask for more work than the deployment allows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from optiflow.core.measure import MeasureSpec
from optiflow.core.optimize.spec import OptimizeSpec
from optiflow.core.optimize.termination import CompositePolicy, MaxIterationsPolicy
from optiflow.errors import ValidationError

if TYPE_CHECKING:
    from optiflow.core.compress import CompressSpec
    from optiflow.settings import Settings


def evaluations_per_run(spec: CompressSpec | OptimizeSpec | MeasureSpec) -> tuple[int, int, str]:
    """(samples, runs, the runs field's name): one evaluation of the job's baseline is
    samples x runs model calls."""
    if isinstance(spec, MeasureSpec):
        return len(spec.sample_ids()), spec.runs, "runs"
    return len(spec.dataset), spec.eval_runs, "eval_runs"


def max_iterations(policy: CompositePolicy) -> int | None:
    """The iteration bound of a termination policy: the smallest max_iterations in it (the
    composite stops at the first policy that fires)."""
    bounds = [
        p.iterations if isinstance(p, MaxIterationsPolicy) else max_iterations(p)
        for p in policy.policies
        if isinstance(p, MaxIterationsPolicy | CompositePolicy)
    ]
    found = [b for b in bounds if b is not None]
    return min(found) if found else None


def check_limits(spec: CompressSpec | OptimizeSpec | MeasureSpec, settings: Settings) -> None:
    """ValidationError naming the field when the job is over a configured limit."""
    samples, runs, runs_field = evaluations_per_run(spec)
    total = samples * runs
    if total > settings.max_evaluations_per_job:
        raise ValidationError(
            f"{samples} samples x {runs_field} {runs} = {total} evaluations, over the limit of "
            f"{settings.max_evaluations_per_job} (OPTIFLOW_MAX_EVALUATIONS_PER_JOB)",
            field="dataset",
        )
    if isinstance(spec, OptimizeSpec):
        bound = max_iterations(spec.termination)
        if bound is not None and bound > settings.max_iterations_cap:
            raise ValidationError(
                f"max_iterations {bound} is over the limit of {settings.max_iterations_cap} "
                "(OPTIFLOW_MAX_ITERATIONS_CAP)",
                field="termination",
            )


__all__ = ["check_limits", "evaluations_per_run", "max_iterations"]
