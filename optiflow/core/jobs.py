"""The job kinds in one place: their specs, workflows and reports (pure).

Every kind follows the same shape (DESIGN.md §3): a frozen spec saved at submission, a workflow
``start(count_tokens) -> (state, action)`` / ``advance(state, results) -> (state, action)`` whose
state round-trips through JSON (the checkpoint), and a report in ``Finish``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Protocol

from pydantic import Field, TypeAdapter

from optiflow.core.actions import Action, StepResults
from optiflow.core.base import Frozen
from optiflow.core.compress import CompressSpec, CompressWorkflow, OptimizationReport
from optiflow.core.measure import MeasureDocument, MeasureSpec, MeasureWorkflow
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.core.optimize.spec import OptimizeSpec
from optiflow.core.optimize.workflow import OptimizeWorkflow

KINDS = ("compress", "optimize", "measure")
JobSpec = Annotated[CompressSpec | OptimizeSpec | MeasureSpec, Field(discriminator="kind")]
Report = OptimizationReport | OptimizationHistory | MeasureDocument
REPORTS: dict[str, type[Frozen]] = {
    "compress": OptimizationReport,
    "optimize": OptimizationHistory,
    "measure": MeasureDocument,
}
_SPEC: TypeAdapter[CompressSpec | OptimizeSpec | MeasureSpec] = TypeAdapter(JobSpec)


class Workflow(Protocol):
    """What the driver needs of a job kind's workflow."""

    def start(self, count_tokens: Callable[[str], int]) -> tuple[Any, Action]: ...

    def advance(self, state: Any, results: StepResults) -> tuple[Any, Action]: ...

    def load_state(self, data: Mapping[str, Any]) -> Any: ...


def parse_spec(data: Mapping[str, Any]) -> CompressSpec | OptimizeSpec | MeasureSpec:
    """A stored spec (``kind`` defaults to compress, as job files do)."""
    return _SPEC.validate_python({"kind": "compress", **data})


def workflow_for(spec: CompressSpec | OptimizeSpec | MeasureSpec, job_id: str) -> Workflow:
    if isinstance(spec, CompressSpec):
        return CompressWorkflow(spec, job_id)
    if isinstance(spec, OptimizeSpec):
        return OptimizeWorkflow(spec, job_id)
    return MeasureWorkflow(spec, job_id)


def parse_report(kind: str, data: Mapping[str, Any]) -> Report:
    report = REPORTS[kind].model_validate(data)
    assert isinstance(report, OptimizationReport | OptimizationHistory | MeasureDocument)
    return report
