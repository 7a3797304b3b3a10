"""Plain-text rendering of results for the terminal."""

from __future__ import annotations

from optiflow.core.prompt import path_str
from optiflow.core.result import OptimizeResult


def format_result(result: OptimizeResult, *, elapsed_s: float | None = None) -> str:
    lines = [f"job {result.job_id}: {result.status}"]
    if result.error:
        lines.append(f"  error: {result.error}")
    report = result.report
    if report is None:
        return "\n".join(lines)
    lines.append(
        f"  prompt {report.prompt_ns}/{report.prompt_key}  baseline pass rate {report.baseline_pass_rate:.1%}"
    )
    if report.modifications:
        lines.append(
            f"  accepted ({len(report.modifications)}), -{report.total_token_reduction} tokens in total:"
        )
        for m in report.modifications:
            lines.append(
                f"    + {path_str(m.section_path):<28} -{m.token_reduction:>5} tokens  "
                f"pass rate {m.candidate_pass_rate:.1%}"
            )
    else:
        lines.append("  accepted: none")
    for r in report.rejected:
        bound = "≥" if r.regression_count_is_lower_bound else ""
        lines.append(
            f"    - {path_str(r.section_path):<28} -{r.token_reduction:>5} tokens  rejected at {r.stage}: "
            f"{bound}{r.regression_count} regression(s)"
        )
    for e in report.proposal_errors:
        lines.append(f"    ! {path_str(e.path):<28} proposal failed: {e.error}")
    s = report.stats
    lines.append(
        f"  evaluations {s.evaluations}: model calls {s.model_calls}, cache hits {s.cache_hits}, "
        f"fail-fast skipped {s.fail_fast_skipped}; proposals {s.proposal_calls}; steps {s.steps}"
    )
    if elapsed_s is not None:
        lines.append(f"  wall time {elapsed_s:.2f}s")
    return "\n".join(lines)
