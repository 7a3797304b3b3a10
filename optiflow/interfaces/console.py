"""Plain-text rendering of results for the terminal (what each kind's report says comes from
:mod:`optiflow.core.kinds`)."""

from __future__ import annotations

from optiflow.core import kinds
from optiflow.core.base import Verbosity
from optiflow.core.result import OptimizeResult


def format_result(
    result: OptimizeResult, *, elapsed_s: float | None = None, verbosity: Verbosity = "summary"
) -> str:
    """``job ID: status``, its error, the report at ``verbosity``, the wall time."""
    head = f"job {result.job_id}: {result.status}"
    if result.error:
        head += f" ({result.error})" if verbosity == "minimal" else f"\n  error: {result.error}"
    lines = [head]
    if result.report is not None:
        text = kinds.render(result.report, verbosity)
        if verbosity == "minimal":
            lines[0] += f"; {text}"
        else:
            lines.append(text)
    if elapsed_s is not None:
        lines.append(f"  wall time {elapsed_s:.2f}s")
    return "\n".join(lines)
