"""The LLM rewrite mutator (seed 003 §4.4 ``LLMStringFactorMutator``), pure side.

Each generation it asks a model, through :class:`~optiflow.core.actions.RewriteRequest` data, for
``max_candidates`` new bodies of one treatment section (rotating over the sections by
generation), starting from the current best's body and showing the last
``recent_iterations`` iterations' scores and the best's failing samples. The driver runs the
requests (:func:`optiflow.llm.rewrite.run_rewrite`); :meth:`LLMRewriteOptimizer.receive` stores
the answers and :meth:`LLMRewriteOptimizer.propose` turns each valid one into a candidate
(:func:`validate_rewrite`: non-empty, at most ``max_length`` characters). When every answer of a
generation is an error or invalid, the optimizer stops (seed 003: a mutation failure ends the run).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictBool, StrictInt, field_validator

from optiflow.core.base import Frozen
from optiflow.core.model import ModelConfig
from optiflow.core.optimize.configuration import TreatmentFactor, config_sections, with_section
from optiflow.core.optimize.history import TrialHistory
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
from optiflow.core.sections import SectionPath, parse_path, path_str
from optiflow.core.step import FailingExample, IterationFeedback, RewriteReply, RewriteRequest
from optiflow.errors import OptiflowError


class RewriteError(OptiflowError):
    """A rewrite answer that cannot be a candidate value."""

    code = "invalid_rewrite"


class RewriteOptimizerSpec(Frozen):
    type: Literal["llm_rewrite"] = "llm_rewrite"
    model: ModelConfig
    sections: tuple[SectionPath, ...] = ()
    """Sections to rewrite; default: every section of the treatment factor."""
    max_length: StrictInt = Field(default=4000, ge=1)
    recent_iterations: StrictInt = Field(default=3, ge=0)
    max_failing: StrictInt = Field(default=8, ge=0)
    instructions: str = ""
    stop_when_no_failures: StrictBool = True
    """Stop (target reached) once the best fails no sample: there is nothing left to fix."""

    @field_validator("sections", mode="before")
    @classmethod
    def _paths(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [value]
        if isinstance(value, list | tuple):
            return tuple(parse_path(v) if isinstance(v, str) else tuple(v) for v in value)
        return value

    def default_treatment(self) -> TreatmentFactor | None:
        return TreatmentFactor(sections=self.sections) if self.sections else None

    def description(self) -> str:
        return f"LLM-based string mutator ({self.model.model}, max length: {self.max_length})"


def validate_rewrite(text: str | None, max_length: int) -> str:
    """The value a rewrite answer proposes; :class:`RewriteError` when empty or too long."""
    value = (text or "").strip()
    if not value:
        raise RewriteError("Factor value cannot be empty", field="rewrite")
    if len(value) > max_length:
        raise RewriteError(
            f"Factor value exceeds max length {max_length} (was {len(value)})", field="rewrite"
        )
    return value


class LLMRewriteOptimizer:
    """A :class:`~optiflow.core.optimize.protocol.ModelAssistedOptimizer`."""

    def __init__(self, spec: RewriteOptimizerSpec, sections: tuple[SectionPath, ...]) -> None:
        self.spec = spec
        self.sections = spec.sections or sections

    def description(self) -> str:
        return self.spec.description()

    def initialize(self, context: RunContext) -> OptimizerState:
        return OptimizerState(
            generation=0,
            best_candidate_id=context.baseline_candidate_id,
            best_score=context.baseline_score,
            algorithm_data={"prompt_id": context.prompt_id, "replies": []},
        )

    def section_for(self, generation: int) -> SectionPath:
        return self.sections[generation % len(self.sections)]

    def requests(
        self, state: OptimizerState, history: TrialHistory, max_candidates: int
    ) -> list[RewriteRequest]:
        best = history.trial(state.best_candidate_id or "")
        if best is None or not self.sections:
            return []
        path = self.section_for(state.generation)
        current = config_sections(best.configuration).get(path)
        if current is None:
            return []
        feedback = tuple(
            IterationFeedback(
                iteration=it.number,
                score=_train(history, it.best_candidate_id, "score"),
                success_rate=_train(history, it.best_candidate_id, "rate"),
            )
            for it in history.last_iterations(self.spec.recent_iterations)
        )
        failing = tuple(
            FailingExample(sample_id=f.sample_id, input=f.input, expected=f.expected, reason=f.reason)
            for f in best.failing
            if f.input is not None
        )[: self.spec.max_failing]
        return [
            RewriteRequest(
                id=f"g{state.generation}-v{variant}",
                model=self.spec.model,
                prompt_id=str(state.algorithm_data.get("prompt_id", "")),
                section=path,
                current=current,
                max_length=self.spec.max_length,
                iterations=feedback,
                failing=failing,
                instructions=self.spec.instructions,
                variant=variant,
            )
            for variant in range(max_candidates)
        ]

    def receive(self, state: OptimizerState, replies: list[RewriteReply]) -> OptimizerState:
        data = {
            **state.algorithm_data,
            "replies": [r.model_dump(mode="json") for r in sorted(replies, key=lambda r: r.id)],
        }
        return state.model_copy(update={"algorithm_data": data})

    def _answers(self, state: OptimizerState) -> list[tuple[RewriteReply, str | None, str | None]]:
        """(reply, valid text or None, error or None) of the current generation's replies."""
        out: list[tuple[RewriteReply, str | None, str | None]] = []
        for raw in state.algorithm_data.get("replies") or []:
            reply = RewriteReply.model_validate(raw)
            if reply.error is not None:
                out.append((reply, None, reply.error))
                continue
            try:
                out.append((reply, validate_rewrite(reply.text, self.spec.max_length), None))
            except RewriteError as exc:
                out.append((reply, None, exc.message))
        return out

    def propose(
        self, state: OptimizerState, history: TrialHistory, max_candidates: int
    ) -> list[CandidateProposal]:
        best = history.trial(state.best_candidate_id or "")
        if best is None:
            return []
        path = self.section_for(state.generation)
        proposals = []
        for reply, text, _ in self._answers(state):
            if text is None:
                continue
            proposals.append(
                CandidateProposal(
                    configuration=with_section(best.configuration, path, text),
                    parent_candidate_ids=(best.candidate_id,),
                    rationale=f"LLM rewrite of {path_str(path)} ({reply.id}) from "
                    f"{len(best.failing)} failing sample(s)",
                )
            )
        return proposals[:max_candidates]

    def observe(self, state: OptimizerState, trial_results: list[TrialResult]) -> OptimizerState:
        return observe_best(state, trial_results)

    def should_stop(self, state: OptimizerState, history: TrialHistory) -> StopDecision:
        answers = self._answers(state)
        if answers and all(text is None for _, text, _ in answers):
            return StopDecision(
                should_stop=True,
                reason=StopReason.ALGORITHM_SPECIFIC,
                message=f"mutation failed: {answers[0][2]}",
            )
        best = history.trial(state.best_candidate_id or "")
        if self.spec.stop_when_no_failures and best is not None and best.completed and not best.failing:
            return StopDecision(
                should_stop=True, reason=StopReason.TARGET_REACHED, message="no failing sample left"
            )
        return CONTINUE


def _train(history: TrialHistory, candidate_id: str | None, what: str) -> float | None:
    trial = history.trial(candidate_id) if candidate_id else None
    if trial is None:
        return None
    return trial.objective_score if what == "score" else trial.summary.pass_rate


__all__ = ["LLMRewriteOptimizer", "RewriteError", "RewriteOptimizerSpec", "validate_rewrite"]
