"""The compress workflow's checkpoint (:class:`CompressState`), the records of the sets it puts
under the gate, and the helpers that turn a decision into seed 000's report entries."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import Field

from optiflow.core.base import Frozen
from optiflow.core.checkpoint import JobState
from optiflow.core.compress.ablation import Ablation
from optiflow.core.compress.report import (
    Modification,
    RejectedModification,
    UntriedSection,
)
from optiflow.core.gate.decision import GateStats
from optiflow.core.gate.evidence import Assessment
from optiflow.core.gate.outcomes import Outcomes
from optiflow.core.overrides import SectionOverride
from optiflow.core.sections import SectionPath, path_str
from optiflow.core.step import ProposalError, SectionEdit


def path_hash(path: SectionPath) -> str:
    return hashlib.sha256(path_str(path).encode()).hexdigest()[:8]


Phase = Literal["baseline", "ablation", "candidates", "combined", "greedy", "done"]


class GatedSet(Frozen):
    """A set of edits under the gate: its experiment (``suffix`` names the id and the temporary
    tag), the edits, and its runs so far. A candidate is a set of one edit."""

    suffix: str
    name: str
    mods: tuple[Modification, ...]
    outcomes: Outcomes = Field(default_factory=Outcomes)
    rounds: int = 0


class SetDecision(Frozen):
    """What the gate decided for a set, remembered by the set's content (greedy reuses it)."""

    accepted: bool
    reason: str
    regressions: int = 0
    lower_bound: bool = False
    pass_rate: float = 0.0
    stats: GateStats | None = None


class CompressState(JobState):
    """The checkpoint: enough to continue from any step boundary."""

    phase: Phase = "baseline"
    baseline_pass_rate: float = 0.0
    baseline: Outcomes = Field(default_factory=Outcomes)
    """Every baseline run made so far (the first round, then extensions the paired gate asked for)."""
    assessment: Assessment | None = None
    edits: tuple[SectionEdit, ...] = ()
    proposal_errors: tuple[ProposalError, ...] = ()
    untried: tuple[UntriedSection, ...] = ()
    pending: tuple[GatedSet, ...] = ()
    """The sets under the gate in the current phase (a phase's rounds repeat until all decided)."""
    accepted: tuple[Modification, ...] = ()
    rejected: tuple[RejectedModification, ...] = ()
    greedy_kept: tuple[Modification, ...] = ()
    greedy_queue: tuple[Modification, ...] = ()
    known_sets: dict[str, SetDecision] = Field(default_factory=dict)
    combined: GateStats | None = None
    regressed: frozenset[str] = frozenset()
    """Experiments a watched sample failed (fail-fast marks them: their further evaluations are
    skipped for the rest of the job)."""
    ablation: Ablation | None = None


def override_of(m: Modification) -> SectionOverride:
    return SectionOverride(path=m.section_path, expected_hash=m.original_hash, body=m.proposed_body)


def rejection(
    mod: Modification, decision: SetDecision, stage: Literal["candidate", "greedy"]
) -> RejectedModification:
    return RejectedModification(
        section_path=mod.section_path,
        token_reduction=mod.token_reduction,
        regression_count=decision.regressions,
        regression_count_is_lower_bound=decision.lower_bound,
        stage=stage,
        reason=decision.reason,
        proposed_body=mod.proposed_body,
        original_tokens=mod.original_tokens,
        proposed_tokens=mod.proposed_tokens,
        gate=decision.stats,
        original_body=mod.original_body,
        faithfulness=mod.faithfulness,
    )


def pass_rate(outcomes: Outcomes, sample_ids: Sequence[str]) -> float:
    """Seed 000's pass rate over every run made: the mean of the runs' pass rates when every
    sample has the same runs (errors count as failures; a sample with no run counts as failed)."""
    made = passed = 0
    runs = max((len(outcomes.scored(s)) for s in sample_ids), default=0)
    for s in sample_ids:
        scored = outcomes.scored(s)
        made += max(len(scored), runs)
        passed += sum(scored)
    return passed / made if made else 0.0


def set_suffix(mods: Iterable[Modification]) -> str:
    """A greedy set's experiment id and temporary tag suffix, from its content (as a candidate's
    is from its section): a job never gives two different sets one id or tag, so nothing keyed
    by them (fail-fast marks, a worker's memory of a tag's overrides, the eval cache, trial rows)
    mixes two sets."""
    return "set-" + hashlib.sha256(set_key(mods).encode()).hexdigest()[:12]


def set_key(mods: Iterable[Modification]) -> str:
    parts = sorted(
        f"{path_str(m.section_path)}:{hashlib.sha256(m.proposed_body.encode()).hexdigest()[:16]}"
        for m in mods
    )
    return "|".join(parts)


__all__ = [
    "CompressState",
    "GatedSet",
    "Phase",
    "SetDecision",
    "override_of",
    "pass_rate",
    "path_hash",
    "rejection",
    "set_key",
    "set_suffix",
]
