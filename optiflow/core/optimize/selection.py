"""Selection under noise (DESIGN §2a): a paired, sequential, job-wide-calibrated choice of a new best.

The statistics are the compress gate's (:mod:`optiflow.core.gate.eprocess`), turned to
superiority. Runs are paired by sample and run index (block ``k`` = the best's k-th answered run of
every sample against the contender's k-th run, an errored contender run a failure), ``D = best -
contender`` per pair, and the drop ``delta = mean E[D]`` is minus the contender's gain.

- **better** (the accept e-process of the gate with its margin at ``-min_gain``): null ``gain <=
  min_gain``, wealth ``prod(1 + lam (-min_gain - D))``. The contender is crowned-eligible when it
  reaches ``1 / alpha_k``: its gain over the best is above ``min_gain`` with confidence
  ``1 - alpha_k``.
- **not better** (the gate's reject e-process shifted to ``-(min_gain + effect)``): null ``gain >=
  min_gain + effect``. At ``1 / beta`` the contender is dropped: it is shown to gain less than the
  gain the race is sized to find, so it is not worth more runs.

Cost-type objectives (``avg_tokens``, ``total_cost``, ``avg_latency_ms``, ``cost_efficiency``,
``weighted``) need two things, each at ``alpha_k`` (an intersection-union test, no split of alpha):
the gate's own non-inferiority e-process on the pass rate at ``margin``, and a paired *sign* test on
the cost: per pair ``+1`` when the contender's run cost less than the best's (tokens; dollars for
``total_cost``; milliseconds for ``avg_latency_ms``), ``-1`` when it cost more, ``0`` on a tie; the
null "the contender is not cheaper" is ``E[sign] <= 0`` and the same betting e-process tests it. A
shown drop in pass rate (``1 / beta``) or a shown higher cost (``1 / beta``) drops the contender.

**Job-wide error.** The k-th contender of a job (candidate ``cK``) is tested at ``alpha_k = alpha *
6 / (pi^2 k^2)``; these sum to ``alpha``, and Ville's inequality bounds each e-process's chance of
ever crossing under its null by its level, so by the union bound the chance that the job ever
crowns a contender that is not better than the best it replaced (hence, by induction, one whose
true gain over the baseline is <= ``min_gain``) is at most ``alpha``, whatever the number of
iterations, rounds and stopping times.

:func:`judge` is a pure function of the two outcome strings (and costs), the comparison index and
the settings: the workflow calls it every round, replay calls it on the recorded outcomes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import Field

from optiflow.core.base import Frozen
from optiflow.core.gate.decision import RunPlan, ranges
from optiflow.core.gate.eprocess import (
    Block,
    accept_path,
    bets,
    lower_bound,
    pair_blocks,
    reject_path,
    upper_bound,
)
from optiflow.core.gate.outcomes import Outcomes
from optiflow.core.gate.paired import paired_needs
from optiflow.core.gate.spec import GateSpec

Verdict = Literal["accept", "reject", "continue", "capped"]
Costs = Mapping[str, Sequence[float | None]]
"""Per sample, the cost metric of each run index (None: no answer)."""

_MAX_LOG = 60.0
COST_SCORERS = frozenset({"avg_tokens", "total_cost", "avg_latency_ms", "cost_efficiency", "weighted"})


def alpha_at(alpha: float, k: int) -> float:
    """The level of the job's k-th comparison (k >= 1): ``alpha * 6 / (pi^2 k^2)``, summing to alpha."""
    return alpha * 6.0 / (math.pi**2 * max(1, k) ** 2)


