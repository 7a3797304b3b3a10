"""What a gate answers: a verdict, its reason, its statistics and, to continue, the runs it needs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import Field

from optiflow.core.base import Frozen
from optiflow.core.gate.outcomes import Outcomes
from optiflow.core.gate.spec import GateKind

Verdict = Literal["accept", "reject", "continue"]


class RunRange(Frozen):
    """Run indices ``start .. stop-1`` of each sample in ``sample_ids``."""

    start: int = Field(ge=0)
    stop: int = Field(ge=1)
    sample_ids: tuple[str, ...]

    @property
    def calls(self) -> int:
        return (self.stop - self.start) * len(self.sample_ids)


def ranges(current: Outcomes, targets: Mapping[str, int]) -> tuple[RunRange, ...]:
    """The runs that bring each sample from its next run index up to ``targets[sample]`` (exclusive),
    grouped by identical range; samples already there are left out."""
    groups: dict[tuple[int, int], list[str]] = {}
    for sid, stop in targets.items():
        start = current.next_run(sid)
        if stop > start:
            groups.setdefault((start, stop), []).append(sid)
    return tuple(RunRange(start=a, stop=b, sample_ids=tuple(ids)) for (a, b), ids in sorted(groups.items()))


class RunPlan(Frozen):
    """More runs a decision needs: the candidate's, and the baseline's when its runs must be
    extended (shared by every candidate: merge them with :meth:`merge_baseline`)."""

    baseline: tuple[RunRange, ...] = ()
    candidate: tuple[RunRange, ...] = ()

    @property
    def calls(self) -> int:
        return sum(r.calls for r in (*self.baseline, *self.candidate))

    @staticmethod
    def merge_baseline(plans: Iterable[RunPlan]) -> tuple[RunRange, ...]:
        """One set of baseline runs covering every plan's (the furthest run asked per sample)."""
        start: dict[str, int] = {}
        stop: dict[str, int] = {}
        for plan in plans:
            for r in plan.baseline:
                for sid in r.sample_ids:
                    start[sid] = min(start.get(sid, r.start), r.start)
                    stop[sid] = max(stop.get(sid, r.stop), r.stop)
        groups: dict[tuple[int, int], list[str]] = {}
        for sid, end in stop.items():
            groups.setdefault((start[sid], end), []).append(sid)
        return tuple(
            RunRange(start=a, stop=b, sample_ids=tuple(ids)) for (a, b), ids in sorted(groups.items())
        )


class GateStats(Frozen):
    """The statistics of one decision, as the report, the page and ``optiflow report`` show them.

    The pass rates are over the samples the candidate was run on (every paired sample; under
    ``strict`` the ones that can regress), the baseline's over answered runs, the candidate's with
    errors as failures. ``drop`` is the estimated pass-rate drop (baseline minus candidate, 0.05 =
    five points lower); ``drop_low`` / ``drop_high`` are anytime-valid ``1 - alpha`` bounds on the
    true drop, one on each side (under ``paired`` the candidate is accepted exactly when
    ``drop_high < margin``). ``detectable_drop`` is the smallest drop this dataset and run budget
    tell apart from no drop at ``alpha`` / ``beta`` (``paired``; under ``strict``, one sample's flip).
    """

    gate: GateKind
    gate_reason: str
    margin: float
    alpha: float
    beta: float
    samples: int
    baseline_pass_rate: float
    candidate_pass_rate: float
    drop: float
    drop_low: float
    drop_high: float
    pairs: int = Field(description="pairs per sample used (complete blocks)")
    baseline_runs: int = Field(description="baseline evaluations made (shared by every candidate)")
    candidate_runs: int = Field(description="candidate evaluations made")
    baseline_errors: int = 0
    candidate_errors: int = 0
    evidence_accept: float = Field(description="largest wealth of the accept e-process; accepts at 1/alpha")
    evidence_reject: float = Field(description="largest wealth of the reject e-process; rejects at 1/beta")
    regressed: tuple[str, ...] = Field(description="passed every baseline run, not every candidate run")
    fixed: tuple[str, ...] = Field(description="passed every candidate run, not every baseline run")
    protected_regressed: tuple[str, ...] = ()
    excluded: tuple[str, ...] = Field(default=(), description="no answered baseline run: left out")
    detectable_drop: float | None = None
    evaluated_samples: int | None = Field(
        default=None, description="samples the candidate was run on: the pass rates are over these"
    )
    stopped_early: bool = Field(
        default=False,
        description="strict: fail-fast ended the candidate's runs before every sample that can regress had "
        "its runs, so `regressed` is a lower bound",
    )

    def strict_text(self) -> str:
        """Under ``strict``, the regressions in words: ``3 regression(s) on 44 samples``, or, when
        fail-fast stopped the candidate early, ``stopped early by fail-fast after 1 of 44 samples:
        at least 1 regression(s)`` (its pass rate is over those few samples and says little)."""
        n = len(self.regressed)
        if not self.stopped_early:
            return f"{n} regression(s) on {self.samples} samples"
        ran = self.evaluated_samples
        after = f"after {ran} of {self.samples} samples" if ran is not None and ran < self.samples else ""
        return f"stopped early by fail-fast{' ' + after if after else ''}: at least {n} regression(s)"


class GateDecision(Frozen):
    """``accept``, ``reject`` or ``continue`` (then ``plan`` says which runs to make next).
    ``capped``: rejected because it was still undecided at ``max_runs``."""

    verdict: Verdict
    reason: str
    capped: bool = False
    stats: GateStats
    plan: RunPlan = Field(default_factory=RunPlan)

    @property
    def accepted(self) -> bool:
        return self.verdict == "accept"

    @property
    def decided(self) -> bool:
        return self.verdict != "continue"

    def line(self) -> str:
        """One line for a console or a log."""
        s = self.stats
        return (
            f"{self.verdict} ({s.gate}): {self.reason}; drop {s.drop:+.1%} "
            f"[{s.drop_low:+.1%}, {s.drop_high:+.1%}], margin {s.margin:.0%}, {s.pairs} pair(s)/sample"
        )


__all__ = ["GateDecision", "GateStats", "RunPlan", "RunRange", "Verdict", "ranges"]
