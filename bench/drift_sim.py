"""The nightly drift detector vectorized over simulated years (numpy), for ``make bench-drift``.

:class:`Years` holds many simulated years of one scenario at once: per-sample pass probabilities
drawn from a ``sim_pass_dist`` shape (the simulated model's noise mode), a reference of ``r0`` runs,
then nights of ``r`` runs; each run an independent draw with the sample's probability, as the
simulated provider draws them (:mod:`optiflow.llm.noise`). :func:`detector_log_e` is
:func:`optiflow.core.drift.detector.evidence`'s drop e-value in numpy, line for line (same windows,
weights, alternatives); ``bench/drift.py`` checks the two agree on every configuration before it
trusts a number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import gammaln

from optiflow.core.drift.conditional import BROKEN_SHARE, BROKEN_THETA, BROKEN_WEIGHT, SHIFTS
from optiflow.core.drift.detector import window_weights
from optiflow.core.gate.power import drop_rates
from optiflow.core.optimize.selection import alpha_at
from optiflow.llm.noise import parse_pass_dist


def draw_rates(dist: str, years: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Per-sample pass probabilities ``(years, n)`` from a ``sim_pass_dist`` mixture."""
    comps = parse_pass_dist(dist)
    pick = rng.random((years, n))
    out = np.zeros((years, n))
    acc = 0.0
    chosen = np.full((years, n), len(comps) - 1)
    for j, c in enumerate(comps):
        hit = (pick >= acc) & (pick < acc + c.weight)
        chosen[hit] = j
        acc += c.weight
    for j, c in enumerate(comps):
        mask = chosen == j
        if c.kind == "fixed":
            out[mask] = c.params[0]
        else:
            out[mask] = rng.beta(c.params[0], c.params[1], size=int(mask.sum()))
    return out


def dropped(rates: np.ndarray, drop: float, model: str) -> np.ndarray:
    """Each year's rates after a drop of ``drop`` (core's :func:`drop_rates`: ``removal`` fails a
    spread-out set of samples outright, ``proportional`` takes the same share from every sample)."""
    if drop <= 0:
        return rates.copy()
    return np.array([drop_rates(list(row), drop, model) for row in rates])  # type: ignore[arg-type]