class SelectionFigures(Frozen):
    """Everything one paired decision used and found (recorded in the trial and the history file,
    so replay and the page show the same figures).

    ``gain`` is the contender's estimated pass-rate gain over ``against`` (0.05 = five points),
    ``gain_low`` / ``gain_high`` its anytime-valid ``1 - alpha_k`` interval; ``evidence_better`` the
    largest wealth of the superiority (or, cost-type, non-inferiority) e-process (crowned at
    ``1 / alpha_k``), ``evidence_worse`` of the drop one (dropped at ``1 / beta``);
    ``cost_evidence`` / ``cost_worse`` the cost sign test's (cost-type objectives only).
    """

    comparison: int = Field(ge=1)
    alpha: float
    against: str
    verdict: Verdict
    reason: str
    samples: int
    pairs: int
    runs: int = Field(description="contender evaluations on the selection samples")
    gain: float
    gain_low: float
    gain_high: float
    evidence_better: float
    evidence_worse: float
    cost_evidence: float | None = None
    cost_worse: float | None = None
    best_outcomes: dict[str, str] = Field(default_factory=dict)
    outcomes: dict[str, str] = Field(default_factory=dict)
    best_costs: dict[str, list[float | None]] | None = None
    costs: dict[str, list[float | None]] | None = None

    @property
    def accepted(self) -> bool:
        return self.verdict == "accept"

    def line(self) -> str:
        return (
            f"{self.verdict}: {self.reason}; gain {self.gain:+.1%} "
            f"[{self.gain_low:+.1%}, {self.gain_high:+.1%}] "
            f"vs {self.against}, {self.pairs} pair(s)/sample, alpha_k {self.alpha:.2g}"
        )


def gate_spec(
    *, alpha: float, beta: float, margin: float, first_runs: int, round_runs: int, max_runs: int
) -> GateSpec:
    return GateSpec(
        mode="paired",
        alpha=min(alpha, 0.49),
        beta=beta,
        margin=margin,
        first_runs=first_runs,
        round_runs=round_runs,
        max_runs=max_runs,
    )


def sign_blocks(best: Costs, contender: Costs, ids: Sequence[str]) -> list[Block]:
    """Blocks of cost signs: ``plus`` the contender cheaper, ``minus`` dearer (answered runs only)."""
    if not ids:
        return []
    sides = [
        ([c for c in best.get(s, ()) if c is not None], [c for c in contender.get(s, ()) if c is not None])
        for s in ids
    ]
    depth = min(min(len(b), len(c)) for b, c in sides)
    out = []
    for k in range(depth):
        plus = sum(1 for b, c in sides if c[k] < b[k])
        minus = sum(1 for b, c in sides if c[k] > b[k])
        out.append(Block(plus, len(sides) - plus - minus, minus))
    return out


def _flip(blocks: Sequence[Block]) -> list[Block]:
    return [Block(b.minus, b.zero, b.plus) for b in blocks]


def _first(path: Sequence[float], level: float) -> int | None:
    top = math.log(1.0 / level)
    return next((k for k, w in enumerate(path, start=1) if w >= top), None)


def _cap(path: Sequence[float]) -> float:
    return math.exp(min(_MAX_LOG, max(path))) if path else 1.0


