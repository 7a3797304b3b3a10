"""Plain-text rendering of results for the terminal."""

from __future__ import annotations

from typing import Literal

from optiflow.core.compress import OptimizationReport
from optiflow.core.measure import MeasureDocument
from optiflow.core.optimize.output import summary_box
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.core.prompt import path_str
from optiflow.core.result import OptimizeResult

Verbosity = Literal["minimal", "summary", "full"]


def format_result(
    result: OptimizeResult, *, elapsed_s: float | None = None, verbosity: Verbosity = "summary"
) -> str:
    lines = [f"job {result.job_id}: {result.status}"]
    if result.error:
        lines.append(f"  error: {result.error}")
    report = result.report
    if isinstance(report, OptimizationHistory):
        lines.append(summary_box(report, verbosity))
    elif isinstance(report, MeasureDocument):
        lines += format_measure(report)
    elif isinstance(report, OptimizationReport):
        lines += format_compress(report)
    if elapsed_s is not None:
        lines.append(f"  wall time {elapsed_s:.2f}s")
    return "\n".join(lines)


def format_measure(doc: MeasureDocument) -> list[str]:
    w = doc.wilson
    lat, ttft = doc.latency_ms, doc.ttft_ms

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.0f}"

    lines = [
        f"  prompt {doc.prompt_ns}/{doc.prompt_key}@{doc.tag}  model {doc.model}  {doc.runs} run(s) x "
        f"{doc.samples} samples",
        f"  pass rate {doc.pass_rate:.1%}  ({w.confidence:.0%} Wilson interval {w.lower:.1%} .. "
        f"{w.upper:.1%}); passed in every run {doc.consistently_passed}/{doc.samples}; errors {doc.errors}",
        f"  tokens {doc.total_tokens} (mean {doc.mean_tokens:.0f}); cost {doc.total_cost:.6f}",
        f"  latency ms p50 {ms(lat.p50)} p95 {ms(lat.p95)} p99 {ms(lat.p99)}; "
        f"ttft ms p50 {ms(ttft.p50)} p95 {ms(ttft.p95)} p99 {ms(ttft.p99)}",
    ]
    if doc.fail_below is not None:
        verdict = "FAIL" if doc.failed else "ok"
        lines.append(f"  fail below {doc.fail_below:.1%}: lower bound {w.lower:.1%} -> {verdict}")
    return lines


def format_compress(report: OptimizationReport) -> list[str]:
    lines = []
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
    return lines
