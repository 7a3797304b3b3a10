"""Exact conditional e-values: did a window of runs pass less often than the runs before it?

One sample, two groups of its answered runs: ``before`` (the reference and the nights before the
window) and ``window`` (the last nights). If nothing changed, every one of the sample's runs is an
independent draw with the same pass probability ``p``, whatever ``p`` is. Given ``K``, the passes
among all ``N`` runs, which ``K`` of the ``N`` runs passed is then uniform, so the window's passes
``W`` (``m`` runs) follow the hypergeometric law ``HG(N, K, m)`` exactly, with no ``p`` left in it.
That is why a lucky reference cannot fool this test: the reference's runs are in ``N`` and ``K``
like every other run, and the law of ``W`` given ``K`` holds whatever the reference drew.

For any ``theta`` (it may depend on ``K``: it is fixed once ``K`` is), ``e = exp(-theta W) /
E[exp(-theta W) | K]`` has conditional expectation exactly 1: the likelihood ratio of Fisher's
noncentral hypergeometric law (the window's odds of passing ``exp(-theta)`` times the others')
against the central one. The samples are independent given their ``K``'s, so products over samples
of such factors, and averages of those products, have expectation 1 too.

Everything here works in logs; :func:`HyperGeometric` computes the law once per (sample, window) and
both directions (a drop: fewer passes; a gain: fewer failures) use it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

BROKEN_THETA = 3.0
"""The log odds ratio of a sample that broke (odds of passing ~20 times lower)."""
BROKEN_SHARE = 0.10
"""The prior share of samples that broke, in the per-sample mixture of :func:`log_evidence`."""
SHIFTS = (("points", 1.0, 0.25), ("points", 0.5, 0.15), ("points", 2.0, 0.10), ("share", 2.0, 0.25))
"""The *shift* alternatives: (how, multiple of the margin, prior weight). ``points``: every sample
loses ``multiple x margin`` of its pass rate (half of it when it has less than twice that);
``share``: every sample loses the same share of its rate, ``multiple x margin`` of it (2 x 10% =
a fifth: the margin's 10 points at a pass rate of 50%), which fits a drop spread in proportion to
the rates. A bet sized for a drop ``d`` gains nothing on a true drop of ``d / 2``, so one size alone
would leave drops under half the margin unseen for ever."""
BROKEN_WEIGHT = 0.25
"""The prior weight of the *broken* alternative (the weights sum to 1)."""


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    if top == -math.inf:
        return top
    return top + math.log(sum(math.exp(v - top) for v in values))


@dataclass(frozen=True, slots=True)
class HyperGeometric:
    """``HG(total, passes, drawn)``: the passes among ``drawn`` runs taken at random from ``total``
    runs of which ``passes`` passed. ``log_pmf[j]`` is the log probability of ``low + j`` passes."""

    low: int
    log_pmf: tuple[float, ...]

    @classmethod
    def of(cls, total: int, passes: int, drawn: int) -> HyperGeometric:
        if not 0 <= passes <= total or not 0 <= drawn <= total:
            raise ValueError(f"HG({total}, {passes}, {drawn}) is not a law")
        low, high = max(0, drawn - (total - passes)), min(drawn, passes)
        first = (
            _log_choose(passes, low) + _log_choose(total - passes, drawn - low) - _log_choose(total, drawn)
        )
        out = [first]
        for x in range(low, high):  # P(x+1) / P(x), exact and cheap
            ratio = (passes - x) * (drawn - x) / ((x + 1) * (total - passes - drawn + x + 1))
            out.append(out[-1] + math.log(ratio))
        return cls(low, tuple(out))

    @property
    def high(self) -> int:
        return self.low + len(self.log_pmf) - 1

    def log_mgf(self, theta: float) -> float:
        """``log E[exp(-theta W)]``."""
        return _logsumexp([lp - theta * (self.low + j) for j, lp in enumerate(self.log_pmf)])

    def log_mgf_of_failures(self, theta: float, drawn: int) -> float:
        """``log E[exp(-theta (drawn - W))]``: the same for the window's failures."""
        return _logsumexp([lp - theta * (drawn - self.low - j) for j, lp in enumerate(self.log_pmf)])

    def log_cdf(self, value: int) -> float:
        """``log P(W <= value)``."""
        if value < self.low:
            return -math.inf
        return _logsumexp(list(self.log_pmf[: value - self.low + 1]))

    def mean_var(self) -> tuple[float, float]:
        ps = [math.exp(lp) for lp in self.log_pmf]
        mean = sum(p * (self.low + j) for j, p in enumerate(ps))
        second = sum(p * (self.low + j) ** 2 for j, p in enumerate(ps))
        return mean, max(0.0, second - mean * mean)


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def shift_theta(rate: float, margin: float, how: str = "points") -> float:
    """The log odds ratio of a sample passing at ``rate`` that loses ``margin`` of it (``points``;
    half of it when it has less than ``2 margin``) or that share of it (``share``, at most half)."""
    drop = min(margin, rate / 2.0) if how == "points" else rate * min(0.5, margin)
    return logit(rate) - logit(rate - drop)


@dataclass(frozen=True, slots=True)
class SampleWindow:
    """One sample's runs on both sides of a window: ``(passes, answered)`` before and inside."""

    before_passes: int
    before_runs: int
    window_passes: int
    window_runs: int

    @property
    def law(self) -> HyperGeometric:
        total = self.before_runs + self.window_runs
        passes = self.before_passes + self.window_passes
        return HyperGeometric.of(total, passes, self.window_runs)

    @property
    def pooled_rate(self) -> float:
        """The pass rate over both sides, pulled off 0 and 1 (a tuning input: it is fixed by ``K``)."""
        total = self.before_runs + self.window_runs
        return (self.before_passes + self.window_passes + 0.5) / (total + 1.0)


@dataclass(frozen=True, slots=True)
class Direction:
    """The log e-values of one window in one direction: each *shift* alternative (every sample
    loses part of its rate, :data:`SHIFTS`), the *broken* one (each sample broke with prior
    probability :data:`BROKEN_SHARE`), and per sample the log e-value of the margin-sized shift
    factor (what ranks the samples that flipped)."""

    shifts: tuple[float, ...]
    broken: float
    per_sample: tuple[float, ...]

    @property
    def mixed(self) -> float:
        """``log(sum of weight x e-value)`` over :data:`SHIFTS` and the broken alternative."""
        parts = [math.log(w) + le for (_, _, w), le in zip(SHIFTS, self.shifts, strict=True)]
        return _logsumexp([*parts, math.log(BROKEN_WEIGHT) + self.broken])


def _side(law: HyperGeometric, rate: float, value: int, margin: float, drawn: int | None) -> list[float]:
    """Per shift alternative and then the broken one, this sample's log e-value: ``value`` counts
    the outcomes that get rarer (passes for a drop; failures of ``drawn`` runs for a gain, when
    ``drawn`` is given), ``rate`` their pooled rate."""

    def mgf(theta: float) -> float:
        return law.log_mgf(theta) if drawn is None else law.log_mgf_of_failures(theta, drawn)

    out = []
    for how, multiple, _ in SHIFTS:
        theta = shift_theta(rate, margin * multiple, how)
        out.append(-theta * value - mgf(theta))
    out.append(-BROKEN_THETA * value - mgf(BROKEN_THETA))
    return out


def log_evidence(samples: Sequence[SampleWindow], margin: float) -> tuple[Direction, Direction]:
    """(drop, gain): the window's exact conditional log e-values against "no change", for a
    window that passes less often (drop) and one that fails less often (gain)."""
    k = len(SHIFTS)
    sums = {"drop": [0.0] * (k + 1), "gain": [0.0] * (k + 1)}
    per: dict[str, list[float]] = {"drop": [], "gain": []}
    log_keep, log_share = math.log1p(-BROKEN_SHARE), math.log(BROKEN_SHARE)
    for s in samples:
        if s.window_runs == 0 or s.before_runs == 0:
            per["drop"].append(0.0)
            per["gain"].append(0.0)
            continue
        law = s.law
        w, m = s.window_passes, s.window_runs
        sides = {
            "drop": _side(law, s.pooled_rate, w, margin, None),
            "gain": _side(law, 1.0 - s.pooled_rate, m - w, margin, m),
        }
        for name, values in sides.items():
            for j in range(k):
                sums[name][j] += values[j]
            sums[name][k] += _logsumexp([log_keep, log_share + values[k]])
            per[name].append(values[0])
    return (
        Direction(tuple(sums["drop"][:k]), sums["drop"][k], tuple(per["drop"])),
        Direction(tuple(sums["gain"][:k]), sums["gain"][k], tuple(per["gain"])),
    )


__all__ = [
    "BROKEN_SHARE",
    "BROKEN_THETA",
    "BROKEN_WEIGHT",
    "SHIFTS",
    "Direction",
    "HyperGeometric",
    "SampleWindow",
    "log_evidence",
    "logit",
    "shift_theta",
]
