"""The paired test's arithmetic: blocks of pairs, predictable bets, wealth, confidence bounds.

A *block* is one pair per sample: the baseline's k-th answered run of every sample against the
candidate's k-th run (an errored candidate run counts as a failure). ``D = X - Y`` per pair is
``+1`` (the baseline passed, the candidate failed), ``0`` or ``-1``; ``E[D] = p_i - q_i`` and the
mean over samples is the drop ``delta``.

Two e-processes (nonnegative supermartingales under their null, Ville's inequality makes
``P(sup W >= 1/a) <= a``):

- accept: null ``delta >= m``, wealth ``prod (1 + lam_k (m - D))``;
- reject: null ``delta <= 0``, wealth ``prod (1 + lam_k D)``.

Within a block one bet ``lam_k`` applies to every sample, so by the AM-GM inequality the block's
expected factor is at most ``(1 + lam_k (m - delta))^n <= 1`` under the null whatever the
per-sample probabilities (which is why a block holds every sample). ``lam_k`` is fixed from the
blocks before ``k`` only (predictable): ``m / (v + m^2)``, the growth-optimal bet against the
alternative (no drop for accept, a drop of ``m`` for reject) for a per-pair variance ``v``, estimated
from the earlier pairs with a prior of one block at the largest possible variance (0.5).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from optiflow.core.gate.outcomes import Outcomes

PRIOR_VARIANCE = 0.5  # the largest variance of X - Y for two independent coins
MAX_BET = 0.8  # never stake more than this fraction (a deterministic model asks for ~1/m)


class Block(NamedTuple):
    """Counts of one block's pairs: ``plus`` (D=+1), ``zero``, ``minus`` (D=-1)."""

    plus: int
    zero: int
    minus: int

    @property
    def total(self) -> int:
        return self.plus - self.minus


def pair_blocks(baseline: Outcomes, candidate: Outcomes, sample_ids: Sequence[str]) -> list[Block]:
    """Every complete block, in order (the baseline's errors are left out, the candidate's fail)."""
    if not sample_ids:
        return []
    sides = [(baseline.answered(s), candidate.scored(s)) for s in sample_ids]
    depth = min(min(len(b), len(c)) for b, c in sides)
    blocks = []
    for k in range(depth):
        plus = minus = 0
        for b, c in sides:
            if b[k] and not c[k]:
                plus += 1
            elif c[k] and not b[k]:
                minus += 1
        blocks.append(Block(plus, len(sides) - plus - minus, minus))
    return blocks


def bet(variance: float, margin: float) -> float:
    return min(MAX_BET, margin / (variance + margin * margin))


def bets(blocks: Sequence[Block], margin: float, n: int) -> list[float]:
    """The predictable bet of each block: from the pairs of the blocks before it."""
    out = []
    pairs = 0
    s1 = s2 = 0
    for b in blocks:
        if pairs:
            centered = s2 / pairs - (s1 / pairs) ** 2
            variance = (n * PRIOR_VARIANCE + pairs * centered) / (n + pairs)
        else:
            variance = PRIOR_VARIANCE
        out.append(bet(variance, margin))
        pairs += b.plus + b.zero + b.minus
        s1 += b.total
        s2 += b.plus + b.minus
    return out


def accept_path(blocks: Sequence[Block], lams: Sequence[float], margin: float) -> list[float]:
    """log wealth after each block of the e-process for ``delta >= margin``."""
    out, w = [], 0.0
    for b, lam in zip(blocks, lams, strict=True):
        w += (
            b.plus * math.log1p(lam * (margin - 1.0))
            + b.zero * math.log1p(lam * margin)
            + b.minus * math.log1p(lam * (margin + 1.0))
        )
        out.append(w)
    return out


def reject_path(blocks: Sequence[Block], lams: Sequence[float], shift: float = 0.0) -> list[float]:
    """log wealth after each block of the e-process for ``delta <= shift``."""
    out, w = [], 0.0
    for b, lam in zip(blocks, lams, strict=True):
        w += (
            b.plus * math.log1p(lam * (1.0 - shift))
            + b.zero * math.log1p(-lam * shift)
            + b.minus * math.log1p(-lam * (1.0 + shift))
        )
        out.append(w)
    return out


def _boundary(crossed: Callable[[float], bool], lo: float, hi: float) -> tuple[float, float]:
    """``(a, b)``, ``b - a < 1e-6``, around where a monotone ``crossed`` changes value between ``lo``
    and ``hi`` (``crossed(lo) != crossed(hi)``)."""
    at_lo = crossed(lo)
    for _ in range(60):
        if hi - lo < 1e-6:
            break
        mid = (lo + hi) / 2
        if crossed(mid) == at_lo:
            lo = mid
        else:
            hi = mid
    return lo, hi


def upper_bound(blocks: Sequence[Block], lams: Sequence[float], level: float) -> float:
    """Anytime-valid ``1 - level`` upper confidence bound on the drop: the smallest ``m'`` whose
    accept e-process has reached ``1 / level`` at some block (1.0 when none has)."""
    if not blocks:
        return 1.0
    target = math.log(1.0 / level)
    lo = max(-1.0, 1.0 - 1.0 / max(lams) + 1e-9)

    def crossed(m: float) -> bool:
        return max(accept_path(blocks, lams, m)) >= target

    if not crossed(1.0):
        return 1.0
    if crossed(lo):
        return lo
    return _boundary(crossed, lo, 1.0)[1]


def lower_bound(blocks: Sequence[Block], lams: Sequence[float], level: float) -> float:
    """Anytime-valid ``1 - level`` lower confidence bound on the drop (-1.0 when no evidence)."""
    if not blocks:
        return -1.0
    target = math.log(1.0 / level)
    hi = min(1.0, 1.0 / max(lams) - 1.0 - 1e-9)

    def crossed(shift: float) -> bool:
        return max(reject_path(blocks, lams, shift)) >= target

    if not crossed(-1.0):
        return -1.0
    if crossed(hi):
        return hi
    return _boundary(crossed, -1.0, hi)[0]


__all__ = [
    "MAX_BET",
    "PRIOR_VARIANCE",
    "Block",
    "accept_path",
    "bet",
    "bets",
    "lower_bound",
    "pair_blocks",
    "reject_path",
    "upper_bound",
]
