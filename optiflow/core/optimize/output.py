"""Seed 003 §8.1-8.2 as strings: progress lines and the summary box (minimal / summary / full).

Pure functions; the console, the CLI and the job page print what they return::

    OPTIMIZE [support] Starting: treatmentFactor=sections:guidance, objective=MAXIMIZE
    OPTIMIZE [support] Iteration 0: score=0.2 (best=0.2)
    OPTIMIZE [support] Iteration 1: score=0.4 (best=0.4) ↑ NEW BEST
    OPTIMIZE [support] Terminated: No improvement in last 3 iterations
"""

from __future__ import annotations

import textwrap

from optiflow.core.base import JSONValue, Verbosity
from optiflow.core.optimize.configuration import TreatmentFactor, config_params, config_sections
from optiflow.core.optimize.history import IterationRecord
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.core.optimize.scoring import Objective
from optiflow.core.optimize.termination import TerminationReason
from optiflow.core.sections import path_str

BOX_WIDTH = 68
_INNER = BOX_WIDTH - 2
_TEXT = _INNER - 4


def fmt_score(value: float | None) -> str:
    """At least two decimals, at most four (``0.85``, ``0.875``, ``1.00``); tiny values in 3 digits."""
    if value is None:
        return "n/a"
    if value != 0 and abs(value) < 0.01:
        return f"{value:.3g}"
    text = f"{value:.4f}".rstrip("0")
    decimals = len(text.partition(".")[2])
    return text + "0" * (2 - decimals) if decimals < 2 else text


def start_line(use_case: str, treatment: TreatmentFactor, objective: Objective) -> str:
    return f"OPTIMIZE [{use_case}] Starting: treatmentFactor={treatment.name}, objective={objective.label}"


def iteration_line(use_case: str, it: IterationRecord) -> str:
    head = f"OPTIMIZE [{use_case}] Iteration {it.number}: "
    best = f"(best={fmt_score(it.best_so_far)})"
    if it.status == "no_candidates":
        return f"{head}no candidate to evaluate {best}"
    if it.status == "failed":
        return f"{head}every trial failed {best}"
    if it.status == "budget_exhausted":
        return f"{head}the budget ran out before a trial was evaluated in full {best}"
    line = f"{head}score={fmt_score(it.score)} {best}"
    return f"{line} ↑ NEW BEST" if it.new_best and it.number > 0 else line


def termination_line(use_case: str, reason: TerminationReason) -> str:
    return f"OPTIMIZE [{use_case}] Terminated: {reason.message}"


def progress_lines(history: OptimizationHistory) -> list[str]:
    uc = history.use_case
    return [
        start_line(uc, history.treatment, history.objective),
        *(iteration_line(uc, it) for it in history.iterations),
        termination_line(uc, history.termination_reason),
    ]


# -- the box ------------------------------------------------------------------------------------
def _row(text: str) -> str:
    return f"║  {text:<{_INNER - 2}}║"


def _rows(text: str, indent: str = "") -> list[str]:
    out: list[str] = []
    for line in text.splitlines() or [""]:
        lead = indent + line[: len(line) - len(line.lstrip())]
        wrapped = textwrap.wrap(line.strip(), width=_TEXT, initial_indent=lead, subsequent_indent=lead + "  ")
        out.extend(_row(w) for w in (wrapped or [indent]))
    return out


def _field(label: str, value: str) -> list[str]:
    first, *rest = textwrap.wrap(value, width=_TEXT - 18) or [""]
    return [_row(f"{label + ':':<18}{first}"), *(_row(" " * 18 + r) for r in rest)]


def _value(value: JSONValue) -> str:
    return str(value)


def best_value_rows(history: OptimizationHistory) -> list[str]:
    rows = [_row("Best value:")]
    sections = config_sections(history.best_configuration)
    params = config_params(history.best_configuration)
    if len(sections) == 1 and not params:
        rows += _rows(next(iter(sections.values())), "  ")
        return rows
    for path, body in sections.items():
        rows.append(_row(f"  {path_str(path)}:"))
        rows += _rows(body, "    ")
    for name, value in params.items():
        rows += _rows(f"{name}={_value(value)}", "  ")
    return rows


