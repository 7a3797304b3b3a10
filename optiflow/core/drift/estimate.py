"""Tonight against the reference, as an operator reads it: the pass-rate change and an interval.

``estimate`` is the mean over samples of (tonight's pass rate - the reference's), the samples paired
(Miller, "Adding Error Bars to Evals", 2024: the spread of difficulty across samples drops out).
The interval is a normal one whose per-sample variance is ``p (1 - p) (1/r + 1/t)`` with ``p`` the
sample's pass rate over both measurements (pulled off 0 and 1), ``r`` and ``t`` its answered runs:
both sides' sampling noise, the reference's included. It is for reading, not for deciding (the
decision is the exact e-value of :mod:`.detector`): bench/drift_results.md measures its coverage.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from optiflow.core.base import Frozen
from optiflow.core.drift.detector import Tally


class Change(Frozen):
    """Tonight's pass rate minus the reference's (negative: a drop), with its interval."""

    estimate: float
    low: float
    high: float
    confidence: float
    samples: int

    @property
    def drop_bound(self) -> float:
        """The largest drop the interval allows (0 when it lies above no change)."""
        return max(0.0, -self.low)


def versus(reference: Tally, tonight: Tally, confidence: float = 0.95) -> Change:
    diffs: list[float] = []
    var = 0.0
    for rp, rr, tp, tr in zip(reference.passes, reference.runs, tonight.passes, tonight.runs, strict=True):
        if not rr or not tr:
            continue
        diffs.append(tp / tr - rp / rr)
        pooled = (rp + tp + 0.5) / (rr + tr + 1.0)
        var += pooled * (1.0 - pooled) * (1.0 / rr + 1.0 / tr)
    n = len(diffs)
    if not n:
        return Change(estimate=0.0, low=-1.0, high=1.0, confidence=confidence, samples=0)
    est = sum(diffs) / n
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    half = z * math.sqrt(var) / n
    return Change(
        estimate=est,
        low=max(-1.0, est - half),
        high=min(1.0, est + half),
        confidence=confidence,
        samples=n,
    )


__all__ = ["Change", "versus"]
