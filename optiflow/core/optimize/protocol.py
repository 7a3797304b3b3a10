"""The optimizer contract (seed 001 §8): what an algorithm implements, and the data it exchanges.

Optimizer algorithms decide *what to test next*; the framework (the optimize workflow) decides
how to run, persist and report. An optimizer object is stateless: everything it remembers lives
in :class:`OptimizerState` (JSON, checkpointed with the workflow every step), so a resumed job
continues with a freshly built optimizer.

An optimizer whose proposals need a model call (the LLM rewrite mutator) also implements
:class:`ModelAssistedOptimizer`: ``requests`` returns the calls as data, the driver runs them in
one step, and ``receive`` stores the answers in the state before ``propose`` reads them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol, runtime_checkable

from pydantic import Field

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.optimize.configuration import Configuration, TreatmentFactor
from optiflow.core.optimize.history import TrialHistory
from optiflow.core.optimize.scoring import Objective
from optiflow.core.optimize.trial import TrialResult
from optiflow.core.step import RewriteReply, RewriteRequest


class RunContext(Frozen):
    """Created once the baseline trial completed (seed 001 §8.2), before ``initialize``."""

    optimization_id: str
    evaluation_suite_id: str
    objective_name: str
    objective: Objective = Objective.MAXIMIZE
    baseline_candidate_id: str
    baseline_score: float
    max_candidates_per_step: int = Field(ge=1)
    baseline_configuration: Configuration
    treatment: TreatmentFactor
    prompt_id: str = ""


class OptimizerState(Frozen):
    """Seed 001 §8.3. ``algorithm_data`` must be JSON (it is checkpointed)."""

    generation: int = Field(default=0, ge=0)
    best_candidate_id: str | None = None
    best_score: float | None = None
    algorithm_data: dict[str, JSONValue] = Field(default_factory=dict)


class CandidateProposal(Frozen):
    """Seed 001 §8.4: a full configuration, its lineage and why. The id is assigned on acceptance."""

    configuration: Configuration
    parent_candidate_ids: tuple[str, ...] = ()
    rationale: str | None = None


class StopReason(StrEnum):
    TARGET_REACHED = "target_reached"
    CONVERGENCE = "convergence"
    NO_IMPROVEMENT = "no_improvement"
    ALGORITHM_SPECIFIC = "algorithm_specific"


class StopDecision(Frozen):
    should_stop: bool
    reason: StopReason | None = None
    message: str | None = None


CONTINUE = StopDecision(should_stop=False)


@runtime_checkable
class Optimizer(Protocol):
    """Seed 001 §8.1."""

    def initialize(self, context: RunContext) -> OptimizerState: ...

    def propose(
        self, state: OptimizerState, history: TrialHistory, max_candidates: int
    ) -> list[CandidateProposal]: ...

    def observe(self, state: OptimizerState, trial_results: list[TrialResult]) -> OptimizerState: ...

    def should_stop(self, state: OptimizerState, history: TrialHistory) -> StopDecision: ...

    def description(self) -> str: ...


@runtime_checkable
class ModelAssistedOptimizer(Optimizer, Protocol):
    """An optimizer whose proposals need model calls, expressed as :class:`RewriteRequest` data."""

    def requests(
        self, state: OptimizerState, history: TrialHistory, max_candidates: int
    ) -> list[RewriteRequest]: ...

    def receive(self, state: OptimizerState, replies: list[RewriteReply]) -> OptimizerState: ...


def observe_best(state: OptimizerState, trial_results: list[TrialResult]) -> OptimizerState:
    """The common part of ``observe``: next generation, and the framework's accepted best."""
    best_id, best_score = state.best_candidate_id, state.best_score
    for t in trial_results:
        if t.accepted:
            best_id, best_score = t.candidate_id, t.acceptance_score
    return state.model_copy(
        update={"generation": state.generation + 1, "best_candidate_id": best_id, "best_score": best_score}
    )


__all__ = [
    "CONTINUE",
    "CandidateProposal",
    "ModelAssistedOptimizer",
    "Optimizer",
    "OptimizerState",
    "RunContext",
    "StopDecision",
    "StopReason",
    "observe_best",
]
