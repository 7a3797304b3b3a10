"""The paired sequential test: where the e-processes stand, and the runs the next round needs.

Every block holds every paired sample, so within an undecided candidate every paired sample is
undecided; a candidate gets more runs only while neither e-process has crossed its threshold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, NamedTuple

from optiflow.core.gate.eprocess import Block, accept_path, bets, pair_blocks, reject_path
from optiflow.core.gate.outcomes import Outcomes
from optiflow.core.gate.spec import GateSpec

State = Literal["accept", "reject", "open"]


class Standing(NamedTuple):
    state: State
    at: int  # the block at which it was decided (0 when open)
    blocks: list[Block]
    lams: list[float]
    accept: list[float]  # log wealth paths
    reject: list[float]


def standing(spec: GateSpec, baseline: Outcomes, candidate: Outcomes, ids: Sequence[str]) -> Standing:
    """Both e-processes over the complete blocks; the first block where one crossed decides."""
    blocks = pair_blocks(baseline, candidate, ids)
    lams = bets(blocks, spec.margin, len(ids))
    acc = accept_path(blocks, lams, spec.margin)
    rej = reject_path(blocks, lams)
    top_a, top_r = math.log(1 / spec.alpha), math.log(1 / spec.beta)
    for k, (a, r) in enumerate(zip(acc, rej, strict=True), start=1):
        if a >= top_a:
            return Standing("accept", k, blocks, lams, acc, rej)
        if r >= top_r:
            return Standing("reject", k, blocks, lams, acc, rej)
    return Standing("open", 0, blocks, lams, acc, rej)


def paired_needs(
    spec: GateSpec, baseline: Outcomes, candidate: Outcomes, ids: Sequence[str], depth: int
) -> tuple[dict[str, int], dict[str, int]] | None:
    """(baseline, candidate) run targets (exclusive run index per sample) for the next round, or
    None when no more complete block can be made within ``max_runs``.

    The next round brings every paired sample to ``max(first_runs, depth + round_runs)`` pairs
    (capped at ``max_runs``): the candidate's runs count errors as failures, the baseline's must be
    answered, so a baseline error costs one more baseline run.
    """
    goal = min(spec.max_runs, max(spec.first_runs, depth + spec.round_runs))
    if goal <= depth:
        return None
    base_t: dict[str, int] = {}
    cand_t: dict[str, int] = {}
    reachable = goal
    for s in ids:
        have_c = len(candidate.scored(s))
        if have_c < goal:
            cand_t[s] = candidate.next_run(s) + goal - have_c
        have_b = len(baseline.answered(s))
        if have_b < goal:
            stop = min(spec.max_runs, baseline.next_run(s) + goal - have_b)
            reachable = min(reachable, have_b + stop - baseline.next_run(s))
            if stop > baseline.next_run(s):
                base_t[s] = stop
    if reachable <= depth:
        return None
    return base_t, cand_t


__all__ = ["Standing", "paired_needs", "standing"]
