"""The optimize job (seeds 001-004): optimizer framework, optimizers, scoring, termination, history.

Modules, one concept each: :mod:`.configuration` (treatment factor, canonical config hash),
:mod:`.protocol` (Optimizer, RunContext, OptimizerState, CandidateProposal, StopDecision),
:mod:`.trial` and :mod:`.history` (TrialResult, TrialHistory, iterations), :mod:`.validation`
(rejections with reason codes), :mod:`.lineage`, :mod:`.scoring`, :mod:`.termination`,
:mod:`.acceptance` (Mann-Whitney U), the optimizers (:mod:`.rewrite`, :mod:`.structured` with
:mod:`.params`, :mod:`.operators` and :mod:`.failures`, :mod:`.search`), :mod:`.spec`,
:mod:`.state`, :mod:`.workflow`, and the outputs (:mod:`.report`, :mod:`.output`,
:mod:`.document`, :mod:`.replay`).
"""

from optiflow.core.optimize.acceptance import AcceptanceSpec, mann_whitney_p
from optiflow.core.optimize.configuration import TreatmentFactor, canonical, config_hash, make_config
from optiflow.core.optimize.history import IterationRecord, TrialHistory
from optiflow.core.optimize.lineage import LineageGraph, lineage
from optiflow.core.optimize.protocol import (
    CandidateProposal,
    ModelAssistedOptimizer,
    Optimizer,
    OptimizerState,
    RunContext,
    StopDecision,
    StopReason,
)
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.core.optimize.scoring import Objective
from optiflow.core.optimize.spec import OptimizeSpec
from optiflow.core.optimize.state import OptimizeState
from optiflow.core.optimize.termination import TerminationCause, TerminationReason
from optiflow.core.optimize.trial import TrialResult
from optiflow.core.optimize.validation import Rejection
from optiflow.core.optimize.workflow import OptimizeWorkflow

__all__ = [
    "AcceptanceSpec",
    "CandidateProposal",
    "IterationRecord",
    "LineageGraph",
    "ModelAssistedOptimizer",
    "Objective",
    "OptimizationHistory",
    "OptimizeSpec",
    "OptimizeState",
    "OptimizeWorkflow",
    "Optimizer",
    "OptimizerState",
    "Rejection",
    "RunContext",
    "StopDecision",
    "StopReason",
    "TerminationCause",
    "TerminationReason",
    "TreatmentFactor",
    "TrialHistory",
    "TrialResult",
    "canonical",
    "config_hash",
    "lineage",
    "make_config",
    "mann_whitney_p",
]
