"""The nightly decision: is a drop since the reference shown tonight? (pure; see :mod:`optiflow.core.drift`)

Night ``k`` (the k-th measure compared with a reference) looks at several *windows*: the last ``w``
nights against everything before them (the reference and the nights before the window), for ``w``
on a grid (:func:`window_grid`: 1, 2, 3, 4, 6, 8, ... 32, 48, 64, 96, ...) and ``w = k`` (every night
since the reference). Each window gives the exact conditional e-value of :mod:`.conditional` (a weighted
mean over its *shift* and *broken* alternatives); tonight's evidence is their weighted mean ``E_k`` (weights
:func:`window_weights`, fixed before the data), an e-value: ``E[E_k] <= 1`` when nothing changed.

A drop is shown when ``E_k >= 1 / alpha_k`` with ``alpha_k = alpha * 6 / (pi^2 k^2)``, the
spending optimize uses (:func:`optiflow.core.optimize.selection.alpha_at`). By Markov's inequality
night ``k`` alarms falsely with probability at most ``alpha_k``, whatever the earlier nights were
(the nights share the reference and are dependent: the union bound does not care), so over an
unbounded sequence of nights ``P(any false alarm) <= sum alpha_k = alpha``. A gain is tested the
same way at the same levels (reported, never an error). Once a drop has been shown it stays shown
until a new reference is set: nothing since un-shows it.

The work of a night is bounded: a window's law costs at most ``min(m, N - m) + 1`` terms per
sample (``m`` runs in the window of ``N``) and :data:`PAIR_COST` more, and the windows are taken
shortest first while their costs fit in :data:`WORK_BOUND` (the shortest always), the weights
renormalized over the windows taken. Which windows are taken depends on the run counts only, never
on which runs passed, so the mean stays an e-value; a long history of a large dataset loses its
longest windows, not its guarantee, and the evidence says how many windows it weighed
(``windows``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import Field

from optiflow.core.base import Frozen
from optiflow.core.drift.conditional import Direction, SampleWindow, log_evidence
from optiflow.core.optimize.selection import alpha_at

WINDOWS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
"""The short window lengths in nights; after 32 the grid goes on by factors of 1.5 and 4/3 (48, 64,
96, 128, ...) without end, so that evidence of a small drop keeps accumulating."""
FLIPS = 5
"""Samples named with a shown drop."""
WORK_BOUND = 600_000
"""Work units one night may spend (a few seconds of the control worker's time at most, about a
second for 20,000 samples): the windows past it are left out (see the module's docstring). A
window's (sample, law) pair costs :data:`PAIR_COST` units and one per term of its law. The bench's
years (48 samples, 365 nights of 3 runs) take every window."""
PAIR_COST = 20
"""What a (sample, window) pair costs beyond its law's terms, in terms (measured: the window's
bookkeeping and its ten generating functions cost about twenty terms' time)."""

Shown = Literal["drop", "gain", "none"]


class Tally(Frozen):
    """One measurement's per-sample counts: ``passes[i]`` of ``runs[i]`` answered runs."""

    passes: tuple[int, ...]
    runs: tuple[int, ...]

    @classmethod
    def of(cls, outcomes: Mapping[str, str], ids: Sequence[str]) -> Tally:
        """From outcome strings (``1`` passed, ``0`` failed; errors and gaps are not answers)."""
        seqs = [outcomes.get(i, "") for i in ids]
        return cls(
            passes=tuple(s.count("1") for s in seqs), runs=tuple(s.count("1") + s.count("0") for s in seqs)
        )

    @property
    def total_passes(self) -> int:
        return sum(self.passes)

    @property
    def total_runs(self) -> int:
        return sum(self.runs)


class Flip(Frozen):
    """A sample that flipped: its pass rate before the window and inside it."""

    sample_id: str
    before: float
    window: float
    before_runs: int
    window_runs: int
    evidence: float = Field(description="log e-value of this sample's shift factor")

    def line(self) -> str:
        return f"{self.sample_id} {self.before:.0%} -> {self.window:.0%}"


class Evidence(Frozen):
    """Night ``night``'s decision and the figures it rests on (log e-values: they outgrow floats)."""

    night: int = Field(ge=1)
    alpha: float = Field(description="alpha_k, this night's share of alpha")
    log_drop: float
    log_gain: float
    window: int = Field(description="the window (nights) that carried most of the drop evidence")
    gain_window: int
    windows: int = Field(default=0, ge=0, description="windows weighed (0: every one of the night's grid)")
    shown: Shown
    first_shown: int | None = Field(default=None, description="the night a drop was first shown")
    flips: tuple[Flip, ...] = ()

    @property
    def threshold(self) -> float:
        """``log(1 / alpha_k)``: the log evidence a drop (or gain) needs."""
        return math.log(1.0 / self.alpha)

    @property
    def drop_shown(self) -> bool:
        return self.first_shown is not None


def window_grid(night: int) -> list[int]:
    """Every grid length up to ``night``: :data:`WINDOWS`, then 48, 64, 96, 128, 192, ..."""
    out = [w for w in WINDOWS if w <= night]
    w = WINDOWS[-1]
    while True:
        w = w * 3 // 2 if w & (w - 1) == 0 else w * 4 // 3  # 32 -> 48 -> 64 -> 96 -> 128 ...
        if w > night:
            return out
        out.append(w)


def windows_at(night: int) -> tuple[int, ...]:
    """The windows of ``night``: the grid, and ``night`` itself (every night since the reference)."""
    return tuple(sorted({*window_grid(night), night}))


def window_weights(night: int, taken: int | None = None) -> dict[int, float]:
    """The prior weight of each window at ``night``: ``(j + 1)^-1.5`` for the j-th shortest,
    normalized (short windows first: a fresh drop is found in a few nights); with ``taken``, over
    the ``taken`` shortest only."""
    ws = windows_at(night)[:taken]
    raw = [(j + 1) ** -1.5 for j in range(len(ws))]
    total = sum(raw)
    return {w: r / total for w, r in zip(ws, raw, strict=True)}


def law_terms(windows: Sequence[SampleWindow]) -> int:
    """An upper bound on a window's work, from its run counts alone (see :data:`WORK_BOUND`)."""
    return sum(min(s.window_runs, s.before_runs) + 1 + PAIR_COST for s in windows)


def windows_within(splits: Mapping[int, Sequence[SampleWindow]], bound: int | None = None) -> int:
    """How many of the shortest windows fit in ``bound`` terms (:data:`WORK_BOUND`; at least one)."""
    bound = WORK_BOUND if bound is None else bound
    spent, taken = 0, 0
    for w in sorted(splits):
        spent += law_terms(splits[w])
        if taken and spent > bound:
            break
        taken += 1
    return taken


def split(reference: Tally, nights: Sequence[Tally], widths: Sequence[int]) -> dict[int, list[SampleWindow]]:
    """For each width ``w``: every sample's runs before the last ``w`` nights (the reference
    included) and in them."""
    n = len(reference.passes)
    total_p, total_r = list(reference.passes), list(reference.runs)
    for t in nights:
        for i in range(n):
            total_p[i] += t.passes[i]
            total_r[i] += t.runs[i]
    out: dict[int, list[SampleWindow]] = {}
    win_p, win_r = [0] * n, [0] * n
    done = 0
    for w in sorted(widths):
        for t in nights[len(nights) - w : len(nights) - done]:
            for i in range(n):
                win_p[i] += t.passes[i]
                win_r[i] += t.runs[i]
        done = w
        out[w] = [
            SampleWindow(total_p[i] - win_p[i], total_r[i] - win_r[i], win_p[i], win_r[i]) for i in range(n)
        ]
    return out


def _mix(parts: Sequence[tuple[float, float]]) -> float:
    """``log sum weight * exp(log e)``."""
    top = max(math.log(wt) + le for wt, le in parts)
    return top + math.log(sum(wt * math.exp(le - top) for wt, le in parts))


def evidence(
    reference: Tally,
    nights: Sequence[Tally],
    *,
    ids: Sequence[str],
    margin: float,
    alpha: float,
    first_shown: int | None = None,
) -> Evidence:
    """The decision of the last of ``nights`` (night ``len(nights)``); ``first_shown``: the night a
    drop was shown before, if one was (it stays shown)."""
    k = len(nights)
    if k < 1:
        raise ValueError("no night to decide")
    grid = windows_at(k)
    splits = split(reference, nights, grid)
    taken = windows_within(splits)
    weights = window_weights(k, taken)
    per: dict[int, tuple[Direction, Direction]] = {w: log_evidence(splits[w], margin) for w in weights}
    log_drop = _mix([(weights[w], per[w][0].mixed) for w in weights])
    log_gain = _mix([(weights[w], per[w][1].mixed) for w in weights])
    level = alpha_at(alpha, k)
    top = math.log(1.0 / level)
    window = max(weights, key=lambda w: (math.log(weights[w]) + per[w][0].mixed, -w))
    gain_window = max(weights, key=lambda w: (math.log(weights[w]) + per[w][1].mixed, -w))
    shown: Shown = "none"
    if log_drop >= top:
        shown = "drop"
        first_shown = first_shown or k
    elif log_gain >= top:
        shown = "gain"
    flips = _flips(ids, splits[window], per[window][0]) if first_shown is not None else ()
    return Evidence(
        night=k,
        alpha=level,
        log_drop=log_drop,
        log_gain=log_gain,
        window=window,
        gain_window=gain_window,
        windows=0 if taken == len(grid) else taken,
        shown=shown,
        first_shown=first_shown,
        flips=flips,
    )


def _flips(ids: Sequence[str], windows: Sequence[SampleWindow], drop: Direction) -> tuple[Flip, ...]:
    """The samples whose window most contradicts "no change" towards a drop."""
    ranked = sorted(range(len(windows)), key=lambda i: (-drop.per_sample[i], ids[i]))
    out = []
    for i in ranked[:FLIPS]:
        s = windows[i]
        if drop.per_sample[i] <= 0 or not s.before_runs or not s.window_runs:
            break
        out.append(
            Flip(
                sample_id=ids[i],
                before=s.before_passes / s.before_runs,
                window=s.window_passes / s.window_runs,
                before_runs=s.before_runs,
                window_runs=s.window_runs,
                evidence=drop.per_sample[i],
            )
        )
    return tuple(out)


def sequence(
    reference: Tally, nights: Sequence[Tally], *, ids: Sequence[str], margin: float, alpha: float
) -> list[Evidence]:
    """Every night's decision in order (what replay re-decides)."""
    out: list[Evidence] = []
    first: int | None = None
    for k in range(1, len(nights) + 1):
        e = evidence(reference, nights[:k], ids=ids, margin=margin, alpha=alpha, first_shown=first)
        first = e.first_shown
        out.append(e)
    return out


__all__ = [
    "FLIPS",
    "PAIR_COST",
    "WINDOWS",
    "WORK_BOUND",
    "Evidence",
    "Flip",
    "Shown",
    "Tally",
    "evidence",
    "law_terms",
    "sequence",
    "split",
    "window_weights",
    "windows_at",
    "windows_within",
]
