"""Structured mutation driven by failure analysis (seed 004 §4-5, ``MutationProposer``).

Each generation starts from the current best configuration: it reads the parameter block of its
section, counts the best trial's failing (train) samples per failure category, and proposes, for
the most frequent categories first, one candidate per operator the table maps the category to.
With ``combine: true`` the first proposal applies the first operator of every failing category
at once. Operators that change nothing and configurations already tried are skipped. The run
stops when the best fails no sample (target reached) or no operator has anything new to propose.

The table is configuration, e.g.::

    table:
      injury:      [{op: threshold, param: health_threshold, delta: 0.1, direction: increase}]
      starvation:  [{op: threshold, param: hunger_threshold, delta: 0.1, direction: decrease}]
      combat_loss: [{op: priority, param: skill_priority, operation: prioritize, item: flee}]
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, model_validator

from optiflow.core.base import Frozen
from optiflow.core.optimize.configuration import TreatmentFactor, config_hash, config_sections, with_section
from optiflow.core.optimize.failures import Categorize, analyze_failures
from optiflow.core.optimize.history import TrialHistory
from optiflow.core.optimize.operators import MutationOperator, Values
from optiflow.core.optimize.params import ParameterBlockSpec
from optiflow.core.optimize.protocol import (
    CONTINUE,
    CandidateProposal,
    OptimizerState,
    RunContext,
    StopDecision,
    StopReason,
    observe_best,
)
from optiflow.core.optimize.trial import TrialResult
from optiflow.core.sections import path_str


class StructuredOptimizerSpec(Frozen):
    type: Literal["structured"] = "structured"
    block: ParameterBlockSpec
    table: dict[str, tuple[MutationOperator, ...]] = Field(min_length=1)
    categorize: Categorize = "tags"
    combine: StrictBool = False
    stop_when_no_failures: StrictBool = True

    @model_validator(mode="after")
    def _operators_fit_the_block(self) -> StructuredOptimizerSpec:
        for category, ops in self.table.items():
            for op in ops:
                try:
                    op.check(self.block)
                except Exception as exc:
                    raise ValueError(f"table.{category}: {exc}") from None
        return self

    def default_treatment(self) -> TreatmentFactor | None:
        return TreatmentFactor(sections=(self.block.section,))

    def description(self) -> str:
        return (
            f"Structured mutation of {path_str(self.block.section)} parameters "
            f"({', '.join(self.block.params)}) from failure analysis"
        )


class StructuredMutationOptimizer:
    def __init__(self, spec: StructuredOptimizerSpec) -> None:
        self.spec = spec

    def description(self) -> str:
        return self.spec.description()

    def initialize(self, context: RunContext) -> OptimizerState:
        body = config_sections(context.baseline_configuration).get(self.spec.block.section)
        if body is None:
            raise ValueError(f"section {path_str(self.spec.block.section)} is not in the treatment factor")
        self.spec.block.parse(body)  # fails early when the block is not there
        return OptimizerState(
            best_candidate_id=context.baseline_candidate_id, best_score=context.baseline_score
        )

    def mutations(self, values: Values, history: TrialHistory, best: TrialResult) -> list[tuple[Values, str]]:
        """Candidate values with their rationale, most frequent failure category first."""
        analysis = analyze_failures(
            best.failing, categories=list(self.spec.table), categorize=self.spec.categorize
        )
        out: list[tuple[Values, str]] = []
        block = self.spec.block
        if self.spec.combine and len(analysis.failure_counts) > 1:
            combined: Values = dict(values)
            parts: list[str] = []
            for category in analysis.failure_counts:
                new, desc = self.spec.table[category][0].apply(combined, block)
                if new != combined:
                    combined, parts = new, [*parts, f"{category}: {desc}"]
            if len(parts) > 1:
                out.append((combined, "Combined: " + "; ".join(parts)))
        for category, count in analysis.failure_counts.items():
            for op in self.spec.table[category]:
                new, desc = op.apply(values, block)
                if new != values:
                    out.append((new, f"{category} x{count}: {desc}"))
        return out

    def propose(
        self, state: OptimizerState, history: TrialHistory, max_candidates: int
    ) -> list[CandidateProposal]:
        best = history.trial(state.best_candidate_id or "")
        if best is None:
            return []
        path = self.spec.block.section
        body = config_sections(best.configuration)[path]
        values = self.spec.block.parse(body)
        seen = set(history.seen_hashes())
        proposals: list[CandidateProposal] = []
        for new_values, rationale in self.mutations(values, history, best):
            config = with_section(best.configuration, path, self.spec.block.render(body, new_values))
            digest = config_hash(config)
            if digest in seen:
                continue
            seen.add(digest)
            proposals.append(
                CandidateProposal(
                    configuration=config, parent_candidate_ids=(best.candidate_id,), rationale=rationale
                )
            )
            if len(proposals) >= max_candidates:
                break
        return proposals

    def observe(self, state: OptimizerState, trial_results: list[TrialResult]) -> OptimizerState:
        return observe_best(state, trial_results)

    def should_stop(self, state: OptimizerState, history: TrialHistory) -> StopDecision:
        best = history.trial(state.best_candidate_id or "")
        if self.spec.stop_when_no_failures and best is not None and not best.failing:
            return StopDecision(
                should_stop=True, reason=StopReason.TARGET_REACHED, message="no failing sample left"
            )
        return CONTINUE


__all__ = ["StructuredMutationOptimizer", "StructuredOptimizerSpec"]
