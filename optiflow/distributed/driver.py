"""The driver: runs a workflow's actions on Celery.

``start`` asks the workflow for its first action; a :class:`Step` becomes ONE chord whose header
is an ``evaluate`` task per (experiment, sample, run) and a ``propose`` task per section, and
whose body is ``advance``. ``advance`` hands the step's results to the workflow, writes the new
checkpoint and pending action in one transaction (guarded by the step index, so a duplicate body
is a no-op), removes the step's temporary tags and launches the next action. No task waits on
another task's result. ``Finish`` / ``Fail`` store the :class:`OptimizeResult` in the result
backend under the job id (the reply mailbox) and remove every temporary tag of the job.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from celery import chord, states

from optiflow.core import progress
from optiflow.core.actions import (
    Action,
    Fail,
    Finish,
    ProposalError,
    RewriteReply,
    SectionEdit,
    Step,
    StepResults,
)
from optiflow.core.evaluation import EvalResult
from optiflow.core.experiment import temp_tag_prefix
from optiflow.core.history import Event, Rejection, Trial
from optiflow.core.jobs import Report, parse_report
from optiflow.core.overrides import now
from optiflow.core.prompt import path_str
from optiflow.core.result import FinalStatus, OptimizeResult
from optiflow.distributed.publishing import batched
from optiflow.persistence.jobs import JobStatus

if TYPE_CHECKING:
    from celery import Celery

    from optiflow.distributed.runtime import Runtime

log = logging.getLogger(__name__)


# -- action (de)serialization: the pending action is part of the checkpoint ----------------------
def action_to_json(action: Action) -> dict[str, Any]:
    kind = {Step: "step", Finish: "finish", Fail: "fail"}[type(action)]
    return {"type": kind, **action.model_dump(mode="json")}


def action_from_json(data: dict[str, Any], job_kind: str) -> Action:
    data = dict(data)
    kind = data.pop("type")
    if kind == "step":
        return Step.model_validate(data)
    if kind == "finish":
        return Finish(report=parse_report(job_kind, data["report"]))
    return Fail.model_validate(data)


# -- transitions ----------------------------------------------------------------------------------
def start(app: Celery, rt: Runtime, job_id: str) -> None:
    from optiflow.llm.tokens import count_tokens

    rec = rt.jobs.get(job_id)
    if rec.status != "queued":
        log.info("job %s already started (%s): duplicate start ignored", job_id, rec.status)
        return
    wf = rt.workflow(job_id)
    model = rt.spec(job_id).model.model
    state, action = wf.start(lambda text: count_tokens(text, model))
    counts = progress.counts_after((), action, rejected=0, evaluations_done=0)
    recorded = rt.jobs.record_step(
        job_id,
        expected_step=0,
        new_step=_index(state, action),
        state=state.model_dump(mode="json"),
        action=action_to_json(action),
        expected_status="queued",
        events=[
            progress.status_changed("running"),
            *_start_lines(rt, job_id),
            progress.progress_event(0, counts),
        ],
    )
    if recorded:
        rt.publish(job_id, recorded.events)
        launch(app, rt, job_id, action)


def advance(app: Celery, rt: Runtime, job_id: str, step_index: int, raw: Sequence[Any]) -> None:
    rec = rt.jobs.get(job_id)
    if rec.finished:
        return
    if rec.step_index != step_index or rec.action is None:
        log.warning(
            "job %s: stale chord body for step %s (job is at %s) ignored", job_id, step_index, rec.step_index
        )
        return
    step = action_from_json(rec.action, rec.kind)
    assert isinstance(step, Step)
    if rt.scratch.cancelled(job_id):
        _remove_step_tags(rt, job_id, step)
        complete(app, rt, job_id, "cancelled", error="cancelled by user")
        return
    wf = rt.workflow(job_id)
    state = wf.load_state(rec.state or {})
    results = parse_results(raw)
    new_state, action = wf.advance(state, results)
    trials = _with_lineage(progress.step_trials(step, results), new_state)
    recorded = rt.jobs.record_step(
        job_id,
        expected_step=step_index,
        new_step=_index(new_state, action),
        state=new_state.model_dump(mode="json"),
        action=action_to_json(action),
        trials=trials,
        items=results.evals,
        rejections=_new_rejections(state, new_state),
        events=_step_events(rt, job_id, step_index, trials, state, new_state, action),
    )
    if not recorded:
        log.warning("job %s: step %s already advanced by another delivery", job_id, step_index)
        return
    rt.publish(job_id, recorded.events)
    _remove_step_tags(rt, job_id, step)
    launch(app, rt, job_id, action)


def launch(app: Celery, rt: Runtime, job_id: str, action: Action) -> None:
    if isinstance(action, Finish):
        app.tasks["optiflow.finish"].delay(job_id)
    elif isinstance(action, Fail):
        app.tasks["optiflow.fail"].delay(job_id, action.error)
    else:
        _launch_step(app, rt, job_id, action)


def finish(app: Celery, rt: Runtime, job_id: str) -> None:
    rec = rt.jobs.get(job_id)
    if rec.finished or rec.action is None:
        return
    action = action_from_json(rec.action, rec.kind)
    if isinstance(action, Finish):
        report = cast("Report", action.report)  # action_from_json parsed it by the job's kind
        complete(app, rt, job_id, "completed", report=report)


def complete(
    app: Celery,
    rt: Runtime,
    job_id: str,
    status: FinalStatus,
    *,
    report: Report | None = None,
    error: str | None = None,
    only_from: tuple[JobStatus, ...] = ("queued", "running"),
) -> OptimizeResult | None:
    """End the job once: persist, remove temp tags, reply under the job id. None when the job was
    not in one of ``only_from`` (someone else ended or started it first)."""
    rec = rt.jobs.get(job_id)
    result = OptimizeResult(
        job_id=job_id,
        kind=rec.kind,
        status=status,
        report=report,
        error=error,
        completed_at=now(),
    )
    payload = result.model_dump(mode="json")
    events = [progress.status_changed(status, error=error), progress.run_finished(status, error=error)]
    if not rt.jobs.finish(job_id, status, result=payload, error=error, only_from=only_from, events=events):
        return None
    keys = {e.key for e in events}  # published with the seqs the database gave them
    rt.publish(job_id, [e for e in rt.jobs.events(job_id) if e.key in keys])
    rt.scratch.cancel(job_id)  # an evaluation still queued for a finished job is skipped
    remove_temp_tags(rt, job_id)
    app.backend.store_result(job_id, payload, states.SUCCESS)
    return result


def fail(app: Celery, rt: Runtime, job_id: str, error: str) -> None:
    log.error("job %s failed: %s", job_id, error)
    complete(app, rt, job_id, "failed", error=error)


def cancel(app: Celery, rt: Runtime, job_id: str) -> None:
    """Pending evaluations are skipped; the next ``advance`` ends the job ``cancelled``.

    A job that has not started yet is ended right away."""
    rt.scratch.cancel(job_id)
    # Only a job still queued ends here; once `start` has it running, `advance` ends it (a
    # compare-and-set on the status decides which of the two wins).
    complete(app, rt, job_id, "cancelled", error="cancelled by user", only_from=("queued",))


# -- helpers ------------------------------------------------------------------------------------
def _index(state: Any, action: Action) -> int:
    return action.index if isinstance(action, Step) else int(state.step_index)


def _step_events(
    rt: Runtime, job_id: str, step_index: int, trials: list[Trial], before: Any, after: Any, action: Action
) -> list[Event]:
    """What a step's outcome tells a watcher: its trials, the progress counts, an optimize job's
    closed iterations and a new best."""
    counts = progress.counts_after(
        rt.jobs.trials(job_id) + trials,
        action,
        rejected=_rejected(after),
        evaluations_done=after.stats.evaluations,
    )
    events = [*progress.trial_events(trials), progress.progress_event(step_index + 1, counts)]
    events += _iteration_events(rt, job_id, before, after)
    best = getattr(after, "best_candidate_id", None)
    if best is not None and best != getattr(before, "best_candidate_id", None):
        trial = next((t for t in after.trials if t.candidate_id == best), None)
        score = getattr(trial, "objective_score", None)
        events.append(progress.best_changed(best, score, step_index=step_index))
    return events


def _start_lines(rt: Runtime, job_id: str) -> list[Event]:
    from optiflow.core.optimize.output import start_line
    from optiflow.core.optimize.spec import OptimizeSpec

    spec = rt.spec(job_id)
    if not isinstance(spec, OptimizeSpec) or spec.treatment is None:
        return []
    line = start_line(spec.name, spec.treatment, spec.objective)
    return [Event(type="optimize_started", key="optimize_started", payload={"line": line})]


def _iteration_events(rt: Runtime, job_id: str, before: Any, after: Any) -> list[Event]:
    """An optimize job's iterations closed by this step, as seed 003's progress lines."""
    from optiflow.core.optimize.output import iteration_line

    done = getattr(after, "iterations", ())[len(getattr(before, "iterations", ())) :]
    name = rt.spec(job_id).name
    return [
        progress.iteration_event(it.number, iteration_line(name, it), score=it.score, new_best=it.new_best)
        for it in done
    ]


def _rejected(state: Any) -> int:
    """Candidates turned down so far: compress's rejected edits, optimize's refused proposals."""
    return len(getattr(state, "rejected", ())) + len(getattr(state, "rejections", ()))


def _new_rejections(before: Any, after: Any) -> list[Rejection]:
    """Proposals the optimizer's validation refused in this step (never evaluated)."""
    old = len(getattr(before, "rejections", ()))
    return [
        Rejection(
            step_index=r.step_index,
            reason_code=r.reason_code,
            config_hash=r.config_hash,
            detail=r.message,
            extra={
                "iteration": r.iteration,
                "proposed_index": r.proposed_index,
                "duplicate_of": r.duplicate_of,
            },
        )
        for r in getattr(after, "rejections", ())[old:]
    ]


