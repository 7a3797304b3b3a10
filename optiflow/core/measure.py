"""The measure job: one experiment evaluated N runs -> a baseline document (what a nightly cron runs).

One step: the tag's overrides (snapshotted at submission, like compress's baseline) written under
a temporary tag ``opt-<job>-measure`` and evaluated ``runs`` times over the samples. The
:class:`MeasureDocument` reports the pass rate over every evaluation with its Wilson score
interval, the runs' pass rates and the samples passed in every run, tokens, cost, and latency /
time-to-first-token percentiles (over answered calls). :func:`fails_below` is the cron rule: the
interval's lower bound is under a required rate.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from statistics import NormalDist
from typing import Any, Literal

from pydantic import Field, model_validator

from optiflow.core.actions import Action, EvalTarget, Fail, Finish, Step, StepResults
from optiflow.core.base import Frozen, JSONValue
from optiflow.core.checks import CheckSpec
from optiflow.core.compress import JobStats, temp_tag_prefix
from optiflow.core.dataset import Dataset, Split
from optiflow.core.evaluation import EvalResult, summarize
from optiflow.core.experiment import Experiment
from optiflow.core.model import ModelConfig
from optiflow.core.overrides import STABLE, SectionOverride, now
from optiflow.core.prompt import Prompt


class MeasureSpec(Frozen):
    kind: Literal["measure"] = "measure"
    name: str = Field(default="measure", min_length=1)
    prompt: Prompt
    dataset: Dataset
    check: CheckSpec
    model: ModelConfig
    tag: str = STABLE
    baseline_overrides: tuple[SectionOverride, ...] = ()
    """The tag's overrides, snapshotted at submission (what is measured)."""
    baseline_model_params: dict[str, JSONValue] = Field(default_factory=dict)
    runs: int = Field(default=5, ge=1, le=100)
    split: Split | None = None
    """Measure one split only (train / val / test); default every sample."""
    confidence: float = Field(default=0.95, gt=0.0, lt=1.0)
    fail_below: float | None = Field(default=None, ge=0.0, le=1.0)
    flags: dict[str, bool] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _samples(self) -> MeasureSpec:
        if not self.sample_ids():
            raise ValueError("no sample to measure" + (f" in split {self.split!r}" if self.split else ""))
        return self

    def sample_ids(self) -> tuple[str, ...]:
        return self.dataset.split(self.split).ids() if self.split else self.dataset.ids()


class Interval(Frozen):
    lower: float
    upper: float
    confidence: float


class Percentiles(Frozen):
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None


