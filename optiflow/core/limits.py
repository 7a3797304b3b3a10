"""Size caps on a job (pure): how much work one document may ask for.

A job's cost is its samples x the runs a sample can get x its candidates. The runs are the most
any sample of one candidate can reach: ``eval_runs`` (``runs``), and under a sequential gate or
selection its ``max_runs`` (``gate.max_runs``, ``acceptance.max_runs``: 20,000 samples x
``max_runs: 200`` was admitted). The candidates are the most the workflow can evaluate: for
compress the baseline, the ablation, one per mutable section, the combination and the greedy sets
(``2 x sections + 2``); for optimize the baseline, ``max_candidates_per_step`` per iteration and
the held-out confirmation (``2 + iterations x per step``). :func:`check_limits` refuses a spec above
the caps with a :class:`LimitError` naming the field and the product, before anything is written.
The caps come from settings (``OPTIFLOW_MAX_SAMPLE_RUNS``, ``OPTIFLOW_MAX_JOB_EVALUATIONS``,
``OPTIFLOW_MAX_ITERATIONS``: :attr:`optiflow.settings.Settings.job_limits`), so the HTTP API and the
CLI share them.

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
    """samples x runs of one candidate's evaluation, its most runs counted (``OPTIFLOW_MAX_SAMPLE_RUNS``)"""
    max_job_evaluations: int = Field(default=1_000_000, ge=1)
    """samples x runs x candidates of a whole job (``OPTIFLOW_MAX_JOB_EVALUATIONS``)"""
    max_iterations: int = Field(default=100, ge=1)
    """the largest ``max_iterations`` termination of an optimize job (``OPTIFLOW_MAX_ITERATIONS``)"""


def check_limits(spec: CompressSpec | OptimizeSpec | MeasureSpec, limits: JobLimits) -> None:
    """Refuse ``spec`` (:class:`LimitError`, naming the field) when it exceeds ``limits``."""
    if isinstance(spec, OptimizeSpec):
        for iterations in _max_iterations(spec.termination):
            if iterations > limits.max_iterations:
                raise LimitError(
                    f"{iterations} iterations, above the limit of {limits.max_iterations} "
                    "(OPTIFLOW_MAX_ITERATIONS)",
                    field="termination.max_iterations",
                )
    samples = _samples(spec)
    cap = limits.max_sample_runs
    if samples > cap:
        raise LimitError(
            f"{samples} samples, above the limit of {cap} samples x runs (OPTIFLOW_MAX_SAMPLE_RUNS)",
            field="dataset",
        )
    for runs, runs_field in _runs(spec):  # the runs every candidate gets, then its most
        if samples * runs > cap:
            raise LimitError(
                f"{samples} samples x {runs} runs ({runs_field}) = {samples * runs:,} evaluations per "
                f"candidate, above the limit of {cap:,} (OPTIFLOW_MAX_SAMPLE_RUNS)",
                field=runs_field,
            )
    runs, runs_field = runs_per_sample(spec)
    candidates, why = max_candidates(spec)
    total = samples * runs * candidates
    if total > limits.max_job_evaluations:
        raise LimitError(
            f"{samples} samples x {runs} runs ({runs_field}) x {candidates} candidates ({why}) = {total:,} "
            f"evaluations, above the limit of {limits.max_job_evaluations:,} (OPTIFLOW_MAX_JOB_EVALUATIONS)",
            field=runs_field,
        )


def _samples(spec: CompressSpec | OptimizeSpec | MeasureSpec) -> int:
    if isinstance(spec, MeasureSpec):
        return len(spec.sample_ids())
    if isinstance(spec, OptimizeSpec):
        return len(spec.trial_ids())
    return len(spec.dataset)


def _runs(spec: CompressSpec | OptimizeSpec | MeasureSpec) -> list[tuple[int, str]]:
    if isinstance(spec, MeasureSpec):
        return [(spec.runs, "runs")]
    return [(spec.eval_runs, "eval_runs"), runs_per_sample(spec)]


def runs_per_sample(spec: CompressSpec | OptimizeSpec | MeasureSpec) -> tuple[int, str]:
    """The most runs one sample of one candidate can get, and the field that sets it."""
    if isinstance(spec, MeasureSpec):
        return spec.runs, "runs"
    if isinstance(spec, OptimizeSpec):
        acceptance = spec.acceptance
        if acceptance.sequential and acceptance.max_runs > spec.eval_runs:
            return acceptance.max_runs, "acceptance.max_runs"
        return spec.eval_runs, "eval_runs"
    if spec.gate.mode != "strict" and spec.gate.max_runs > spec.eval_runs:
        return spec.gate.max_runs, "gate.max_runs"
    return spec.eval_runs, "eval_runs"


def max_candidates(spec: CompressSpec | OptimizeSpec | MeasureSpec) -> tuple[int, str]:
    """The most candidates (the baseline included) the job can evaluate, and how that is counted."""
    if isinstance(spec, MeasureSpec):
        return 1, "one measure"
    if isinstance(spec, OptimizeSpec):
        iterations = spec.termination.max_iterations()
        per_step = spec.max_candidates_per_step
        return 2 + iterations * per_step, f"2 + {iterations} iterations x {per_step} per step"
    sections = sum(1 for s in spec.prompt.sections if not s.frozen)
    return 2 * sections + 2, f"2 x {sections} mutable sections + 2"


def _max_iterations(policy: CompositePolicy) -> list[int]:
    found: list[int] = []
    for p in policy.policies:
        if isinstance(p, MaxIterationsPolicy):
            found.append(p.iterations)
        elif isinstance(p, CompositePolicy):
            found += _max_iterations(p)
    return found


__all__ = ["JobLimits", "LimitError", "check_limits", "max_candidates", "runs_per_sample"]
