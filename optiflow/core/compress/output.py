"""A compress report as text: the closing box of ``optiflow watch`` / ``report``."""

from __future__ import annotations

import textwrap
from itertools import zip_longest

from optiflow.core.base import Verbosity
from optiflow.core.compress.ablation import UNCHECKED, summary
from optiflow.core.compress.extract import logical_lines
from optiflow.core.compress.report import Modification, OptimizationReport
from optiflow.core.gate.decision import GateStats
from optiflow.core.sections import path_str


def headline(report: OptimizationReport) -> str:
    return (
        f"accepted {len(report.modifications)}, rejected {len(report.rejected)}, "
        f"-{report.total_token_reduction} tokens"
    )


def statistic(stats: GateStats | None) -> str:
    """A decision's statistic in a few words: regressions under ``strict``; under ``paired`` the
    gate's own baseline pass rate it compares against (on the same samples, paired runs), the
    estimated drop with its anytime-valid upper bound against the margin."""
    if stats is None:
        return ""
    if stats.gate == "strict":
        return f"strict: {stats.strict_text()}"
    return (
        f"paired: vs baseline {stats.baseline_pass_rate:.1%} over {stats.pairs} run(s): drop "
        f"{stats.drop:+.1%} (bound {stats.drop_high:+.1%} vs margin {stats.margin:.0%})"
    )


def side_by_side(original: str, proposal: str, width: int = 50) -> list[str]:
    """Two columns, ``original | proposal``, each wrapped at ``width`` (paragraphs kept)."""

    def wrap(text: str) -> list[str]:
        out: list[str] = []
        for para in logical_lines(text) or [""]:
            out.extend(textwrap.wrap(para, width) or [""])
        return out

    rows = [f"{'original':<{width}} | proposal", f"{'-' * width}-+-{'-' * width}"]
    rows += [
        f"{a:<{width}} | {b}".rstrip() for a, b in zip_longest(wrap(original), wrap(proposal), fillvalue="")
    ]
    return rows


def seen_loss(g: GateStats | None) -> str:
    """What the gate saw an accepted edit lose ("" when nothing): samples that passed every
    baseline run and not every candidate run, or a drop whose lower bound is above zero. A rule the
    edit dropped is then not "not verified": the dataset noticed something go."""
    if g is None:
        return ""
    if g.regressed:
        more = f" and {len(g.regressed) - 3} more" if len(g.regressed) > 3 else ""
        shown = ", ".join(g.regressed[:3]) + more
        return f"{len(g.regressed)} sample(s) it passed every time ({shown})"
    if g.drop_low > 0:
        return f"a drop of {g.drop:+.1%} (bounds {g.drop_low:+.1%} to {g.drop_high:+.1%}) within the margin"
    return ""


def edit_lines(m: Modification) -> list[str]:
    """An accepted edit's original and proposal side by side, with the faithfulness measure."""
    lines = []
    if m.faithfulness is not None:
        lines.append(f"      faithfulness: {m.faithfulness.line()}")
        lines += [f"        {row}" for row in m.faithfulness.map_lines(seen_loss(m.gate))]
    if m.original_body is not None:
        lines += [f"      {row}" for row in side_by_side(m.original_body, m.proposed_body)]
    return lines


def report_lines(report: OptimizationReport, *, stats: bool = True) -> list[str]:
    prompt = f"{report.prompt_ns}/{report.prompt_key}"
    lines = [f"prompt {prompt}  baseline pass rate {report.baseline_pass_rate:.1%}"]
    a = report.assessment
    if a is not None:
        flaky = f", {a.flaky} flaky sample(s)" if a.flaky else ""
        power = f"; detects drops of {a.detectable_drop:.1%} or more" if a.detectable_drop is not None else ""
        lines.append(f"gate {a.gate} ({a.reason}){power}")
        lines.append(f"baseline: {a.runs} evaluations, {a.errors} error(s) ({a.error_rate:.1%}){flaky}")
    if report.ablation is not None:
        lines.append(summary(report.ablation))
    note = f"  ({UNCHECKED})" if report.sensitivity_unchecked else ""
    if report.modifications:
        saved = report.total_token_reduction
        lines.append(f"accepted ({len(report.modifications)}), -{saved} tokens in total:")
        for m in report.modifications:
            why = statistic(m.gate)
            lines.append(
                f"  + {path_str(m.section_path):<28} -{m.token_reduction:>5} tokens  "
                f"pass rate {m.candidate_pass_rate:.1%}" + (f"  [{why}]" if why else "") + note
            )
            lines += edit_lines(m)
    else:
        lines.append("accepted: none")
    for r in report.rejected:
        bound = "≥" if r.regression_count_is_lower_bound else ""
        what = r.reason or f"{bound}{r.regression_count} regression(s)"
        head = f"  - {path_str(r.section_path):<28} -{r.token_reduction:>5} tokens"
        if r.reason.startswith("undecided") and report.budget is not None and report.budget.exhausted:
            lines.append(f"{head}  not accepted at {r.stage}: undecided, the budget ran out{note}")
            continue
        why = statistic(r.gate) if r.gate is not None and r.gate.gate != "strict" else ""
        lines.append(f"{head}  rejected at {r.stage}: {what}" + (f"  [{why}]" if why else "") + note)
    for e in report.proposal_errors:
        if e.refused:
            lines.append(
                f"  ! {path_str(e.path):<28} proposal {e.error} ({e.attempts} attempt(s), not evaluated)"
            )
            if e.proposed_body is not None:
                lines.append(f"      last proposal: {' '.join(e.proposed_body.split())[:200]!r}")
            continue
        lines.append(f"  ! {path_str(e.path):<28} proposal failed: {e.error}")
    for u in report.untried:
        lines.append(f"  · {path_str(u.path):<28} {u.reason}")
    if report.combined is not None:
        lines.append(f"combined: {statistic(report.combined)}{note}")
    if stats:
        s = report.stats
        lines.append(
            f"evaluations {s.evaluations}: model calls {s.model_calls}, cache hits {s.cache_hits}, "
            f"fail-fast skipped {s.fail_fast_skipped}, errors {s.errors}; proposals {s.proposal_calls}; "
            f"steps {s.steps}"
        )
    elif report.stats.errors:
        lines.append(f"errors: {report.stats.errors} evaluation(s) errored after retries")
    return lines


def render(report: OptimizationReport, verbosity: Verbosity = "summary") -> str:
    """``minimal`` one line, ``summary`` the report, ``full`` with what it cost."""
    if verbosity == "minimal":
        return headline(report)
    return "\n".join(f"  {line}" for line in report_lines(report, stats=verbosity == "full"))


__all__ = ["headline", "render", "report_lines"]
