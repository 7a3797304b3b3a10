"""Plain-text rendering of results for the terminal (what each kind's report says comes from
:mod:`optiflow.core.kinds`)."""

from __future__ import annotations

import re
import textwrap

from optiflow.core import kinds
from optiflow.core.base import Verbosity
from optiflow.core.evaluation import JobStats
from optiflow.core.optimize.output import BOX_WIDTH
from optiflow.core.optimize.report import OptimizationHistory
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


def cost_line(stats: JobStats) -> str:
    """The model calls a job made, in one line, and the evaluations that needed none (a count of
    calls, not money: the dollars are on the report's own line)."""
    proposals = f" (+{stats.proposal_calls} for proposals)" if stats.proposal_calls else ""
    return (
        f"model calls: {stats.model_calls}{proposals} for {stats.evaluations} evaluations; "
        f"{stats.cache_hits} cache hit(s), {stats.fail_fast_skipped} fail-fast skip(s)"
    )


def boxed(title: str, text: str) -> str:
    """``text`` in the summary box an optimize job's report is drawn in (seed 003's), under
    ``title``: the closing box of ``optiflow watch`` for every kind."""
    inner = BOX_WIDTH - 2
    width = inner - 4

    def rows(body: str) -> list[str]:
        out = []
        for line in body.splitlines():
            if not line.strip():
                continue
            stripped = re.sub(r"\s{3,}", "  ", line.strip())  # a column's padding, not needed here
            lead = " " * max(0, len(line) - len(line.lstrip()) - 2)  # the report's two-space margin
            wrapped = textwrap.wrap(stripped, width=width, initial_indent=lead, subsequent_indent=lead + "  ")
            out += [f"║  {w:<{inner - 2}}║" for w in wrapped or [lead]]
        return out

    return "\n".join(
        ["╔" + "═" * inner + "╗", *rows(title), "╠" + "═" * inner + "╣", *rows(text), "╚" + "═" * inner + "╝"]
    )


def summary_box(result: OptimizeResult, verbosity: Verbosity = "summary") -> str:
    """The closing box of ``optiflow watch``: an optimize job's own (seed 003's summary box); a
    compress or measure job's report in the same frame, its status and cost line included."""
    report = result.report
    assert report is not None
    if isinstance(report, OptimizationHistory) or verbosity == "minimal":
        return format_result(result, verbosity=verbosity)
    title = f"{report.kind.upper()}: job {result.job_id} {result.status}"
    body = kinds.render(report, verbosity)
    if result.error:
        body = f"  error: {result.error}\n{body}"
    if verbosity != "full":  # full's report already counts what it cost
        body += f"\n  {cost_line(report.stats)}"
    return boxed(title, body)
