"""The job kinds in one place (pure): each kind's spec, workflow, and what its report means to a
user — text, the changes ``apply`` writes, an exit code. This is the only module that branches
on a job's kind; the driver and the interfaces ask it.

Every kind follows the same shape (pure workflows, one distributed driver): a frozen spec saved
at submission, a :class:`~optiflow.core.workflow.Workflow` whose state round-trips through JSON
(the checkpoint), and a report in ``Finish``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, TypeAdapter

from optiflow.core.base import Verbosity
from optiflow.core.budget import BUDGET_EXHAUSTED, budget_line
from optiflow.core.compress import output as compress_output
from optiflow.core.compress.report import OptimizationReport
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.compress.workflow import CompressWorkflow
from optiflow.core.drift import output as drift_output
from optiflow.core.measure import output as measure_output
from optiflow.core.measure.report import MeasureDocument
from optiflow.core.measure.spec import MeasureSpec
from optiflow.core.measure.workflow import MeasureWorkflow
from optiflow.core.optimize import output as optimize_output
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.core.optimize.spec import OptimizeSpec
from optiflow.core.optimize.workflow import OptimizeWorkflow
from optiflow.core.overrides import Changes, SectionOverride
from optiflow.core.records import (
    BEST_CANDIDATE_CHANGED,
    PROGRESS_CHANGED,
    RUN_STATUS_CHANGED,
    TRIAL_ADDED_OR_UPDATED,
    Event,
)
from optiflow.core.workflow import Workflow
from optiflow.errors import JobError

KINDS = ("compress", "optimize", "measure")
AnySpec = CompressSpec | OptimizeSpec | MeasureSpec
JobSpec = Annotated[AnySpec, Field(discriminator="kind")]
AnyReport = OptimizationReport | OptimizationHistory | MeasureDocument
FELL_BELOW = 3
"""Exit code of a measure job whose pass rate fell under its ``fail_below``."""
DRIFTED = drift_output.DRIFTED
"""Exit code of a measure job that shows a drop since its reference (4; the floor's 3 wins)."""

_SPEC: TypeAdapter[AnySpec] = TypeAdapter(JobSpec)


def parse_spec(data: Mapping[str, Any]) -> AnySpec:
    """A stored spec (one written before ``kind`` was required is a compress job's)."""
    return _SPEC.validate_python({"kind": "compress", **data})


def workflow_for(spec: AnySpec, job_id: str) -> Workflow[Any]:
    match spec:
        case CompressSpec():
            return CompressWorkflow(spec, job_id)
        case OptimizeSpec():
            return OptimizeWorkflow(spec, job_id)
        case MeasureSpec():
            return MeasureWorkflow(spec, job_id)


def base_tag(spec: AnySpec) -> tuple[str, str]:
    """(field, tag): the tag whose overrides the job starts from, and the spec field naming it."""
    if isinstance(spec, MeasureSpec):
        return "tag", spec.tag
    return "baseline_tag", spec.baseline_tag


# -- what a report means ------------------------------------------------------------------------
def render(report: AnyReport, verbosity: Verbosity = "summary") -> str:
    """The report as text (``minimal``: one line), with the job's budget when it had one."""
    budget = report.budget
    match report:
        case OptimizationReport():
            text = compress_output.render(report, verbosity)
        case OptimizationHistory():
            text = optimize_output.summary_box(report, verbosity)
        case MeasureDocument():
            if verbosity == "minimal":
                text = measure_output.headline(report)
            else:
                text = "\n".join(f"  {line}" for line in measure_output.report_lines(report, verbosity))
    if budget is None:
        return text
    if verbosity == "minimal":
        return f"{text}; budget exhausted" if budget.exhausted else text
    return f"{text}\n  {budget_line(budget)}"


def closing_line(report: AnyReport | None, name: str) -> str | None:
    """A line a watcher prints when the job ends, before its status (seed 003 names the reason
    an optimize run terminated). A job that ran out of its budget said so with its
    ``budget_exhausted`` event."""
    if isinstance(report, OptimizationHistory):
        return optimize_output.termination_line(name, report.termination_reason)
    return None


def unconfirmed(report: AnyReport | None) -> str | None:
    """Why an optimize job's best is not applied without ``force``: held-out data did not confirm
    it, or the job had splits and no held-out result (None: nothing stands in the way)."""
    if isinstance(report, OptimizationHistory) and _needs_force(report):
        return report.gain_line()
    return None


def _needs_force(report: OptimizationHistory) -> bool:
    return report.changed and (report.confirmed is False or report.held_out_missing)


def changes(report: AnyReport, *, force: bool = False) -> Changes:
    """What applying the job writes (empty: nothing to apply; an optimize job's best that held-out
    data did not confirm, unless ``force``). JobError for a kind that has nothing to apply at all."""
    match report:
        case OptimizationReport():
            sections = tuple(
                SectionOverride(path=m.section_path, expected_hash=m.original_hash, body=m.proposed_body)
                for m in report.modifications
            )
            what = f"{len(sections)} modification(s), -{report.total_token_reduction} tokens"
            return Changes(sections=sections, description=what)
        case OptimizationHistory():
            if not report.changed or (not force and _needs_force(report)):
                return Changes()
            what = (
                f"best candidate {report.best_candidate_id} of {report.experiment}: "
                f"score {report.baseline_score} -> {report.best_score}"
            )
            return Changes(
                sections=report.best_overrides, model_params=dict(report.best_model_params), description=what
            )
        case MeasureDocument():
            raise JobError(f"a {report.kind} job measures; it has nothing to apply", field="job")


def verdict(report: AnyReport | None) -> tuple[int, str] | None:
    """(exit code, message) when a completed job's report says its caller should fail: a measure
    job under its ``fail_below`` (3), one that shows a drop since its reference (4; both: 3, the
    message names both); None otherwise."""
    if not isinstance(report, MeasureDocument):
        return None
    drifted = drift_output.verdict(report.drift)
    if report.failed:
        assert report.fail_below is not None
        message = (
            f"pass rate lower bound {report.wilson.lower:.1%} is under --fail-below {report.fail_below:.1%}"
        )
        return FELL_BELOW, message + (f"; and {drifted[1]}" if drifted else "")
    return drifted


_TRIAL_EVENTS = (TRIAL_ADDED_OR_UPDATED, PROGRESS_CHANGED, BEST_CANDIDATE_CHANGED)


def event_line(kind: str, name: str, event: Event) -> str | None:
    """One progress line per event, in seed 003's ``KIND [use case] ...`` style; None for an event
    the kind does not speak of (an optimize job speaks in iterations, not trials)."""
    p = event.payload
    if event.type == BUDGET_EXHAUSTED:
        return f"{kind.upper()} [{name}] {p.get('line')}"
    if isinstance(p.get("line"), str):  # a line the workflow wrote (seed 003's iteration lines)
        return str(p["line"])
    if kind == "optimize" and event.type in (
        TRIAL_ADDED_OR_UPDATED,
        PROGRESS_CHANGED,
        BEST_CANDIDATE_CHANGED,
    ):
        return None
    return _generic_line(f"{kind.upper()} [{name}]", event)


def _generic_line(head: str, event: Event) -> str | None:
    p = event.payload
    if event.type == RUN_STATUS_CHANGED:
        error = f": {p['error']}" if p.get("error") else ""
        return f"{head} {str(p['status']).capitalize()}{error}"
    if event.type == TRIAL_ADDED_OR_UPDATED:
        score = p.get("objective_score")
        shown = "-" if not isinstance(score, int | float) else f"{score:.2f}"
        name = p.get("name") or p["candidate_id"]
        # a score over part of the dataset says so (a strict gate runs a set only where it can regress)
        evaluated, samples = p.get("evaluated_samples"), p.get("samples")
        if isinstance(evaluated, int) and isinstance(samples, int) and evaluated < samples:
            shown += f" on {evaluated}/{samples} samples"
        round_ = p.get("round")
        where = f" round {round_}" if isinstance(round_, int) and round_ > 1 else ""
        verdict = f": {p['verdict']}ed ({p['reason']})" if p.get("verdict") and p.get("reason") else ""
        return f"{head} Step {p['step_index']}: {name}{where} score={shown} ({p['status']}){verdict}"
    if event.type == BEST_CANDIDATE_CHANGED:
        return f"{head} ↑ NEW BEST {p['candidate_id']} score={p.get('score')}"
    if event.type == PROGRESS_CHANGED:
        return (
            f"{head} {p['evaluations_done']}/{p['evaluations_total']} evaluations; trials "
            f"{p['completed']} completed, {p['failed']} failed, {p['rejected']} rejected, "
            f"{p['running']} running"
        )
    return None


def history_file(report: AnyReport) -> tuple[str, dict[str, Any]] | None:
    """(relative path, document) of the history file a finished job leaves (seed 003's YAML
    history of an optimize job: ``optimizations/<use case>/<experiment>_<timestamp>.yaml``)."""
    if not isinstance(report, OptimizationHistory):
        return None
    from optiflow.core.optimize.document import history_document, history_path

    path = history_path(report.use_case, report.experiment, report.ended_at)
    return path, dict(history_document(report))


__all__ = [
    "DRIFTED",
    "FELL_BELOW",
    "KINDS",
    "AnyReport",
    "AnySpec",
    "JobSpec",
    "Verbosity",
    "base_tag",
    "changes",
    "closing_line",
    "event_line",
    "history_file",
    "parse_spec",
    "render",
    "unconfirmed",
    "verdict",
    "workflow_for",
]