class MeasureDocument(Frozen):
    """The baseline document of one measurement."""

    job_id: str
    name: str
    prompt_ns: str
    prompt_key: str
    tag: str
    model: str
    model_params: dict[str, JSONValue] = Field(default_factory=dict)
    runs: int
    samples: int
    evaluations: int
    passed: int
    errors: int
    pass_rate: float
    """Passed evaluations / evaluations (errors count as not passed)."""
    wilson: Interval
    run_pass_rates: tuple[float, ...] = ()
    consistently_passed: int = 0
    """Samples that passed in every run."""
    failing_samples: tuple[str, ...] = ()
    """Samples that failed in at least one run."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    mean_tokens: float = 0.0
    total_cost: float = 0.0
    mean_cost: float = 0.0
    latency_ms: Percentiles = Field(default_factory=Percentiles)
    ttft_ms: Percentiles = Field(default_factory=Percentiles)
    measured_at: datetime
    fail_below: float | None = None
    stats: JobStats = Field(default_factory=JobStats)

    @property
    def failed(self) -> bool:
        """The spec's ``fail_below`` rule (False when none was given)."""
        return self.fail_below is not None and fails_below(self, self.fail_below)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> Interval:
    """Wilson score interval of a binomial proportion; ``[0, 1]`` when ``n == 0``."""
    if n <= 0:
        return Interval(lower=0.0, upper=1.0, confidence=confidence)
    if not 0 <= successes <= n:
        raise ValueError(f"successes {successes} not in [0, {n}]")
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = successes / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lower = 0.0 if successes == 0 else max(0.0, center - half)
    upper = 1.0 if successes == n else min(1.0, center + half)
    return Interval(lower=lower, upper=upper, confidence=confidence)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolation percentile (numpy's default), ``q`` in [0, 100]; None when empty."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def percentiles(values: Sequence[float]) -> Percentiles:
    return Percentiles(p50=percentile(values, 50), p95=percentile(values, 95), p99=percentile(values, 99))


def fails_below(document: MeasureDocument, rate: float) -> bool:
    """True when the pass rate's Wilson lower bound is under ``rate`` (the cron's exit rule)."""
    return document.wilson.lower < rate


class MeasureState(Frozen):
    job_id: str
    phase: Literal["measure", "done"] = "measure"
    step_index: int = 0
    started_at: datetime
    stats: JobStats = Field(default_factory=JobStats)


class MeasureWorkflow:
    def __init__(
        self, spec: MeasureSpec, job_id: str, *, clock: Callable[[], datetime] | None = None
    ) -> None:
        self.spec = spec
        self.job_id = job_id
        self.clock = clock or now

    @staticmethod
    def load_state(data: Mapping[str, Any]) -> MeasureState:
        return MeasureState.model_validate(data)

    @property
    def experiment_id(self) -> str:
        return f"{self.job_id}-measure"

    def target(self) -> EvalTarget:
        spec = self.spec
        return EvalTarget(
            experiment=Experiment(
                id=self.experiment_id,
                name="measure",
                overrides_tag=f"{temp_tag_prefix(self.job_id)}measure",
                parent_tag=spec.tag,
                flags=spec.flags,
            ),
            overrides=spec.baseline_overrides,
            model_params=dict(spec.baseline_model_params),
            sample_ids=spec.sample_ids(),
            runs=spec.runs,
        )

    def start(self, count_tokens: Callable[[str], int] | None = None) -> tuple[MeasureState, Action]:
        """``count_tokens`` is accepted for the driver's uniform call and not used."""
        state = MeasureState(job_id=self.job_id, started_at=self.clock())
        return state, Step(index=0, name="measure", targets=(self.target(),))

    def advance(self, state: MeasureState, results: StepResults) -> tuple[MeasureState, Action]:
        at = self.clock()
        state = state.model_copy(
            update={
                "stats": state.stats.add(results.evals),
                "step_index": state.step_index + 1,
                "phase": "done",
            }
        )
        if state.step_index != 1:
            return state, Fail(error="advance called on a finished measure job")
        rs = [r for r in results.evals if r.experiment_id == self.experiment_id and not r.skipped]
        if not rs:
            return state, Fail(error="measure: no evaluation result")
        if all(r.error is not None for r in rs):
            return state, Fail(error=f"measure: every evaluation failed: {rs[0].error}")
        return state, Finish(report=self.document(rs, state.stats, at))

    def document(self, results: Sequence[EvalResult], stats: JobStats, at: datetime) -> MeasureDocument:
        spec = self.spec
        ids = spec.sample_ids()
        passed = sum(1 for r in results if r.success and r.passed)
        n = len(results)
        summary = summarize(results, ids)
        by_run: dict[int, list[EvalResult]] = defaultdict(list)
        for r in results:
            by_run[r.run].append(r)
        run_rates = tuple(
            sum(1 for r in rs if r.success and r.passed) / len(ids) for _, rs in sorted(by_run.items())
        )
        answered = [r for r in results if r.success]
        prompt_tokens = sum(r.prompt_tokens for r in results)
        completion_tokens = sum(r.completion_tokens for r in results)
        cost = sum(r.cost for r in results)
        params = {**dict(spec.model.params), **spec.baseline_model_params}
        model = str(params.pop("model", spec.model.model))
        return MeasureDocument(
            job_id=self.job_id,
            name=spec.name,
            prompt_ns=spec.prompt.ns,
            prompt_key=spec.prompt.key,
            tag=spec.tag,
            model=model,
            model_params=params,
            runs=spec.runs,
            samples=len(ids),
            evaluations=n,
            passed=passed,
            errors=sum(1 for r in results if r.error is not None),
            pass_rate=passed / n,
            wilson=wilson_interval(passed, n, spec.confidence),
            run_pass_rates=run_rates,
            consistently_passed=len(summary.consistently_passed),
            failing_samples=tuple(i for i in ids if i not in summary.consistently_passed),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
            mean_tokens=(prompt_tokens + completion_tokens) / n,
            total_cost=cost,
            mean_cost=cost / n,
            latency_ms=percentiles([r.latency_ms for r in answered]),
            ttft_ms=percentiles([r.ttft_ms for r in answered if r.ttft_ms is not None]),
            measured_at=at,
            fail_below=spec.fail_below,
            stats=stats,
        )


__all__ = [
    "Interval",
    "MeasureDocument",
    "MeasureSpec",
    "MeasureState",
    "MeasureWorkflow",
    "Percentiles",
    "fails_below",
    "percentile",
    "percentiles",
    "wilson_interval",
]
