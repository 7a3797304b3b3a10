"""The baseline document of a measure job: pass rate with its Wilson interval, tokens, cost,
latency percentiles; and the cron rule :func:`fails_below`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from statistics import NormalDist
from typing import Literal

from pydantic import Field

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.budget import BudgetReport
from optiflow.core.drift.report import DriftReport
from optiflow.core.evaluation import JobStats


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

    kind: Literal["measure"] = "measure"
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
    """Evaluations made: ``runs x samples``, fewer when the budget ran out (:attr:`budget`)."""
    passed: int
    errors: int
    pass_rate: float
    """Passed evaluations / evaluations (errors count as not passed)."""
    wilson: Interval
    run_pass_rates: tuple[float, ...] = ()
    """Each run's pass rate over the evaluations it made."""
    consistently_passed: int = 0
    """Samples that passed in every run (every evaluation they got)."""
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
    budget: BudgetReport | None = None
    """The job's budget and spend (a job with a budget). ``exhausted``: the measurement was cut
    and everything above is over the :attr:`evaluations` made."""
    outcomes: dict[str, str] = Field(default_factory=dict)
    """Per sample, its runs in order: ``1`` passed, ``0`` failed, ``e`` errored (what drift pairs)."""
    first_run: int = 0
    """The run index of the first run (a measure compared with a reference continues its indices)."""
    drift: DriftReport | None = None
    """What the comparison with the reference found (filled in when the job ends)."""

    @property
    def planned(self) -> int:
        """The evaluations the job meant to make (``runs x samples``)."""
        return self.runs * self.samples

    @property
    def budget_exhausted(self) -> bool:
        return self.budget is not None and self.budget.exhausted

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
