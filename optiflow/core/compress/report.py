"""What a compress job reports (seed 000's ``OptimizationReport``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, computed_field, model_validator

from optiflow.core.base import Frozen
from optiflow.core.evaluation import JobStats
from optiflow.core.sections import SectionPath
from optiflow.core.step import ProposalError


class Modification(Frozen):
    section_path: SectionPath
    original_hash: str
    proposed_body: str
    token_reduction: int
    baseline_pass_rate: float
    candidate_pass_rate: float


class RejectedModification(Frozen):
    section_path: SectionPath
    token_reduction: int
    regression_count: int
    regression_count_is_lower_bound: bool = False
    stage: Literal["candidate", "greedy"] = "candidate"


class OptimizationReport(Frozen):
    kind: Literal["compress"] = "compress"
    experiment_id: str
    prompt_ns: str
    prompt_key: str
    baseline_pass_rate: float
    modifications: tuple[Modification, ...] = ()
    rejected: tuple[RejectedModification, ...] = ()
    proposal_errors: tuple[ProposalError, ...] = ()
    stats: JobStats = Field(default_factory=JobStats)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total_token_reduction(self) -> int:
        return sum(m.token_reduction for m in self.modifications)

    @model_validator(mode="before")
    @classmethod
    def _drop_computed(cls, data: Any) -> Any:
        """``total_token_reduction`` is in the JSON for readers; it is derived, not loaded."""
        if isinstance(data, dict) and "total_token_reduction" in data:
            data = {k: v for k, v in data.items() if k != "total_token_reduction"}
        return data

    @property
    def has_modifications(self) -> bool:
        return bool(self.modifications)
