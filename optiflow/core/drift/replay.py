"""A reference's history file, and replay: every night's decision re-made from the recorded outcomes.

The history file (``measurements/<ns>_<key>_<tag>/<reference id>.yaml``, written by ``optiflow
submit`` / ``measure`` / ``cron`` after a measure compared with a reference; ``optiflow replay`` on
a measure job's id builds the same document from the jobs database) holds the reference's
per-sample outcomes and every night's, each with the settings it was decided with and what was
decided. :func:`replay` decides every night again with :func:`optiflow.core.drift.detector.evidence`
and lists each figure that differs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from optiflow.core.base import Frozen
from optiflow.core.drift.detector import Evidence, Tally, evidence
from optiflow.core.drift.report import Night, Reference

KIND = "drift"
VERSION = 1


def history_path(reference: Reference) -> str:
    safe = "".join(
        c if c.isalnum() or c in "._-" else "_" for c in f"{reference.ns}_{reference.key}_{reference.tag}"
    )
    return f"measurements/{safe}/{reference.id}.yaml"


def history_document(reference: Reference, nights: Sequence[Night]) -> dict[str, Any]:
    return {
        "kind": KIND,
        "version": VERSION,
        "prompt": reference.prompt,
        "reference": reference.model_dump(mode="json"),
        "nights": [n.model_dump(mode="json") for n in nights],
    }


def is_history(document: Mapping[str, Any]) -> bool:
    return document.get("kind") == KIND and "reference" in document and "nights" in document


class Difference(Frozen):
    night: int
    field: str
    recorded: str
    replayed: str

    def describe(self) -> str:
        return f"night {self.night}: {self.field} recorded {self.recorded}, replayed {self.replayed}"


class Replayed(Frozen):
    prompt: str
    reference_id: str
    nights: int
    decisions: tuple[Evidence, ...]
    differences: tuple[Difference, ...] = Field(default=())

    @property
    def ok(self) -> bool:
        return not self.differences


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def replay(document: Mapping[str, Any]) -> Replayed:
    """Every recorded night decided again (ValueError / pydantic errors: not a drift history)."""
    if not is_history(document):
        raise ValueError("not a drift history (kind: drift, with a reference and its nights)")
    reference = Reference.model_validate(document["reference"])
    nights = [Night.model_validate(n) for n in document["nights"]]
    ids = reference.sample_ids
    base = reference.tally()
    tallies: list[Tally] = []
    decided: list[Evidence] = []
    differences: list[Difference] = []
    first: int | None = None
    for k, night in enumerate(sorted(nights, key=lambda n: n.night), start=1):
        if night.night != k:
            raise ValueError(f"night {night.night} recorded where night {k} was expected")
        tallies.append(Tally.of(night.outcomes, ids))
        again = evidence(base, tallies, ids=ids, margin=night.margin, alpha=night.alpha, first_shown=first)
        first = again.first_shown
        decided.append(again)
        was = night.evidence
        for field in ("shown", "first_shown", "window", "gain_window", "windows"):
            a, b = getattr(was, field), getattr(again, field)
            if a != b:
                differences.append(Difference(night=k, field=field, recorded=str(a), replayed=str(b)))
        for field in ("log_drop", "log_gain", "alpha"):
            a, b = getattr(was, field), getattr(again, field)
            if not _close(a, b):
                differences.append(Difference(night=k, field=field, recorded=f"{a:.9g}", replayed=f"{b:.9g}"))
    return Replayed(
        prompt=reference.prompt,
        reference_id=reference.id,
        nights=len(nights),
        decisions=tuple(decided),
        differences=tuple(differences),
    )


__all__ = ["Difference", "Replayed", "history_document", "history_path", "is_history", "replay"]