def _with_lineage(trials: list[Trial], state: Any) -> list[Trial]:
    """Optimize candidates carry their parents, canonical config hash and rationale."""
    by_experiment = {c.experiment_id: c for c in getattr(state, "candidates", ())}
    out = []
    for trial in trials:
        c = by_experiment.get(trial.candidate_id)
        if c is None:
            out.append(trial)
            continue
        out.append(
            trial.model_copy(
                update={
                    "parent_candidate_ids": c.parent_candidate_ids,
                    "config_hash": c.config_hash,
                    "rationale": c.rationale,
                    "configuration": c.configuration,
                    "extra": {**trial.extra, "name": c.candidate_id},
                }
            )
        )
    return out


def _launch_step(app: Celery, rt: Runtime, job_id: str, step: Step) -> None:
    spec = rt.spec(job_id)
    descriptor = spec.prompt.descriptor()
    for target in step.targets:
        rt.store.store(
            descriptor,
            target.overrides,
            tag=target.experiment.overrides_tag,
            model_params=target.model_params,
            replace=True,
        )
    if rt.jobs.get(job_id).finished:  # ended (cancelled, failed) while the tags were written
        _remove_step_tags(rt, job_id, step)
        return
    evaluate, propose = app.tasks["optiflow.evaluate"], app.tasks["optiflow.propose"]
    header = [propose.s(job_id, path_str(p)) for p in step.propose]
    rewrite = app.tasks["optiflow.rewrite"]
    header += [rewrite.s(job_id, r.model_dump(mode="json")) for r in step.rewrites]
    # Interleave runs, samples and targets so each candidate meets its guarded samples early:
    # fail-fast then stops a regressing candidate after a few evaluations.
    order = _sample_order(step)
    members = {t.experiment.id: frozenset(t.sample_ids) for t in step.targets}
    for run in range(max((t.runs for t in step.targets), default=0)):
        for sid in order:
            for target in step.targets:
                if run < target.runs and sid in members[target.experiment.id]:
                    guarded = target.guard is not None and sid in target.guard
                    header.append(
                        evaluate.s(
                            job_id, target.experiment.id, target.experiment.overrides_tag, sid, run, guarded
                        )
                    )
    rt.scratch.start_step(job_id, step.index, len(header) - len(step.propose) - len(step.rewrites))
    body = app.tasks["optiflow.advance"].s(job_id, step.index)
    with batched(app):
        chord(header)(body.on_error(app.tasks["optiflow.chord_error"].s(job_id)))


