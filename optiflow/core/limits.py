"""Size caps on a job (pure): how much work one document may ask for.

A job's cost grows with its samples x runs (every candidate is evaluated on each sample, each
run) and, for an optimize job, with its iterations. :func:`check_limits` refuses a spec above the
caps with a :class:`LimitError` naming the field, before anything is written. The caps come from
settings (``OPTIFLOW_MAX_SAMPLE_RUNS``, ``OPTIFLOW_MAX_ITERATIONS``:
:attr:`optiflow.settings.Settings.job_limits`), so the HTTP API and the CLI share them.

Lengths that the database imposes (job names, sample ids: :data:`optiflow.core.base.MAX_NAME_LENGTH`)
are part of the models themselves, so every entry point refuses them.
"""

from __future__ import annotations

from pydantic import Field

from optiflow.core.base import Frozen
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.measure.spec import MeasureSpec
from optiflow.core.optimize.spec import OptimizeSpec
from optiflow.core.optimize.termination import CompositePolicy, MaxIterationsPolicy
from optiflow.errors import ValidationError


class LimitError(ValidationError):
    """A job asks for more work than the server's caps allow."""

    code = "limit_exceeded"


class JobLimits(Frozen):
    max_sample_runs: int = Field(default=20_000, ge=1)
    """samples x runs of one candidate's evaluation (``OPTIFLOW_MAX_SAMPLE_RUNS``)"""
    max_iterations: int = Field(default=100, ge=1)
    """the largest ``max_iterations`` termination of an optimize job (``OPTIFLOW_MAX_ITERATIONS``)"""


def check_limits(spec: CompressSpec | OptimizeSpec | MeasureSpec, limits: JobLimits) -> None:
    """Refuse ``spec`` (:class:`LimitError`, naming the field) when it exceeds ``limits``."""
    if isinstance(spec, MeasureSpec):
        samples, runs, runs_field = len(spec.sample_ids()), spec.runs, "runs"
    elif isinstance(spec, OptimizeSpec):
        samples, runs, runs_field = len(spec.trial_ids()), spec.eval_runs, "eval_runs"
    else:
        samples, runs, runs_field = len(spec.dataset), spec.eval_runs, "eval_runs"
    cap = limits.max_sample_runs
    if samples > cap:
        raise LimitError(
            f"{samples} samples, above the limit of {cap} samples x runs (OPTIFLOW_MAX_SAMPLE_RUNS)",
            field="dataset",
        )
    if samples * runs > cap:
        raise LimitError(
            f"{samples} samples x {runs} runs = {samples * runs} evaluations per candidate, above the "
            f"limit of {cap} (OPTIFLOW_MAX_SAMPLE_RUNS)",
            field=runs_field,
        )
    if isinstance(spec, OptimizeSpec):
        for iterations in _max_iterations(spec.termination):
            if iterations > limits.max_iterations:
                raise LimitError(
                    f"{iterations} iterations, above the limit of {limits.max_iterations} "
                    "(OPTIFLOW_MAX_ITERATIONS)",
                    field="termination.max_iterations",
                )


def _max_iterations(policy: CompositePolicy) -> list[int]:
    found: list[int] = []
    for p in policy.policies:
        if isinstance(p, MaxIterationsPolicy):
            found.append(p.iterations)
        elif isinstance(p, CompositePolicy):
            found += _max_iterations(p)
    return found


__all__ = ["JobLimits", "LimitError", "check_limits"]
