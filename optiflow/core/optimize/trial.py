"""Candidates and trials: one accepted candidate's identity, and its normalized evaluation result.

A :class:`Candidate` is what the materializer makes of an accepted proposal: an id, an overrides
tag (the seed's ``mask_id``) and an experiment. A :class:`TrialResult` is what the aggregator
makes of that experiment's evaluations (seed 001 §8.9): a status, the objective score and a
:class:`~optiflow.core.evaluation.TrialSummary`, plus what the optimizers and the acceptance test
need (the configuration, per-sample values, failing samples).

With train / validation splits, ``objective_score`` and ``summary`` are the train set's (what the
optimizer sees) and ``validation_*`` the validation set's (what acceptance decides on).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import Field

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.dataset import Dataset
from optiflow.core.evaluation import EvalResult, TrialSummary, trial_summary
from optiflow.core.optimize.configuration import Configuration
from optiflow.core.optimize.scoring import ScorerSpec
from optiflow.core.optimize.selection import SelectionFigures

TrialStatus = Literal["completed", "failed", "cancelled", "timeout"]
SampleMetric = Literal["score", "tokens", "cost", "latency"]


class Candidate(Frozen):
    """An accepted, materialized candidate (seed 001's candidate_id + mask_id)."""

    candidate_id: str
    mask_id: str
    experiment_id: str
    step_index: int = Field(ge=0)
    iteration: int = Field(ge=0)
    configuration: Configuration
    config_hash: str
    parent_candidate_ids: tuple[str, ...] = ()
    rationale: str | None = None


class FailingSample(Frozen):
    """A sample a trial did not pass in every run. ``input`` only for the first few."""

    sample_id: str
    tags: tuple[str, ...] = ()
    expected: JSONValue = None
    input: JSONValue = None
    reason: str = ""


class TrialResult(Frozen):
    optimization_id: str
    candidate_id: str
    mask_id: str
    experiment_id: str
    step_index: int = Field(ge=0)
    iteration: int = Field(ge=0)
    status: TrialStatus
    objective_score: float | None
    summary: TrialSummary
    error: str | None = None
    configuration: Configuration
    config_hash: str
    parent_candidate_ids: tuple[str, ...] = ()
    rationale: str | None = None
    validation_score: float | None = None
    validation_summary: TrialSummary | None = None
    sample_values: dict[str, float] = Field(default_factory=dict)
    accepted: bool = False
    p_value: float | None = None
    selection: SelectionFigures | None = None
    """The paired decision's figures (paired rule): verdict, e-values, interval, runs, outcomes."""
    failing: tuple[FailingSample, ...] = ()

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @property
    def acceptance_score(self) -> float | None:
        """The score acceptance compares: validation's with splits, else the objective score."""
        return self.validation_score if self.validation_summary is not None else self.objective_score

    @property
    def acceptance_summary(self) -> TrialSummary:
        return self.validation_summary if self.validation_summary is not None else self.summary

    @property
    def total_tokens(self) -> int:
        extra = self.validation_summary.total_tokens if self.validation_summary else 0
        return self.summary.total_tokens + extra

    @property
    def total_cost(self) -> float:
        extra = self.validation_summary.total_cost if self.validation_summary else 0.0
        return self.summary.total_cost + extra


def sample_values(results: Iterable[EvalResult], metric: SampleMetric = "score") -> dict[str, float]:
    """Per-sample mean over runs of ``metric`` (``score``: the check score, 0 for an error)."""
    acc: dict[str, list[float]] = defaultdict(list)
    for r in results:
        if r.skipped:
            continue
        if metric == "score":
            acc[r.sample_id].append(r.score if r.success else 0.0)
        elif r.success:
            value = {
                "tokens": float(r.prompt_tokens + r.completion_tokens),
                "cost": r.cost,
                "latency": r.latency_ms,
            }[metric]
            acc[r.sample_id].append(value)
    return {sid: sum(v) / len(v) for sid, v in sorted(acc.items()) if v}


def failing_samples(
    results: Sequence[EvalResult], sample_ids: Sequence[str], dataset: Dataset, max_examples: int
) -> tuple[FailingSample, ...]:
    """Samples of ``sample_ids`` that did not pass in every run (or have no result), in order."""
    by_sample: dict[str, list[EvalResult]] = defaultdict(list)
    for r in results:
        by_sample[r.sample_id].append(r)
    out: list[FailingSample] = []
    for sid in sample_ids:
        rs = by_sample.get(sid, [])
        if rs and all(r.success and r.passed for r in rs):
            continue
        sample = dataset.by_id(sid)
        reason = next((r.error or r.reason for r in rs if not (r.success and r.passed)), "no result")
        out.append(
            FailingSample(
                sample_id=sid,
                tags=sample.tags,
                expected=sample.expected,
                input=sample.input if len(out) < max_examples else None,
                reason=reason or "",
            )
        )
    return tuple(out)


def build_trial(
    candidate: Candidate,
    *,
    optimization_id: str,
    results: Sequence[EvalResult],
    train_ids: Sequence[str],
    validation_ids: Sequence[str] | None,
    dataset: Dataset,
    scorer: ScorerSpec,
    metric: SampleMetric = "score",
    max_examples: int = 8,
) -> TrialResult:
    """Normalize one candidate's evaluations into a :class:`TrialResult`.

    ``failed`` when nothing was evaluated or every evaluation errored (a partial error is a
    failing evaluation of a completed trial). ``validation_ids`` None: no split, the acceptance
    set is the train set.
    """
    done = [r for r in results if not r.skipped]
    train = set(train_ids)
    train_rs = [r for r in done if r.sample_id in train]
    val = set(validation_ids) if validation_ids is not None else None
    val_rs = [r for r in done if val is not None and r.sample_id in val]
    summary = trial_summary(train_rs)
    v_summary = trial_summary(val_rs) if val is not None else None
    failed = not done or all(r.error is not None for r in done)
    error = None
    if failed:
        error = next((r.error for r in done if r.error), None) or "no evaluation result"
    accept_rs = val_rs if val is not None else train_rs
    return TrialResult(
        optimization_id=optimization_id,
        candidate_id=candidate.candidate_id,
        mask_id=candidate.mask_id,
        experiment_id=candidate.experiment_id,
        step_index=candidate.step_index,
        iteration=candidate.iteration,
        status="failed" if failed else "completed",
        objective_score=None if failed else scorer.score(summary),
        summary=summary,
        error=error,
        configuration=candidate.configuration,
        config_hash=candidate.config_hash,
        parent_candidate_ids=candidate.parent_candidate_ids,
        rationale=candidate.rationale,
        validation_score=None if failed or v_summary is None else scorer.score(v_summary),
        validation_summary=v_summary,
        sample_values=sample_values(accept_rs, metric),
        failing=() if failed else failing_samples(train_rs, train_ids, dataset, max_examples),
    )


__all__ = [
    "Candidate",
    "FailingSample",
    "SampleMetric",
    "TrialResult",
    "TrialStatus",
    "build_trial",
    "failing_samples",
    "sample_values",
]
