"""The compress job (seed 000): spec, report, workflow and the rule-based compressor."""

from __future__ import annotations

from optiflow.core.compress.report import Modification, OptimizationReport, RejectedModification
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.compress.workflow import CompressState, CompressWorkflow

__all__ = [
    "CompressSpec",
    "CompressState",
    "CompressWorkflow",
    "Modification",
    "OptimizationReport",
    "RejectedModification",
]
