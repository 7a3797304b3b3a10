"""Drift as text: the line ``optiflow report`` and the cron log print, and why a job exits 4."""

from __future__ import annotations

import math

from optiflow.core.drift.estimate import Change
from optiflow.core.drift.report import DriftReport, ReferenceInfo

DRIFTED = 4
"""Exit code of a measure job that shows a drop since its reference."""


def pts(value: float) -> str:
    """A pass-rate change in points, signed with a real minus: ``-9.8%``, ``+2.0%``."""
    text = f"{value:+.1%}"
    return text.replace("-", "\N{MINUS SIGN}")


def interval(change: Change) -> str:
    return f"{pts(change.estimate)} [{pts(change.low)}, {pts(change.high)}]"


def evidence_text(log_value: float) -> str:
    """An e-value that may be far beyond a float: ``0.31``, ``5.4e+04``, ``1e+412``."""
    if log_value < math.log(1e6):
        value = math.exp(log_value)
        return f"{value:.2g}" if value < 100 else f"{value:.0f}"
    exponent = log_value / math.log(10)
    if exponent < 300:
        return f"{math.exp(log_value):.1e}"
    return f"1e+{exponent:.0f}"


def _reference(ref: ReferenceInfo | None) -> str:
    if ref is None:
        return "the reference"
    return f"the reference of {ref.created_at:%Y-%m-%d %H:%M} (job {ref.job_id[:8]})"


def headline(report: DriftReport) -> str:
    """One line: ``no drift shown (drop < X% with 95% confidence)``, ``drift: -Y% [..]``, or what
    happened instead (a new reference, no comparison)."""
    if report.status == "off":
        return f"drift: not checked ({report.reason})"
    if report.status == "reference":
        return f"drift: this measure is the reference from now on ({report.reason})"
    change, e = report.change, report.evidence
    assert change is not None and e is not None
    conf = f"{change.confidence:.0%}"
    if e.drop_shown:
        when = (
            f"shown tonight (night {e.night})"
            if e.first_shown == e.night
            else f"shown on night {e.first_shown}, still shown until a new reference is set"
        )
        return f"drift: {interval(change)} against {_reference(report.reference)}: a drop {when}"
    line = (
        f"no drift shown (drop < {change.drop_bound:.1%} with {conf} confidence): tonight "
        f"{interval(change)} against {_reference(report.reference)}"
    )
    if e.shown == "gain":
        line += "; a gain shown (reported, not an error)"
    return line


def detail(report: DriftReport) -> list[str]:
    """The figures under the headline: the evidence against its threshold, the samples that flipped."""
    e = report.evidence
    if report.status != "compared" or e is None:
        return []
    need = evidence_text(e.threshold)
    out = [
        f"night {e.night}: evidence of a drop {evidence_text(e.log_drop)} (needs {need}: alpha_k "
        f"{e.alpha:.2g} of alpha {report.alpha:g}; most over the last {e.window} night(s)), of a gain "
        f"{evidence_text(e.log_gain)}; powered for a drop of {report.margin:.0%}"
    ]
    if e.windows:
        out.append(
            f"weighed the {e.windows} shortest windows only: the longer ones are past the work bound "
            "of one night (the evidence is still an e-value)"
        )
    if e.drop_shown and e.flips:
        out.append("samples that flipped most: " + ", ".join(f.line() for f in e.flips))
    return out


def verdict(report: DriftReport | None) -> tuple[int, str] | None:
    """(4, message) when a drop is shown; None otherwise (a gain is not an error)."""
    if report is None or not report.drop_shown:
        return None
    return DRIFTED, headline(report)


__all__ = ["DRIFTED", "detail", "evidence_text", "headline", "interval", "pts", "verdict"]
