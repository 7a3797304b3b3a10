"""A finished job's outcome in a few words (pure): what the jobs list shows.

Computed from the job's result once, when it ends, and stored beside it, so listing jobs reads
a small column instead of every job's spec and result (issue 27: 20 jobs with 4 MB prompts made a
list of 100 take 3.5 s and the API's memory grow from 151 MB to 1.17 GB).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from optiflow.core.drift.output import pts
from optiflow.core.drift.report import DriftReport
from optiflow.core.optimize.output import fmt_score


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


_UNCONFIRMED = "not confirmed on held-out data"


def unconfirmed(report: Mapping[str, Any]) -> bool:
    """An optimize report whose best the held-out test split did not confirm (``test.confirmed``
    False, or its gain summary says so): the job did not improve, nothing is applied."""
    test = report.get("test")
    if isinstance(test, Mapping) and test.get("confirmed") is False:
        return True
    summary = report.get("gain_summary")
    return isinstance(summary, str) and summary.startswith(_UNCONFIRMED)


def outcome_of(result: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What a finished job found, in a few words for the jobs list: the tokens a compress job
    saved, an optimize job's best score against its baseline, a measure job's pass rate. ``bad``:
    the job's report says its caller should fail (a measure job under its floor: exit 3)."""
    report = (result or {}).get("report")
    if not isinstance(report, Mapping):
        return None
    kind = report.get("kind", "compress")
    if kind == "compress":
        saved = number(report.get("total_token_reduction")) or 0
        accepted, rejected = len(report.get("modifications") or ()), len(report.get("rejected") or ())
        text = f"\N{MINUS SIGN}{saved:,.0f} tokens · {accepted} accepted, {rejected} rejected"
        return {"text": text, "bad": False}
    if kind == "optimize":
        iterations = [i for i in report.get("iterations") or () if isinstance(i, Mapping)]
        if not iterations:
            return None
        first, last = number(iterations[0].get("best_so_far")), number(iterations[-1].get("best_so_far"))
        changed = report.get("best_candidate_id") != report.get("baseline_candidate_id")
        headline = report.get("headline")
        if isinstance(headline, str) and headline:  # the selection's own estimate
            return {"text": headline, "bad": False}
        if not changed:
            text = f"baseline {fmt_score(first)} kept: no better candidate"
        elif unconfirmed(report):
            text = f"raw score {fmt_score(first)} → {fmt_score(last)}: not confirmed on held-out data"
        else:
            text = f"raw score {fmt_score(first)} → {fmt_score(last)} (as evaluated, not an estimate)"
        return {"text": text, "bad": False}
    if kind == "measure":
        rate, wilson = number(report.get("pass_rate")), report.get("wilson")
        lower = number(wilson.get("lower")) if isinstance(wilson, Mapping) else None
        floor = number(report.get("fail_below"))
        if rate is None:
            return None
        text = f"pass rate {rate:.1%}"
        bad = floor is not None and lower is not None and lower < floor
        if floor is not None and lower is not None:
            text += f" · lower bound {lower:.1%} {'under' if bad else 'above'} the floor {floor:.1%}"
        drift = _drift(report.get("drift"))
        if drift is not None and drift.drop_shown:
            if drift.change is not None:
                text += f" · drift shown: {pts(drift.change.estimate)} against the reference"
            else:
                text += " · drift shown against the reference"
            return {"text": text, "bad": True, "badge": "below floor" if bad else "drift shown"}
        return {"text": text, "bad": bad}
    return None


def _drift(drift: Any) -> DriftReport | None:
    """A measure's drift finding, or None (none, or stored by another version: no mark rather
    than an error)."""
    if not isinstance(drift, Mapping):
        return None
    try:
        return DriftReport.model_validate(drift)
    except ValueError:
        return None


__all__ = ["number", "outcome_of", "unconfirmed"]
