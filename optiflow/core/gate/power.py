"""What the paired gate will do: its operating curve, the drop it can resolve, the fixed design.

:func:`predict` computes, for per-sample pass probabilities ``p`` (baseline) and ``q`` (candidate),
the probability that the sequential gate accepts, rejects early or stops undecided at the cap, and
how many runs it pays. It follows the gate's own procedure block by block: the block's sum of pair
differences ``S`` has an exact distribution (the convolution of the samples' three-point
distributions); each block moves the accept e-process's log wealth by ``a_k S + c_k`` with the
block's bet ``lam_k`` taken at its expected value and the block's count of discordant pairs at its
mean (its spread moves the wealth about 0.5% as much as ``S`` does). The continuing paths are
carried on a grid (one step per unit of ``S``) and absorbed at the thresholds exactly as the gate
absorbs them. It is a prediction for planning and for the report; the decisions themselves rest on
Ville's inequality, not on it.

**Its cost is bounded** (issue 27: one prediction at 20,000 samples took 62 s, and the thirteen of
:func:`detectable_drop` ran a control worker into its time limit). Up to :data:`EXACT_SAMPLES`
samples ``S``'s distribution is the exact convolution; above, the normal distribution with ``S``'s
exact mean and variance, on its integer points (a sum of hundreds of independent three-point
variables). The support is merged into at most :data:`MAX_SUPPORT` points (each bin's mass at its
mean), and the grid of continuing paths doubles its step whenever it would hold more than
:data:`MAX_CELLS` cells (a cell's mass split between its two neighbours, as every step splits it).
A prediction therefore takes ``O(n)`` for the samples plus at most ``max_runs x MAX_CELLS x
MAX_SUPPORT`` grid steps (:func:`step_bound`), whatever ``n`` and the margin; on the sizes the
benches use (48 samples, ``max_runs`` 24) nothing is merged and the figures are unchanged.

:func:`operating_curve` is the gate's statement as a function of the true drop, for a drop that
falls on the samples an edit breaks (:func:`drop_rates`); :func:`estimate_rates` turns
a baseline's runs into the per-sample rates it uses (shrunk so the spread matches the unbiased
estimate of the per-sample variance: three runs make raw rates look more spread than they are).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Literal

from pydantic import Field

from optiflow.core.base import Frozen
from optiflow.core.gate.eprocess import PRIOR_VARIANCE, bet
from optiflow.core.gate.outcomes import Outcomes
from optiflow.core.gate.spec import GateSpec

_TINY = 1e-12
EXACT_SAMPLES = 200
"""Up to this many samples the block sum's distribution is the exact convolution (``O(n^2)``)."""
MAX_SUPPORT = 72
"""The most points the block sum's distribution keeps (48 flaky samples have about 63)."""
MAX_CELLS = 160
"""The most grid cells the continuing paths are carried on."""


class OperatingPoint(Frozen):
    """The gate's predicted behaviour at one true drop (``baseline - candidate`` pass rate)."""

    drop: float
    accept: float = Field(ge=0.0, le=1.0)
    reject: float = Field(ge=0.0, le=1.0, description="rejected early by the reject e-process")
    capped: float = Field(ge=0.0, le=1.0, description="undecided at max_runs (not accepted)")
    blocks: float = Field(description="expected pairs per sample used by the decision")
    runs: float = Field(description="expected runs per sample and side paid (whole rounds)")

    @property
    def rejection(self) -> float:
        """Probability the candidate is not accepted (early rejection or the cap)."""
        return 1.0 - self.accept


def block_distribution(p: Sequence[float], q: Sequence[float]) -> list[float]:
    """``P(S = s)`` for ``s = -n..n`` (index ``s + n``), ``S`` one block's sum of ``X - Y``."""
    dist = [1.0]
    for pi, qi in zip(p, q, strict=True):
        up, down = pi * (1.0 - qi), (1.0 - pi) * qi
        flat = 1.0 - up - down
        new = [0.0] * (len(dist) + 2)
        for j, w in enumerate(dist):
            if w:
                new[j] += w * down
                new[j + 1] += w * flat
                new[j + 2] += w * up
        dist = new
    return dist