def judge(
    *,
    comparison: int,
    alpha: float,
    beta: float,
    min_gain: float,
    effect: float,
    margin: float,
    max_runs: int,
    against: str,
    best: Outcomes,
    contender: Outcomes,
    ids: Sequence[str],
    cost_type: bool = False,
    best_costs: Costs | None = None,
    costs: Costs | None = None,
    level: float | None = None,
) -> SelectionFigures:
    """One contender against the current best, from the runs so far (see the module docstring).

    ``capped``: still undecided with ``max_runs`` pairs per sample (not crowned). ``level``
    replaces the spent ``alpha_k`` (the held-out confirmation, a single test at ``alpha``)."""
    level = alpha_at(alpha, comparison) if level is None else level
    ids = [s for s in ids if best.answered(s)]
    n = len(ids)
    blocks = pair_blocks(best, contender, ids)
    if cost_type:
        lams = bets(blocks, margin, n)
        better = accept_path(blocks, lams, margin)
        worse = reject_path(blocks, lams)
        c_blocks = sign_blocks(best_costs or {}, costs or {}, ids)[: len(blocks)]
        c_lams = bets(c_blocks, effect, n)
        cheaper = reject_path(c_blocks, c_lams)
        dearer = reject_path(_flip(c_blocks), c_lams)
    else:
        lams = bets(blocks, effect, n)
        better = accept_path(blocks, lams, -min_gain)
        worse = reject_path(blocks, lams, -(min_gain + effect))
        cheaper = dearer = []
    at_better = _first(better, level)
    at_worse = _first(worse, beta)
    if cost_type:
        at_cheaper = _first(cheaper, level)
        at_dearer = _first(dearer, beta)
        at_better = None if at_better is None or at_cheaper is None else max(at_better, at_cheaper)
        if at_dearer is not None and (at_worse is None or at_dearer < at_worse):
            at_worse = at_dearer
    lo = -upper_bound(blocks, lams, level) if blocks else -1.0
    hi = -lower_bound(blocks, lams, level) if blocks else 1.0
    diffs = []
    for s in ids:
        b, c = best.answered(s), contender.scored(s)
        if b and c:
            diffs.append(sum(c) / len(c) - sum(b) / len(b))
    gain = sum(diffs) / len(diffs) if diffs else 0.0
    depth = len(blocks)
    if at_better is not None and (at_worse is None or at_better <= at_worse):
        verdict: Verdict = "accept"
        if cost_type:
            reason = (
                f"non-inferior on pass rate (margin {margin:.0%}) and cheaper on the objective, both with "
                f"{1 - level:.4%} confidence after {at_better} pair(s) per sample"
            )
        else:
            reason = (
                f"better: gain above {min_gain:.0%} with {1 - level:.4%} confidence after {at_better} "
                "pair(s) per sample"
            )
    elif at_worse is not None:
        verdict = "reject"
        if cost_type:
            reason = f"worse on pass rate or dearer, shown after {at_worse} pair(s) per sample"
        else:
            reason = (
                f"not better: gain below {min_gain + effect:.0%} shown with {1 - beta:.0%} confidence "
                f"after {at_worse} pair(s) per sample"
            )
    elif depth >= max_runs:
        verdict = "capped"
        reason = f"undecided after {depth} pair(s) per sample (max_runs {max_runs}): not crowned"
    else:
        verdict = "continue"
        reason = "first round" if not depth else f"undecided after {depth} pair(s) per sample"
    made, _, _ = contender.totals(ids)
    return SelectionFigures(
        comparison=comparison,
        alpha=level,
        against=against,
        verdict=verdict,
        reason=reason,
        samples=n,
        pairs=depth,
        runs=made,
        gain=gain,
        gain_low=lo,
        gain_high=hi,
        evidence_better=_cap(better),
        evidence_worse=_cap(worse),
        cost_evidence=_cap(cheaper) if cost_type else None,
        cost_worse=_cap(dearer) if cost_type else None,
        best_outcomes={s: best.seq(s) for s in ids},
        outcomes={s: contender.seq(s) for s in ids},
        best_costs={s: list((best_costs or {}).get(s, ())) for s in ids} if cost_type else None,
        costs={s: list((costs or {}).get(s, ())) for s in ids} if cost_type else None,
    )


def rejudge(
    figures: SelectionFigures, *, spent: bool = True, **settings: float | int | bool
) -> SelectionFigures:
    """The same decision re-made from the recorded outcomes (replay); ``spent`` False: at the
    recorded level (the held-out confirmation)."""
    return judge(
        level=None if spent else figures.alpha,
        comparison=figures.comparison,
        against=figures.against,
        best=Outcomes.of(figures.best_outcomes),
        contender=Outcomes.of(figures.outcomes),
        ids=list(figures.outcomes),
        best_costs=figures.best_costs,
        costs=figures.costs,
        **settings,  # type: ignore[arg-type]
    )


def pick(figures: Mapping[str, SelectionFigures], order: Sequence[str]) -> str | None:
    """The contender crowned among those accepted: the largest estimated gain (first in ``order``
    on a tie)."""
    accepted = [cid for cid in order if cid in figures and figures[cid].accepted]
    if not accepted:
        return None
    return max(accepted, key=lambda cid: (figures[cid].gain, -order.index(cid)))


def next_runs(
    gate: GateSpec, best: Outcomes, open_: Mapping[str, Outcomes], ids: Sequence[str]
) -> tuple[tuple[RunPlan, ...], dict[str, RunPlan]]:
    """The next round: each open contender's runs and the best's (merged by the caller)."""
    ids = [s for s in ids if best.answered(s)]
    plans: dict[str, RunPlan] = {}
    for cid, outcomes in open_.items():
        depth = len(pair_blocks(best, outcomes, ids))
        needs = paired_needs(gate, best, outcomes, ids, depth)
        if needs is None:
            continue
        base_t, cand_t = needs
        plan = RunPlan(baseline=ranges(best, base_t), candidate=ranges(outcomes, cand_t))
        if plan.calls:
            plans[cid] = plan
    return tuple(plans.values()), plans


__all__ = [
    "COST_SCORERS",
    "SelectionFigures",
    "Verdict",
    "alpha_at",
    "gate_spec",
    "judge",
    "next_runs",
    "pick",
    "rejudge",
    "sign_blocks",
]
