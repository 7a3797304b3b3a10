"""Seed 000's rule: a regression is a sample that passed every baseline run and not every
candidate run; a candidate is accepted with zero regressions once each such sample has its runs.

Only those samples can regress, so they are the only ones a strict decision needs; the first
regression rejects at once (fail-fast), its count then a lower bound.
"""

from __future__ import annotations

from collections.abc import Iterable

from optiflow.core.gate.outcomes import ERROR, FAIL, Outcomes


def can_regress(baseline: Outcomes, sample_ids: Iterable[str]) -> tuple[str, ...]:
    """Seed 000's ``baseline.consistently_passed``, in dataset order."""
    return tuple(s for s in sample_ids if baseline.passed_every_run(s))


def regressions(baseline: Outcomes, candidate: Outcomes, sample_ids: Iterable[str]) -> tuple[str, ...]:
    """Samples that passed every baseline run and failed (or errored in) a candidate run made."""
    return tuple(
        s for s in can_regress(baseline, sample_ids) if FAIL in candidate.seq(s) or ERROR in candidate.seq(s)
    )


def strict_needs(candidate: Outcomes, watched: Iterable[str], runs: int) -> dict[str, int]:
    """Run targets (exclusive run index) of the watched samples short of ``runs`` runs made."""
    return {
        s: candidate.next_run(s) + runs - candidate.attempted(s)
        for s in watched
        if candidate.attempted(s) < runs
    }


__all__ = ["can_regress", "regressions", "strict_needs"]
