"""The measure job: one experiment evaluated N runs, a baseline document (what a nightly cron runs)."""

from __future__ import annotations

from optiflow.core.measure.report import (
    Interval,
    MeasureDocument,
    Percentiles,
    fails_below,
    percentile,
    percentiles,
    wilson_interval,
)
from optiflow.core.measure.spec import MeasureSpec
from optiflow.core.measure.workflow import MeasureState, MeasureWorkflow

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