def _sample_order(step: Step) -> list[str]:
    seen: dict[str, bool] = {}
    for target in step.targets:
        for sid in target.sample_ids:
            guarded = target.guard is not None and sid in target.guard
            seen[sid] = seen.get(sid, False) or guarded
    return sorted(seen, key=lambda s: not seen[s])


def parse_results(raw: Sequence[Any]) -> StepResults:
    evals: list[EvalResult] = []
    edits: list[SectionEdit] = []
    errors: list[ProposalError] = []
    rewrites: list[RewriteReply] = []
    for item in raw:
        if "rewrite" in item:
            rewrites.append(RewriteReply.model_validate(item["rewrite"]))
        elif "edit" in item:
            edits.append(SectionEdit.model_validate(item["edit"]))
        elif "proposal_error" in item:
            errors.append(ProposalError.model_validate(item["proposal_error"]))
        else:
            evals.append(EvalResult.model_validate(item))
    return StepResults(
        evals=tuple(evals), edits=tuple(edits), proposal_errors=tuple(errors), rewrites=tuple(rewrites)
    )


def _remove_step_tags(rt: Runtime, job_id: str, step: Step) -> None:
    spec = rt.spec(job_id)
    for target in step.targets:
        rt.store.delete(spec.prompt.ns, spec.prompt.key, target.experiment.overrides_tag)


def remove_temp_tags(rt: Runtime, job_id: str) -> list[str]:
    spec = rt.spec(job_id)
    prefix = temp_tag_prefix(job_id)
    removed = [t for t in rt.store.list_tags(spec.prompt.ns, spec.prompt.key) if t.startswith(prefix)]
    for tag in removed:
        rt.store.delete(spec.prompt.ns, spec.prompt.key, tag)
    return removed
