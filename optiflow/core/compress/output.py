"""A compress report as text: the closing box of ``optiflow watch`` / ``report``."""

from __future__ import annotations

from optiflow.core.base import Verbosity
from optiflow.core.compress.report import OptimizationReport
from optiflow.core.sections import path_str


def headline(report: OptimizationReport) -> str:
    return (
        f"accepted {len(report.modifications)}, rejected {len(report.rejected)}, "
        f"-{report.total_token_reduction} tokens"
    )


def report_lines(report: OptimizationReport, *, stats: bool = True) -> list[str]:
    lines = [
        f"prompt {report.prompt_ns}/{report.prompt_key}  baseline pass rate {report.baseline_pass_rate:.1%}"
    ]
    if report.modifications:
        lines.append(
            f"accepted ({len(report.modifications)}), -{report.total_token_reduction} tokens in total:"
        )
        for m in report.modifications:
            lines.append(
                f"  + {path_str(m.section_path):<28} -{m.token_reduction:>5} tokens  "
                f"pass rate {m.candidate_pass_rate:.1%}"
            )
    else:
        lines.append("accepted: none")
    for r in report.rejected:
        bound = "≥" if r.regression_count_is_lower_bound else ""
        head = f"  - {path_str(r.section_path):<28} -{r.token_reduction:>5} tokens  "
        if r.reason.startswith("undecided"):  # the budget ran out before its decision
            lines.append(f"{head}not accepted at {r.stage}: undecided, the budget ran out")
            continue
        lines.append(f"{head}rejected at {r.stage}: {bound}{r.regression_count} regression(s)")
    for e in report.proposal_errors:
        lines.append(f"  ! {path_str(e.path):<28} proposal failed: {e.error}")
    if stats:
        s = report.stats
        lines.append(
            f"evaluations {s.evaluations}: model calls {s.model_calls}, cache hits {s.cache_hits}, "
            f"fail-fast skipped {s.fail_fast_skipped}; proposals {s.proposal_calls}; steps {s.steps}"
        )
    return lines


def render(report: OptimizationReport, verbosity: Verbosity = "summary") -> str:
    """``minimal`` one line, ``summary`` the report, ``full`` with what it cost."""
    if verbosity == "minimal":
        return headline(report)
    return "\n".join(f"  {line}" for line in report_lines(report, stats=verbosity == "full"))


__all__ = ["headline", "render", "report_lines"]
