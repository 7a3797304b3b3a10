"""A measure job's baseline document as text."""

from __future__ import annotations

from optiflow.core.base import Verbosity
from optiflow.core.drift import output as drift_output
from optiflow.core.measure.report import MeasureDocument


def headline(doc: MeasureDocument) -> str:
    w = doc.wilson
    return (
        f"pass rate {doc.pass_rate:.1%} ({w.confidence:.0%} Wilson interval {w.lower:.1%} .. {w.upper:.1%})"
    )


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def report_lines(doc: MeasureDocument, verbosity: Verbosity = "summary") -> list[str]:
    lat, ttft = doc.latency_ms, doc.ttft_ms
    lines = [
        f"prompt {doc.prompt_ns}/{doc.prompt_key}@{doc.tag}  model {doc.model}  {doc.runs} run(s) x "
        f"{doc.samples} samples",
        f"{headline(doc)}; passed in every run {doc.consistently_passed}/{doc.samples}; errors {doc.errors}",
    ]
    if verbosity != "minimal":
        lines += [
            f"tokens {doc.total_tokens} (mean {doc.mean_tokens:.0f}); cost ${doc.total_cost:.6f}",
            f"latency ms p50 {_ms(lat.p50)} p95 {_ms(lat.p95)} p99 {_ms(lat.p99)}; "
            f"ttft ms p50 {_ms(ttft.p50)} p95 {_ms(ttft.p95)} p99 {_ms(ttft.p99)}",
        ]
    if doc.budget_exhausted:
        lines.append(
            f"the budget ran out: {doc.evaluations} of {doc.planned} evaluations made; the pass rate, "
            "its interval and the rest are over those"
        )
    if doc.fail_below is not None:
        lines.append(f"fail below {doc.fail_below:.1%}: lower bound {doc.wilson.lower:.1%} -> {verdict(doc)}")
    if doc.drift is not None:
        lines.append(drift_output.headline(doc.drift))
        if verbosity != "minimal":
            lines += drift_output.detail(doc.drift)
    return lines


def verdict(doc: MeasureDocument) -> str:
    return "FAIL" if doc.failed else "ok"


__all__ = ["headline", "report_lines", "verdict"]