def _paid(spec: GateSpec, blocks: int) -> int:
    if blocks <= spec.first_runs:
        return spec.first_runs
    rounds = -(-(blocks - spec.first_runs) // spec.round_runs)
    return min(spec.max_runs, spec.first_runs + rounds * spec.round_runs)


def step_bound(spec: GateSpec) -> int:
    """The most grid steps one :func:`predict` takes besides its ``O(n)`` pass over the samples."""
    return spec.max_runs * MAX_CELLS * MAX_SUPPORT


def _normal(mean: float, variance: float, n: int) -> list[tuple[float, float]]:
    """``S``'s distribution as a normal one on its integer points (``O(sd)`` points)."""
    sd = math.sqrt(max(variance, _TINY))
    dist = NormalDist(mean, sd)
    lo, hi = max(-n, math.floor(mean - 8 * sd)), min(n, math.ceil(mean + 8 * sd))
    points = [(float(s), dist.cdf(s + 0.5) - dist.cdf(s - 0.5)) for s in range(lo, hi + 1)]
    points = [(s, w) for s, w in points if w > _TINY]
    total = sum(w for _, w in points) or 1.0
    return [(s, w / total) for s, w in points]


def _support(p: Sequence[float], q: Sequence[float]) -> list[tuple[float, float]]:
    """(value, probability) of one block's ``S``, merged into at most :data:`MAX_SUPPORT` points."""
    n = len(p)
    if n <= EXACT_SAMPLES:
        points = [(float(s - n), w) for s, w in enumerate(block_distribution(p, q)) if w > _TINY]
    else:
        mean = variance = 0.0
        for pi, qi in zip(p, q, strict=True):
            up, down = pi * (1.0 - qi), (1.0 - pi) * qi
            mean += up - down
            variance += up + down - (up - down) ** 2
        points = _normal(mean, variance, n)
    if len(points) <= MAX_SUPPORT:
        return points
    size = -(-len(points) // MAX_SUPPORT)
    merged = []
    for i in range(0, len(points), size):
        chunk = points[i : i + size]
        mass = sum(w for _, w in chunk)
        merged.append((sum(s * w for s, w in chunk) / mass, mass))
    return merged


def _coarser(state: dict[int, float]) -> dict[int, float]:
    """The cells on a grid of twice the step: an odd cell's mass split between its neighbours."""
    out: dict[int, float] = {}
    for g, w in state.items():
        half, odd = divmod(g, 2)
        if odd:
            out[half] = out.get(half, 0.0) + w / 2
            out[half + 1] = out.get(half + 1, 0.0) + w / 2
        else:
            out[half] = out.get(half, 0.0) + w
    return out


def predict(spec: GateSpec, p: Sequence[float], q: Sequence[float]) -> OperatingPoint:
    """The paired gate's operating point for these per-sample probabilities (see the module)."""
    return _predict(spec, p, q)[0]


def _predict(spec: GateSpec, p: Sequence[float], q: Sequence[float]) -> tuple[OperatingPoint, int]:
    """:func:`predict`, and the grid steps it took (at most :func:`step_bound`)."""
    n = len(p)
    if n == 0:
        raise ValueError("no samples")
    drop = (sum(p) - sum(q)) / n
    support = _support(p, q)
    mean = sum((pi - qi) for pi, qi in zip(p, q, strict=True)) / n
    second = sum(pi * (1 - qi) + (1 - pi) * qi for pi, qi in zip(p, q, strict=True)) / n
    centered = max(0.0, second - mean * mean)
    discordant = n * second
    m, top_a, top_r = spec.margin, math.log(1 / spec.alpha), math.log(1 / spec.beta)

    steps = []  # (a_k, c_k, a'_k, c'_k) of every block
    for k in range(1, spec.max_runs + 1):
        lam = bet((PRIOR_VARIANCE + (k - 1) * centered) / k, m)
        lo, mid, hi = math.log1p(lam * (m - 1)), math.log1p(lam * m), math.log1p(lam * (m + 1))
        rp, rm = math.log1p(lam), math.log1p(-lam)
        acc_const = discordant * ((lo + hi) / 2 - mid) + n * mid
        steps.append(((lo - hi) / 2, acc_const, (rp - rm) / 2, discordant * (rp + rm) / 2))
    unit = steps[-1][0]  # grid step: one unit of S at the last bet (a_k < 0)
    ratio = steps[-1][2] / unit  # reject's coefficient per unit of the accept's (< 0)

    state: dict[int, float] = {0: 1.0}  # grid index -> probability of still running there
    step = 1.0  # the grid's step in units of y (doubled whenever the grid would grow too wide)
    taken = 0
    acc_c = rej_c = 0.0
    accept = reject = blocks = runs = 0.0
    for k, (a, c, _, c_r) in enumerate(steps, start=1):
        acc_c += c
        rej_c += c_r
        scale = a / unit
        new: dict[int, float] = {}
        absorbed_a = absorbed_r = 0.0
        for g, w in state.items():
            taken += len(support)
            for s, ps in support:
                y = g * step + scale * s  # accept log wealth = unit * y + acc_c
                mass = w * ps
                if unit * y + acc_c >= top_a:
                    absorbed_a += mass
                elif ratio * unit * y + rej_c >= top_r:
                    absorbed_r += mass
                else:
                    at = y / step
                    low = math.floor(at)
                    frac = at - low
                    new[low] = new.get(low, 0.0) + mass * (1 - frac)
                    if frac:
                        new[low + 1] = new.get(low + 1, 0.0) + mass * frac
        running = sum(state.values())
        blocks += running
        accept += absorbed_a
        reject += absorbed_r
        runs += (absorbed_a + absorbed_r) * _paid(spec, k)
        state = {g: w for g, w in new.items() if w > _TINY}
        while len(state) > MAX_CELLS:
            state, step = _coarser(state), step * 2
    capped = max(0.0, 1.0 - accept - reject)
    runs += capped * spec.max_runs
    point = OperatingPoint(
        drop=drop,
        accept=min(1.0, accept),
        reject=min(1.0, reject),
        capped=capped,
        blocks=blocks,
        runs=runs,
    )
    return point, taken


DropModel = Literal["removal", "proportional"]


def drop_rates(rates: Sequence[float], drop: float, model: DropModel = "removal") -> list[float]:
    """Candidate rates whose mean is ``drop`` below ``rates``.

    ``removal`` (default): the drop falls on a subset of samples that then fail outright, as when an
    edit removes an instruction they need; the subset is spread evenly over the samples ranked by
    rate (systematic), one sample losing part of its rate to make the drop exact. ``proportional``:
    every sample loses the same share of its rate. A drop concentrated on few samples leaves the
    candidate less variance than the same drop spread out, so the gate rejects it a little more
    often; the two models bracket edits between them. ``drop < 0`` (an improvement) always spreads
    the gain over the fail rates."""
    n = len(rates)
    total = sum(rates)
    if drop < 0:
        room = n - total
        gain = 1.0 if room <= 0 else min(1.0, -drop * n / room)
        return [r + (1.0 - r) * gain for r in rates]
    if drop == 0 or total <= 0:
        return list(rates)
    target = min(drop * n, total)
    if model == "proportional":
        return [r * (1.0 - target / total) for r in rates]
    q = list(rates)
    removed, quota, share = 0.0, 0.5, target / total
    for i in sorted(range(n), key=lambda i: rates[i]):
        quota += share
        if quota >= 1.0 and removed + rates[i] <= target:
            q[i], removed, quota = 0.0, removed + rates[i], quota - 1.0
    for i in sorted(range(n), key=lambda i: -q[i]):  # the rest from the highest kept rates
        if target - removed <= 1e-12:
            break
        cut = min(q[i], target - removed)
        q[i] -= cut
        removed += cut
    return q


def operating_curve(
    spec: GateSpec, rates: Sequence[float], drops: Sequence[float], model: DropModel = "removal"
) -> list[OperatingPoint]:
    """The gate's predicted operating curve over true drops (see :func:`drop_rates`)."""
    return [predict(spec, rates, drop_rates(rates, d, model)) for d in drops]


def estimate_rates(baseline: Outcomes, sample_ids: Sequence[str]) -> list[float]:
    """Per-sample pass rates from the baseline's answered runs, shrunk toward their mean so that
    their spread matches the unbiased estimate of ``mean p (1 - p)``."""
    counts = [(sum(a), len(a)) for a in (baseline.answered(s) for s in sample_ids)]
    raw = [k / r if r else 0.5 for k, r in counts]
    if not raw:
        return []
    mean = sum(raw) / len(raw)
    spread = sum((x - mean) ** 2 for x in raw) / len(raw)
    unbiased = [k * (r - k) / (r * (r - 1)) for k, r in counts if r >= 2]
    if not unbiased or spread <= 0:
        return [mean] * len(raw)  # one run: no per-sample spread can be told from noise
    target = sum(unbiased) / len(unbiased)
    shrink = math.sqrt(min(1.0, max(0.0, (mean * (1 - mean) - target) / spread)))
    return [mean + shrink * (x - mean) for x in raw]


def detectable_drop(spec: GateSpec, rates: Sequence[float]) -> float:
    """The smallest margin at which this gate, on these rates and within ``max_runs``, accepts an
    edit that changes nothing with probability ``1 - beta``: drops smaller than this cannot be told
    from no drop at these error rates (1.0 when even that fails)."""

    def resolves(m: float) -> bool:
        spec_m = spec.model_copy(update={"margin": m})
        return predict(spec_m, rates, rates).accept >= 1 - spec.beta

    lo, hi = 0.0, 0.5
    if not resolves(hi):
        return 1.0
    for _ in range(12):
        mid = (lo + hi) / 2
        if resolves(mid):
            hi = mid
        else:
            lo = mid
    return hi


def fixed_runs(spec: GateSpec, rates: Sequence[float]) -> int:
    """Runs a side a fixed design needs to tell no drop from a drop of ``margin`` at ``alpha`` and
    ``beta`` (normal theory, per-pair variance ``2 mean p (1 - p)``): the sequential gate's yardstick."""
    n = len(rates)
    variance = 2 * sum(r * (1 - r) for r in rates) / n
    z = NormalDist().inv_cdf(1 - spec.alpha) + NormalDist().inv_cdf(1 - spec.beta)
    return max(1, math.ceil(z * z * variance / (n * spec.margin**2)))


__all__ = [
    "EXACT_SAMPLES",
    "MAX_CELLS",
    "MAX_SUPPORT",
    "OperatingPoint",
    "block_distribution",
    "detectable_drop",
    "drop_rates",
    "estimate_rates",
    "fixed_runs",
    "operating_curve",
    "predict",
    "step_bound",
]
