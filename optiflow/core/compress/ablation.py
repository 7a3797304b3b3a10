"""The ablation: evidence that the dataset notices the mutable sections (pure).

Before any candidate, a compress job with ``require_sensitivity`` (the default) spends one
experiment on the prompt with every mutable section emptied, judged against the baseline by the
job's own gate. If the gate finds that prompt non-inferior, the dataset and check cannot tell
whether those sections do anything, so no edit the job would accept is protected by them: the
job fails with :func:`failure_line`. Rejected (the drop shows) is the evidence the job needs.

With ``require_sensitivity: false`` the ablation is not run (the job is seed 000 exactly) and the
report marks every decision as unprotected by such evidence (:data:`UNCHECKED`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from optiflow.core.base import Frozen
from optiflow.core.gate.decision import GateStats
from optiflow.core.sections import SectionPath, path_str

ABLATION = "ablation"

UNCHECKED = "sensitivity unchecked (require_sensitivity: false)"
"""What the report says next to every decision of a job that did not run the ablation."""


PENDING = "pending"
"""An ablation's reason until its verdict: it has not run (yet)."""


class Ablation(Frozen):
    """The ablation's verdict: ``noticed`` when the gate rejected the emptied prompt (the dataset
    notices the mutable sections), with the gate's statistics (drop and its interval)."""

    sections: tuple[SectionPath, ...]
    tokens: int
    """Tokens of the mutable sections emptied (as the baseline renders them)."""
    noticed: bool
    reason: str
    stats: GateStats | None = None


def mutable_sections(
    paths: Sequence[tuple[SectionPath, bool]], body: Callable[[SectionPath], str]
) -> tuple[SectionPath, ...]:
    """The sections the ablation empties: every mutable one with a non-blank body."""
    return tuple(p for p, frozen in paths if not frozen and body(p).strip())


def summary(a: Ablation) -> str:
    """One line for the report: what was emptied and what the gate measured."""
    what = f"{len(a.sections)} mutable section(s) emptied (-{a.tokens} tokens)"
    verdict = "noticed (rejected)" if a.noticed else "NOT noticed (non-inferior)"
    return f"ablation: {what}: {verdict}{_stat(a.stats)}"


def failure_line(a: Ablation) -> str:
    """The job's one-line failure when the dataset does not notice the mutable sections."""
    names = ", ".join(path_str(p) for p in a.sections)
    return (
        f"the dataset does not notice the mutable sections: with all of them emptied ({names}; "
        f"-{a.tokens} tokens) the gate finds the prompt non-inferior{_stat(a.stats)}, so no edit it "
        "accepts is protected; add samples that need these sections, or set require_sensitivity: false"
    )


def _stat(stats: GateStats | None) -> str:
    if stats is None:
        return ""
    if stats.gate == "strict":
        return f" [strict: {stats.strict_text()}]"
    return (
        f" [paired: drop {stats.drop:+.1%}, interval [{stats.drop_low:+.1%}, {stats.drop_high:+.1%}]"
        f" vs margin {stats.margin:.0%}]"
    )


__all__ = ["ABLATION", "UNCHECKED", "Ablation", "failure_line", "mutable_sections", "summary"]