def _fixed(history: OptimizationHistory) -> str:
    shown = [
        f"{k}={_value(v)}" for k, v in history.fixed_factors.items() if k not in ("sections", "baseline_tag")
    ]
    return ", ".join(shown) or "none"


def _score_change(history: OptimizationHistory) -> str:
    pct = history.score_improvement_percent
    sign = "+" if pct >= 0 else ""
    return (
        f"{fmt_score(history.baseline_score)} → {fmt_score(history.best_score)} ({sign}{pct:.2f}%; "
        "as evaluated, not the estimate)"
    )


_RULE_WORDS = {
    "none": "strictly better score, no statistical test",
    "mann_whitney": "strictly better score and a Mann-Whitney U test",
    "paired": "paired selection",
}


def acceptance_text(rule: str, reason: str) -> str:
    """The rule in force in words, then why: ``strictly better score, no statistical test (test:
    none, set in the job)`` rather than the rule's name twice (``none: none (set in the job)``)."""
    if reason == f"{rule} (set in the job)":
        reason = f"test: {rule}, set in the job"
    return f"{_RULE_WORDS.get(rule, rule)} ({reason})" if reason else _RULE_WORDS.get(rule, rule)


def summary_box(history: OptimizationHistory, verbosity: Verbosity = "summary") -> str:
    top = "╔" + "═" * _INNER + "╗"
    mid = "╠" + "═" * _INNER + "╣"
    bottom = "╚" + "═" * _INNER + "╝"
    lines = [top, *_rows(f"OPTIMIZE: {history.use_case} / {history.experiment}"), mid]
    lines += _field("Treatment factor", history.treatment.name)
    if verbosity != "minimal":
        lines += _field("Fixed factors", _fixed(history))
        lines += _field("Objective", f"{history.objective.label} {history.scorer_description}")
        lines.append(mid)
        lines += _field("Iterations", str(history.total_iterations))
        lines += _field("Best iteration", f"{history.best_iteration.number} ({history.best_candidate_id})")
        # the selection's own estimate leads; scores as evaluated follow, labelled as such
        lines += _field("Gain", history.gain_line())
        if history.acceptance_rule is not None:
            rule = acceptance_text(history.acceptance_rule, history.acceptance_rule_reason)
            lines += _field("Acceptance", rule)
        lines += _field("Raw score", _score_change(history))
        if history.test is not None:
            t = history.test
            test = f"{fmt_score(t.baseline.score)} → {fmt_score(t.best.score)} (as evaluated)"
            lines += _field("Raw test score", test)
        lines += _field("Termination", history.termination_reason.message)
        if history.rejections:
            lines += _field("Rejected", _rejections(history))
    if verbosity == "full":
        lines.append(mid)
        lines.append(_row("Iterations:"))
        for it in history.iterations:
            lines += _rows(_iteration_text(history, it), "  ")
        chain = history.lineage().ancestry(history.best_candidate_id)
        lines += _field("Lineage", " ← ".join(chain))
    lines.append(mid)
    lines += best_value_rows(history)
    lines.append(bottom)
    return "\n".join(lines)


def _rejections(history: OptimizationHistory) -> str:
    counts: dict[str, int] = {}
    for r in history.rejections:
        counts[r.reason_code] = counts.get(r.reason_code, 0) + 1
    return ", ".join(f"{n} {code}" for code, n in counts.items())


def _iteration_text(history: OptimizationHistory, it: IterationRecord) -> str:
    mark = " ↑ NEW BEST" if it.new_best and it.number > 0 else ""
    trials = []
    for cid in it.candidate_ids:
        t = history.trial(cid)
        if t is not None:
            trials.append(f"{cid}={fmt_score(t.acceptance_score)}" if t.completed else f"{cid}=failed")
    detail = f" [{', '.join(trials)}]" if trials else ""
    return f"#{it.number} score={fmt_score(it.score)} best={fmt_score(it.best_so_far)}{mark}{detail}"


__all__ = [
    "BOX_WIDTH",
    "Verbosity",
    "best_value_rows",
    "fmt_score",
    "iteration_line",
    "progress_lines",
    "start_line",
    "summary_box",
    "termination_line",
]
