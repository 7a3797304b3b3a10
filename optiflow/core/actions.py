"""What a workflow asks the driver to do next: run a :class:`~optiflow.core.step.Step`, finish
with a report, or fail. :data:`Action` is a discriminated union (``type``), so the pending action
stored with a job's checkpoint is the model's own JSON, and :data:`Report` likewise (``kind``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, TypeAdapter

from optiflow.core.base import Frozen
from optiflow.core.compress.report import OptimizationReport
from optiflow.core.measure.report import MeasureDocument
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.core.step import Step


def _report_kind(value: Any) -> str:
    """A report's kind: its ``kind`` field; for a report stored before reports had one, from its
    shape."""
    if not isinstance(value, dict):
        return str(getattr(value, "kind", "compress"))
    if "kind" in value:
        return str(value["kind"])
    if "wilson" in value:
        return "measure"
    return "optimize" if "iterations" in value else "compress"


Report = Annotated[
    Annotated[OptimizationReport, Tag("compress")]
    | Annotated[OptimizationHistory, Tag("optimize")]
    | Annotated[MeasureDocument, Tag("measure")],
    Discriminator(_report_kind),
]
"""A finished job's report: one model per job kind."""


class Finish(Frozen):
    type: Literal["finish"] = "finish"
    report: Report


class Fail(Frozen):
    """The job ends ``failed`` with ``error``; ``code``, when set, is the stable code of the
    :class:`~optiflow.errors.OptiflowError` that ended it (its text starts with it too)."""

    type: Literal["fail"] = "fail"
    error: str
    code: str | None = None


Action = Annotated[Step | Finish | Fail, Field(discriminator="type")]
ACTION: TypeAdapter[Step | Finish | Fail] = TypeAdapter(Action)
REPORT: TypeAdapter[OptimizationReport | OptimizationHistory | MeasureDocument] = TypeAdapter(Report)

__all__ = ["ACTION", "REPORT", "Action", "Fail", "Finish", "Report", "Step"]
