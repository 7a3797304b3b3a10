"""Evaluation arithmetic: results of one (experiment, sample, run), summaries over runs, regressions."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from pydantic import Field

from optiflow.core.base import Frozen
from optiflow.core.budget import BUDGET_EXHAUSTED


class EvalResult(Frozen):
    """One evaluation of one sample under one experiment, in one run.

    ``output`` is dropped from the copy that travels in a chord (keep chord messages small).
    ``skipped`` marks an evaluation not made (no model call), ``reason`` says why: its candidate
    had already regressed (fail-fast: ``regressed``), the job was cancelled, or its budget was
    exhausted (``budget_exhausted``); ``cached`` one answered from the eval cache without a model
    call.
    """

    experiment_id: str
    sample_id: str
    run: int = Field(ge=0)
    passed: bool = False
    score: float = 0.0
    output: str | None = None
    reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_ms: float = 0.0
    ttft_ms: float | None = None
    error: str | None = None
    cached: bool = False
    skipped: bool = False

    @property
    def budget_skipped(self) -> bool:
        """Not made because the job's budget was exhausted."""
        return self.skipped and self.reason == BUDGET_EXHAUSTED

    @property
    def success(self) -> bool:
        """The call produced an answer (as opposed to a provider error or a skip)."""
        return self.error is None and not self.skipped

    def compact(self) -> EvalResult:
        return self.model_copy(update={"output": None}) if self.output is not None else self


class EvalSummary(Frozen):
    """Seed 000: ``pass_rate`` is the mean of the runs' pass rates; ``consistently_passed``
    the ids that passed in every run."""

    pass_rate: float
    consistently_passed: frozenset[str]
    runs: int = 0


class TrialSummary(Frozen):
    total: int
    passed: int
    failed: int
    pass_rate: float
    total_cost: float
    avg_latency_ms: float
    avg_ttft_ms: float | None
    total_tokens: int


def _runs(results: Iterable[EvalResult]) -> dict[int, list[EvalResult]]:
    by_run: dict[int, list[EvalResult]] = defaultdict(list)
    for r in results:
        by_run[r.run].append(r)
    return dict(sorted(by_run.items()))


def summarize(results: Sequence[EvalResult], sample_ids: Iterable[str] | None = None) -> EvalSummary:
    """Aggregate one experiment's results over its runs (seed 000's ``EvalSummary.from_reports``).

    ``sample_ids``, when given, is the dataset: a sample with no result in a run counts as not
    passed in that run and the pass rate is over the whole dataset.
    """
    by_run = _runs(results)
    if not by_run:
        return EvalSummary(pass_rate=0.0, consistently_passed=frozenset(), runs=0)
    ids = frozenset(sample_ids) if sample_ids is not None else None
    rates: list[float] = []
    passed_sets: list[frozenset[str]] = []
    for run_results in by_run.values():
        passed = frozenset(r.sample_id for r in run_results if r.success and r.passed)
        total = len(ids) if ids is not None else len(run_results)
        rates.append(len(passed) / total if total else 0.0)
        passed_sets.append(passed)
    return EvalSummary(
        pass_rate=sum(rates) / len(rates),
        consistently_passed=frozenset.intersection(*passed_sets),
        runs=len(by_run),
    )


def regressions(baseline_passed: frozenset[str], candidate: EvalSummary) -> frozenset[str]:
    """Samples that passed in every baseline run but not in every candidate run."""
    return baseline_passed - candidate.consistently_passed


def regressed_ids(baseline_passed: frozenset[str], results: Iterable[EvalResult]) -> frozenset[str]:
    """Baseline-passed samples that failed in at least one of ``results`` (a lower bound on the
    regressions while evaluation is still running; the exact set once every run is in)."""
    return frozenset(
        r.sample_id
        for r in results
        if r.sample_id in baseline_passed and not r.skipped and not (r.success and r.passed)
    )


def trial_summary(results: Sequence[EvalResult]) -> TrialSummary:
    done = [r for r in results if not r.skipped]
    passed = sum(1 for r in done if r.success and r.passed)
    ttfts = [r.ttft_ms for r in done if r.ttft_ms is not None]
    return TrialSummary(
        total=len(done),
        passed=passed,
        failed=len(done) - passed,
        pass_rate=passed / len(done) if done else 0.0,
        total_cost=sum(r.cost for r in done),
        avg_latency_ms=sum(r.latency_ms for r in done) / len(done) if done else 0.0,
        avg_ttft_ms=sum(ttfts) / len(ttfts) if ttfts else None,
        total_tokens=sum(r.prompt_tokens + r.completion_tokens for r in done),
    )


class JobStats(Frozen):
    """What the job cost: model calls made, evaluations the cache answered, fail-fast skips,
    evaluations skipped because the job's budget was exhausted."""

    evaluations: int = 0
    model_calls: int = 0
    cache_hits: int = 0
    fail_fast_skipped: int = 0
    budget_skipped: int = 0
    proposal_calls: int = 0
    errors: int = 0
    steps: int = 0

    def add(self, results: Iterable[EvalResult], *, proposals: int = 0) -> JobStats:
        rs = list(results)
        return JobStats(
            evaluations=self.evaluations + len(rs),
            model_calls=self.model_calls + sum(1 for r in rs if not r.cached and not r.skipped),
            cache_hits=self.cache_hits + sum(1 for r in rs if r.cached),
            fail_fast_skipped=self.fail_fast_skipped
            + sum(1 for r in rs if r.skipped and not r.budget_skipped),
            budget_skipped=self.budget_skipped + sum(1 for r in rs if r.budget_skipped),
            proposal_calls=self.proposal_calls + proposals,
            errors=self.errors + sum(1 for r in rs if r.error is not None),
            steps=self.steps + 1,
        )