@dataclass
class Years:
    """Counts of every simulated year so far: ``ref`` ``(Y, n)`` passes of ``r0`` runs, ``nights``
    a list of ``(Y, n)`` passes of ``r`` runs, ``runs`` (run-level outcomes, for the paired naive
    rule) kept when ``keep_runs``."""

    r0: int
    r: int
    ref: np.ndarray
    ref_runs: np.ndarray | None = None
    cum: list[np.ndarray] = field(default_factory=list)  # cum[k] = passes of nights 1..k (cum[0] = 0)
    night_runs: list[np.ndarray] = field(default_factory=list)

    @classmethod
    def start(cls, p: np.ndarray, r0: int, r: int, rng: np.random.Generator, keep_runs: bool) -> Years:
        runs = rng.random((*p.shape, r0)) < p[..., None]
        return cls(
            r0=r0,
            r=r,
            ref=runs.sum(-1),
            ref_runs=runs if keep_runs else None,
            cum=[np.zeros(p.shape, dtype=np.int64)],
        )

    def night(self, p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        runs = rng.random((*p.shape, self.r)) < p[..., None]
        passes = runs.sum(-1)
        self.cum.append(self.cum[-1] + passes)
        if self.ref_runs is not None:
            self.night_runs.append(runs)
        return passes

    @property
    def k(self) -> int:
        return len(self.cum) - 1


_LF = gammaln(np.arange(0, 200_000) + 1.0)


def _lchoose(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _LF[a] - _LF[b] - _LF[a - b]


def _logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    top = np.max(x, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    return np.squeeze(top, axis) + np.log(np.sum(np.exp(x - top), axis=axis))


def _tables(
    total: int, m: int, margin: float, ks: np.ndarray
) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
    """For each ``K`` in ``ks``, under ``HG(total, K, m)``: per shift alternative its ``theta`` and
    ``log E[exp(-theta W)]``, and ``log E[exp(-3 W)]``. The e-values depend on a sample only through
    ``(K, W)``, so a night's years and samples are gathers from these. Each row spans its support
    only (``low(K) + j``, at most ``min(m, total - m) + 1`` points)."""
    k = ks[:, None]
    low = np.maximum(0, m - (total - k))
    x = low + np.arange(min(m, total - m) + 1)[None, :]
    valid = (x <= np.minimum(m, k)) & (m - x <= total - k)
    xs = np.clip(x, 0, k)
    ys = np.clip(m - x, 0, total - k)
    lp = np.where(
        valid, _lchoose(k, xs) + _lchoose(total - k, ys) - _lchoose(np.array(total), np.array(m)), -np.inf
    )
    rate = (ks + 0.5) / (total + 1.0)
    shifts = []
    for how, multiple, _ in SHIFTS:
        if how == "points":
            drop = np.minimum(margin * multiple, rate / 2.0)
        else:
            drop = rate * min(0.5, margin * multiple)
        theta = np.log(rate / (1 - rate)) - np.log((rate - drop) / (1 - rate + drop))
        shifts.append((theta, _logsumexp(lp - theta[:, None] * x, axis=-1)))
    return shifts, _logsumexp(lp - BROKEN_THETA * x, axis=-1)


def _window_log_e(w_pass: np.ndarray, k_pass: np.ndarray, total: int, m: int, margin: float) -> np.ndarray:
    """The window's mixed log e-value per year (``(Y,)``): core's ``Direction.mixed`` for drops."""
    ks, at = np.unique(k_pass, return_inverse=True)
    at = at.reshape(k_pass.shape)
    shifts, log_b = _tables(total, m, margin, ks)
    parts = []
    for (theta, log_m), (_, _, weight) in zip(shifts, SHIFTS, strict=True):
        parts.append(math.log(weight) + (-theta[at] * w_pass - log_m[at]).sum(-1))
    broken_one = -BROKEN_THETA * w_pass - log_b[at]
    keep, share = math.log1p(-BROKEN_SHARE), math.log(BROKEN_SHARE)
    parts.append(math.log(BROKEN_WEIGHT) + np.logaddexp(keep, share + broken_one).sum(-1))
    return _logsumexp(np.stack(parts), axis=0)


def detector_log_e(years: Years, margin: float) -> np.ndarray:
    """Tonight's (night ``years.k``) log e-value of a drop, per year."""
    k = years.k
    total_k = years.ref + years.cum[k]
    total = years.r0 + k * years.r
    parts = []
    for w, weight in window_weights(k).items():
        w_pass = years.cum[k] - years.cum[k - w]
        parts.append(math.log(weight) + _window_log_e(w_pass, total_k, total, w * years.r, margin))
    return _logsumexp(np.stack(parts), axis=0)


def threshold(alpha: float, k: int) -> float:
    return math.log(1.0 / alpha_at(alpha, k))


# -- the naive rules -----------------------------------------------------------------------------
def wilson_lower(passes: np.ndarray, n: int, z: float = 1.959963984540054) -> np.ndarray:
    p = passes / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return np.where(passes == 0, 0.0, np.maximum(0.0, center - half))


def versus(
    ref: np.ndarray, r0: int, tonight: np.ndarray, r: int, z: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """core's :func:`optiflow.core.drift.estimate.versus` per year: (estimate, low, high)."""
    n = ref.shape[-1]
    diff = (tonight / r - ref / r0).mean(-1)
    pooled = (ref + tonight + 0.5) / (r0 + r + 1.0)
    var = (pooled * (1 - pooled) * (1.0 / r0 + 1.0 / r)).sum(-1)
    half = z * np.sqrt(var) / n
    return diff, np.maximum(-1.0, diff - half), np.minimum(1.0, diff + half)


__all__ = ["Years", "detector_log_e", "draw_rates", "dropped", "threshold", "versus", "wilson_lower"]


def oracle_power(
    dist: str,
    drop: float,
    model: str,
    *,
    n: int,
    runs: int,
    nights: int,
    years: int,
    levels: dict[str, float],
    rng: np.random.Generator,
    draws: int = 400,
) -> dict[str, float]:
    """The power of the best possible test of the ``nights`` nights after a drop at each level: the
    Neyman-Pearson test of the true rates after the drop against the true rates before, for an
    oracle that knows every sample's rate, the drop's pattern and its night. Its threshold at level
    ``a`` is set per year by importance sampling from the alternative (``P0(LLR >= t) =
    E1[exp(-LLR); LLR >= t]``, accurate far into the tail). A detector whose false-alarm chance on
    that night is at most ``a`` (with this spending: ``alpha_k``) cannot be more powerful."""
    p = draw_rates(dist, years, n, rng)
    q = dropped(p, drop, model)
    tiny = 1e-300
    a = np.log(np.clip(q, tiny, 1)) - np.log(np.clip(p, tiny, 1))  # per pass
    b = np.log(np.clip(1 - q, tiny, 1)) - np.log(np.clip(1 - p, tiny, 1))  # per failure
    m = runs * nights
    power = dict.fromkeys(levels, 0.0)
    for y in range(years):
        alt = rng.binomial(m, q[y], size=(draws, n))
        llr = (np.where(alt > 0, alt * a[y], 0.0) + np.where(m - alt > 0, (m - alt) * b[y], 0.0)).sum(-1)
        order = np.sort(llr)[::-1]
        tail = np.cumsum(np.exp(-order)) / draws  # P0(LLR >= order[i]), estimated from the alternative
        for name, level in levels.items():
            inside = int(np.searchsorted(tail, level, side="right"))  # the largest region of size <= level
            power[name] += inside / draws
    return {name: v / years for name, v in power.items()}
