"""A reference, the nights compared with it, and what a measure job's document says about drift."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from optiflow.core.base import Frozen
from optiflow.core.drift.detector import Evidence, Tally
from optiflow.core.drift.estimate import Change
from optiflow.core.drift.identity import Identity


class Reference(Frozen):
    """One measure of a tag as it was accepted: per-sample outcomes over its runs."""

    id: str
    ns: str
    key: str
    tag: str
    identity: Identity
    job_id: str
    created_at: datetime
    source: str = Field(description="why it was recorded: apply, --set-reference, a change, none before")
    sample_ids: tuple[str, ...]
    outcomes: dict[str, str]
    runs: int
    pass_rate: float
    next_run: int = Field(ge=0, description="the first run index of the next night")

    @property
    def prompt(self) -> str:
        return f"{self.ns}/{self.key}@{self.tag}"

    def tally(self) -> Tally:
        return Tally.of(self.outcomes, self.sample_ids)

    def info(self) -> ReferenceInfo:
        return ReferenceInfo(
            id=self.id,
            job_id=self.job_id,
            created_at=self.created_at,
            source=self.source,
            pass_rate=self.pass_rate,
            runs=self.runs,
            samples=len(self.sample_ids),
        )


class ReferenceInfo(Frozen):
    """A reference as a measure's document names it."""

    id: str
    job_id: str
    created_at: datetime
    source: str
    pass_rate: float
    runs: int
    samples: int


class Night(Frozen):
    """One measure compared with a reference, and its decision."""

    reference_id: str
    night: int = Field(ge=1)
    job_id: str
    measured_at: datetime
    outcomes: dict[str, str]
    margin: float
    alpha: float
    evidence: Evidence
    change: Change
    pass_rate: float


class DriftReport(Frozen):
    """What a measure job found about drift.

    ``status``: ``compared`` (night ``night`` of reference ``reference``: ``change`` and
    ``evidence``), ``reference`` (this measure is the reference from now on; ``reason`` says why),
    or ``off`` (``drift.against: none``, or the measure could not be compared: ``reason``)."""

    status: Literal["compared", "reference", "off"]
    reason: str = ""
    reference: ReferenceInfo | None = None
    night: int | None = None
    margin: float
    alpha: float
    change: Change | None = None
    evidence: Evidence | None = None

    @property
    def drop_shown(self) -> bool:
        return self.evidence is not None and self.evidence.drop_shown

    @property
    def gain_shown(self) -> bool:
        return self.evidence is not None and self.evidence.shown == "gain"


__all__ = ["DriftReport", "Night", "Reference", "ReferenceInfo"]
