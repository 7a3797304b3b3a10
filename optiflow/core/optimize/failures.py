"""Failure analysis (seed 004 §5): count a trial's failing samples per failure category.

A failing sample's categories are, with ``categorize: tags``, its tags that name a category of
the operator table (a dataset tags each scenario with the failure it exposes: ``injury``,
``starvation`` ...); with ``categorize: expected``, its expected answer (``FLEE`` failing means
the agent did not flee). Categories are ordered by count, then by their order in the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from optiflow.core.base import Frozen
from optiflow.core.optimize.trial import FailingSample

Categorize = Literal["tags", "expected"]


class FailureAnalysis(Frozen):
    failure_counts: dict[str, int] = Field(default_factory=dict)
    """Category -> failing samples, most frequent first."""
    uncategorized: int = 0

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(self.failure_counts)


def categories_of(sample: FailingSample, categorize: Categorize) -> tuple[str, ...]:
    if categorize == "expected":
        return () if sample.expected is None else (str(sample.expected),)
    return sample.tags


def analyze_failures(
    failing: Sequence[FailingSample], *, categories: Sequence[str], categorize: Categorize = "tags"
) -> FailureAnalysis:
    known = list(dict.fromkeys(categories))
    counts = dict.fromkeys(known, 0)
    uncategorized = 0
    for sample in failing:
        hits = [c for c in categories_of(sample, categorize) if c in counts]
        if not hits:
            uncategorized += 1
        for c in hits:
            counts[c] += 1
    ordered = sorted((c for c in known if counts[c] > 0), key=lambda c: (-counts[c], known.index(c)))
    return FailureAnalysis(failure_counts={c: counts[c] for c in ordered}, uncategorized=uncategorized)


__all__ = ["Categorize", "FailureAnalysis", "analyze_failures", "categories_of"]
