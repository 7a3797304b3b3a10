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
from typing import TYPE_CHECKING, Any

from celery import chord, states

from optiflow.core import progress
from optiflow.core.actions import Action, Fail, Finish, ProposalError, SectionEdit, Step, StepResults
from optiflow.core.compress import CompressState, OptimizationReport, temp_tag_prefix
from optiflow.core.evaluation import EvalResult
from optiflow.core.overrides import now
from optiflow.core.prompt import path_str
from optiflow.core.result import FinalStatus, OptimizeResult
from optiflow.persistence.jobs import JobStatus

if TYPE_CHECKING:
    from celery import Celery

    from optiflow.distributed.runtime import Runtime

log = logging.getLogger(__name__)


# -- action (de)serialization: the pending action is part of the checkpoint ----------------------
def action_to_json(action: Action) -> dict[str, Any]:
    kind = {Step: "step", Finish: "finish", Fail: "fail"}[type(action)]
    return {"type": kind, **action.model_dump(mode="json")}


def action_from_json(data: dict[str, Any]) -> Action:
    data = dict(data)
    kind = data.pop("type")
    if kind == "step":
        return Step.model_validate(data)
    if kind == "finish":
        return Finish(report=OptimizationReport.model_validate(data["report"]))
    return Fail.model_validate(data)


# -- transitions ----------------------------------------------------------------------------------
def start(app: Celery, rt: Runtime, job_id: str) -> None:
    from optiflow.llm.tokens import count_tokens

    rec = rt.jobs.get(job_id)
    if rec.status != "queued":
        log.info("job %s already started (%s): duplicate start ignored", job_id, rec.status)
        return
    wf = rt.workflow(job_id)
    model = wf.spec.model.model
    state, action = wf.start(lambda text: count_tokens(text, model))
    counts = progress.counts_after((), action, rejected=0, evaluations_done=0)
    recorded = rt.jobs.record_step(
        job_id,
        expected_step=0,
        new_step=_index(state, action),
        state=state.model_dump(mode="json"),
        action=action_to_json(action),
        expected_status="queued",
        events=[progress.status_changed("running"), progress.progress_event(0, counts)],
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
    step = action_from_json(rec.action)
    assert isinstance(step, Step)
    if rt.scratch.cancelled(job_id):
        _remove_step_tags(rt, job_id, step)
        complete(app, rt, job_id, "cancelled", error="cancelled by user")
        return
    state = CompressState.model_validate(rec.state)
    results = parse_results(raw)
    new_state, action = rt.workflow(job_id).advance(state, results)
    trials = progress.step_trials(step, results)
    counts = progress.counts_after(
        rt.jobs.trials(job_id) + trials,
        action,
        rejected=len(new_state.rejected),
        evaluations_done=new_state.stats.evaluations,
    )
    recorded = rt.jobs.record_step(
        job_id,
        expected_step=step_index,
        new_step=_index(new_state, action),
        state=new_state.model_dump(mode="json"),
        action=action_to_json(action),
        trials=trials,
        items=results.evals,
        events=[*progress.trial_events(trials), progress.progress_event(step_index, counts)],
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
    action = action_from_json(rec.action)
    if isinstance(action, Finish) and isinstance(action.report, OptimizationReport):
        complete(app, rt, job_id, "completed", report=action.report)


def complete(
    app: Celery,
    rt: Runtime,
    job_id: str,
    status: FinalStatus,
    *,
    report: OptimizationReport | None = None,
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
def _index(state: CompressState, action: Action) -> int:
    return action.index if isinstance(action, Step) else state.step_index


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
    rt.scratch.start_step(job_id, step.index, len(header) - len(step.propose))
    body = app.tasks["optiflow.advance"].s(job_id, step.index)
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
    for item in raw:
        if "edit" in item:
            edits.append(SectionEdit.model_validate(item["edit"]))
        elif "proposal_error" in item:
            errors.append(ProposalError.model_validate(item["proposal_error"]))
        else:
            evals.append(EvalResult.model_validate(item))
    return StepResults(evals=tuple(evals), edits=tuple(edits), proposal_errors=tuple(errors))


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
