"""What a compress job reports (seed 000's ``OptimizationReport``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, computed_field, model_validator

from optiflow.core.base import Frozen
from optiflow.core.budget import BudgetReport
from optiflow.core.compress.ablation import Ablation
from optiflow.core.evaluation import JobStats
from optiflow.core.faithfulness import Faithfulness
from optiflow.core.gate.decision import GateStats
from optiflow.core.gate.evidence import Assessment
from optiflow.core.gate.spec import GateKind
from optiflow.core.sections import SectionPath
from optiflow.core.step import ProposalError


class Modification(Frozen):
    """An accepted edit of one section (seed 000), with the statistics of its gate decision."""

    section_path: SectionPath
    original_hash: str
    proposed_body: str
    token_reduction: int
    baseline_pass_rate: float
    candidate_pass_rate: float
    original_tokens: int | None = None
    proposed_tokens: int | None = None
    gate: GateStats | None = None
    original_body: str | None = None
    """The section's body the edit replaces (as the baseline rendered it)."""
    faithfulness: Faithfulness | None = None


class RejectedModification(Frozen):
    """A rejected edit: at the candidate step, or by greedy selection; ``reason`` is the gate's
    words, ``gate`` its statistics."""

    section_path: SectionPath
    token_reduction: int
    regression_count: int
    regression_count_is_lower_bound: bool = False
    stage: Literal["candidate", "greedy"] = "candidate"
    reason: str = ""
    proposed_body: str | None = None
    original_tokens: int | None = None
    proposed_tokens: int | None = None
    gate: GateStats | None = None
    original_body: str | None = None
    faithfulness: Faithfulness | None = None


class UntriedSection(Frozen):
    """A mutable section the job did not evaluate an edit of, and why (under
    ``min_section_tokens``; its proposal saved no tokens)."""

    path: SectionPath
    reason: str


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
    gate: GateKind | None = None
    """The gate every decision used (``auto`` resolved), and why: :attr:`assessment`."""
    assessment: Assessment | None = None
    """What the baseline's first round said: the gate and its reason, runs, errors, the pass
    rate, flaky samples, and (paired) the smallest drop the run budget can detect."""
    combined: GateStats | None = None
    """The decision on all accepted edits together (when more than one was accepted)."""
    untried: tuple[UntriedSection, ...] = ()
    """Every mutable section no edit of was evaluated (a failed proposal is in
    :attr:`proposal_errors`), with the reason: with :attr:`modifications` and :attr:`rejected`
    every mutable section is named."""
    budget: BudgetReport | None = None
    """The job's hard budget and spend (a job with a budget). When it ran out the job ended with
    what it had decided; the edits left undecided are in :attr:`rejected`, ``reason``
    ``undecided: ...``."""
    ablation: Ablation | None = None
    """The ablation (every mutable section emptied, judged against the baseline): its drop and
    interval; a job whose report has it passed it (the dataset noticed)."""
    sensitivity_unchecked: bool = False
    """``require_sensitivity: false``: no ablation ran, so no decision is known to be protected by
    a dataset that notices the sections."""

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
