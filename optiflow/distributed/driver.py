"""The driver: carries a workflow's transitions on Celery.

``start`` asks the workflow for its first transition; a :class:`Step` becomes ONE chord whose
header is an ``evaluate`` task per (experiment, sample, run), a ``propose`` task per section and a
``rewrite`` task per request, and whose body is ``advance``. ``advance`` hands the step's results
to the workflow and writes the :class:`~optiflow.core.workflow.Transition` it gets back — the
step's trials, items, rejections and events with the new checkpoint and pending action — in one
transaction, guarded by the step index (a duplicate body writes nothing); then it removes the
step's temporary tags and launches the next action. A transition that ends the job completes it
right there: the stored pending ``Finish`` / ``Fail`` only matters if this process dies before
:func:`complete` commits (recovery sends it again). No task waits on another task's result (a
held evaluation waits for its step's probes to answer, at most :func:`probe_wait` after they
began), and the driver never looks inside a workflow's state.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from celery import chord, states

from optiflow.core import progress
from optiflow.core.actions import ACTION, Action, Fail, Finish
from optiflow.core.evaluation import EvalResult
from optiflow.core.experiment import temp_tag_prefix
from optiflow.core.kinds import AnyReport
from optiflow.core.overrides import now
from optiflow.core.result import FinalStatus, OptimizeResult
from optiflow.core.sections import path_str
from optiflow.core.step import EvalTarget, Hold, ProposalError, RewriteReply, SectionEdit, Step, StepResults
from optiflow.core.workflow import Transition
from optiflow.distributed.budget import with_budget
from optiflow.distributed.publishing import batched
from optiflow.errors import public_message
from optiflow.persistence.jobs import JobRecord, JobStatus

if TYPE_CHECKING:
    from celery import Celery

    from optiflow.distributed.runtime import Runtime

log = logging.getLogger(__name__)

PROBE_MARGIN_S = 0.5
"""Added to a held evaluation's wait for the probes' answers to be written. It costs nothing
while the probes answer (the held evaluations go the moment they do), only when one is lost; at
0.05 s a pause of the worker process (a loaded machine, a collection of a large heap) between a
probe's answer and its write let a whole wave go."""
MAX_PROBE_WAIT_S = 60.0


# -- transitions ----------------------------------------------------------------------------------
def start(app: Celery, rt: Runtime, job_id: str) -> None:
    from optiflow.llm.tokens import count_tokens

    rec = rt.jobs.get(job_id)
    if rec.status != "queued":
        log.info("job %s already started (%s): duplicate start ignored", job_id, rec.status)
        return
    model = rt.spec(job_id).model.model
    tr = rt.workflow(job_id).start(lambda text: count_tokens(text, model))
    tr = Transition(tr.state, tr.action, events=(progress.status_changed("running"), *tr.events))
    if _record(rt, rec, tr, expected_step=0, expected_status="queued"):
        _carry(app, rt, rec, tr.action)


def advance(app: Celery, rt: Runtime, job_id: str, step_index: int, raw: Sequence[Any]) -> None:
    rec = rt.jobs.get(job_id)
    if rec.finished:
        return
    if rec.step_index != step_index or rec.action is None:
        log.warning(
            "job %s: stale chord body for step %s (job is at %s) ignored", job_id, step_index, rec.step_index
        )
        return
    step = ACTION.validate_python(rec.action)
    if not isinstance(step, Step):
        log.warning(
            "job %s: chord body for step %s but its pending action is %s", job_id, step_index, step.type
        )
        return
    if rt.scratch.cancelled(job_id):
        _remove_step_tags(rt, job_id, step)
        complete(app, rt, rec, "cancelled", error="cancelled by user")
        return
    wf = rt.workflow(job_id)
    results = with_budget(rt, job_id, parse_results(step, raw))
    tr = wf.advance(wf.load_state(rec.state or {}), results)
    if not _record(rt, rec, tr, expected_step=step_index):
        log.warning("job %s: step %s already advanced by another delivery", job_id, step_index)
        return
    _remove_step_tags(rt, job_id, step)
    if isinstance(tr.action, Step):
        # the next step first: its items are off the critical path
        _launch_step(app, rt, job_id, tr.action, latency_s=model_latency(results.evals))
        _store_items(rt, job_id, results.evals)
    else:  # the job ends: whoever reads it once it has ended finds all of its items
        _store_items(rt, job_id, results.evals)
        _carry(app, rt, rec, tr.action)


def _store_items(rt: Runtime, job_id: str, items: Sequence[EvalResult]) -> None:
    """The step's per-(sample, run) results, for drill-down: written once the next step is on its
    way (hundreds of rows a step; the checkpoint, trials and events are already committed, and
    nothing in a job's progress reads them), or before the job ends when it was the last step. A
    control worker killed in between loses that step's rows, not its decisions."""
    try:
        rt.jobs.upsert_trial_items(job_id, items)
    except Exception:
        log.warning("job %s: per-sample results not stored", job_id, exc_info=True)


def _record(
    rt: Runtime,
    rec: JobRecord,
    tr: Transition[Any],
    *,
    expected_step: int,
    expected_status: JobStatus | None = None,
) -> bool:
    """Write a transition (checkpoint, pending action, what the step produced) and publish its
    events; False when another delivery got there first (nothing written)."""
    recorded = rt.jobs.record_step(
        rec.id,
        expected_step=expected_step,
        new_step=tr.step_index,
        state=tr.state.model_dump(mode="json"),
        action=tr.action.model_dump(mode="json"),
        expected_status=expected_status,
        trials=tr.trials,
        rejections=tr.rejections,
        events=tr.events,
    )
    if recorded:
        rt.publish(rec.id, recorded.events)
    return recorded.won


def _carry(app: Celery, rt: Runtime, rec: JobRecord, action: Action) -> None:
    """Run a committed action: launch a step's chord, or end the job here and now."""
    if isinstance(action, Step):
        _launch_step(app, rt, rec.id, action)
    else:
        end(app, rt, rec, action)


def launch(app: Celery, rt: Runtime, job_id: str, action: Action) -> None:
    """Run a job's pending action again (recovery): its step as a new chord, or its end."""
    _carry(app, rt, rt.jobs.get(job_id), action)


def end(app: Celery, rt: Runtime, rec: JobRecord, action: Finish | Fail) -> None:
    if isinstance(action, Finish):
        from optiflow.distributed import drift  # a measure's night (or new reference), recorded once

        complete(app, rt, rec, "completed", report=drift.settle(rt, rec, action.report))
    else:
        log.error("job %s failed: %s", rec.id, action.error)
        complete(app, rt, rec, "failed", error=action.error)


def complete(
    app: Celery,
    rt: Runtime,
    rec: JobRecord,
    status: FinalStatus,
    *,
    report: AnyReport | None = None,
    error: str | None = None,
    only_from: tuple[JobStatus, ...] = ("queued", "running"),
) -> OptimizeResult | None:
    """End the job once: persist, remove temp tags, reply under the job id. None when the job was
    not in one of ``only_from`` (someone else ended or started it first)."""
    if error is not None:  # a job's error is shown to whoever submitted it: no traceback, no path
        error = public_message(error)
    result = OptimizeResult(
        job_id=rec.id, kind=rec.kind, status=status, report=report, error=error, completed_at=now()
    )
    payload = result.model_dump(mode="json")
    events = [progress.status_changed(status, error=error), progress.run_finished(status, error=error)]
    finished = rt.jobs.finish(rec.id, status, result=payload, error=error, only_from=only_from, events=events)
    if not finished:
        return None
    rt.publish(rec.id, finished.events)
    rt.scratch.cancel(rec.id)  # an evaluation still queued for a finished job is skipped
    remove_temp_tags(rt, rec)
    app.backend.store_result(rec.id, payload, states.SUCCESS)  # seed 000's reply mailbox
    return result


def fail(app: Celery, rt: Runtime, job_id: str, error: str) -> None:
    log.error("job %s failed: %s", job_id, error)
    complete(app, rt, rt.jobs.get(job_id), "failed", error=error)


def cancel(app: Celery, rt: Runtime, job_id: str) -> None:
    """Pending evaluations are skipped; the next ``advance`` ends the job ``cancelled``.

    A job that has not started yet is ended right away."""
    rt.scratch.cancel(job_id)
    # Only a job still queued ends here; once `start` has it running, `advance` ends it (a
    # compare-and-set on the status decides which of the two wins).
    complete(app, rt, rt.jobs.get(job_id), "cancelled", error="cancelled by user", only_from=("queued",))


# -- steps ----------------------------------------------------------------------------------------
def _launch_step(
    app: Celery, rt: Runtime, job_id: str, step: Step, *, latency_s: float | None = None
) -> None:
    """Publish a step as one chord: the probes' evaluations first. With ``latency_s`` (the
    model's typical call time, measured on the step before), every other evaluation of a probed
    target that owns most of the step (:func:`_held`) is *held*: it waits for the probes'
    answers (at most :func:`probe_wait`) before its model call, so a regression a probe finds
    costs the probe's calls, not a full wave's."""
    spec = rt.spec(job_id)
    descriptor = spec.prompt.descriptor()
    for target in _one_per_tag(step):
        rt.store.store(
            descriptor,
            target.overrides,
            tag=target.experiment.overrides_tag,
            model_params=target.model_params,
            replace=True,
        )
    if rt.scratch.cancelled(job_id):  # cancelled, or ended (complete() marks it), meanwhile
        _remove_step_tags(rt, job_id, step)
        complete(app, rt, rt.jobs.get(job_id), "cancelled", error="cancelled by user")  # no-op once ended
        return
    evaluate, propose = app.tasks["optiflow.evaluate"], app.tasks["optiflow.propose"]
    header = [propose.s(job_id, path_str(p)) for p in step.propose]
    rewrite = app.tasks["optiflow.rewrite"]
    header += [rewrite.s(job_id, r.model_dump(mode="json")) for r in step.rewrites]
    first, rest = _evaluation_order(step)
    held = _held(step) if latency_s is not None else set()
    hold = None
    if held and latency_s is not None:
        wait = probe_wait(latency_s)
        hold = Hold(step=step.index, probes=len(first), latency=latency_s, wait=wait).model_dump()
    for target, sid, run in first:
        header.append(_evaluate(evaluate, job_id, target, sid, run, probe_step=step.index))
    for target, sid, run in rest:
        header.append(
            _evaluate(evaluate, job_id, target, sid, run, hold=hold if id(target) in held else None)
        )
    for sig in header[1:]:  # the first message declares the queue; the rest need not ask again
        sig.set(declare=[])
    rt.scratch.start_step(job_id, step.index, len(header) - len(step.propose) - len(step.rewrites))
    body = app.tasks["optiflow.advance"].s(job_id, step.index)
    with batched(app):
        chord(header)(body.on_error(app.tasks["optiflow.chord_error"].s(job_id)))


Evaluation = tuple[EvalTarget, str, int]


def _evaluate(task: Any, job_id: str, target: EvalTarget, sid: str, run: int, **extra: Any) -> Any:
    """One evaluate signature. Its ``argsrepr`` (what Flower shows) is the plain ``repr`` of
    these short, bounded arguments: Celery's default ``saferepr`` took a tenth of a control
    worker's time publishing a step."""
    guarded = target.guard is not None and sid in target.guard
    args = (job_id, target.experiment.id, target.experiment.overrides_tag, sid, run, guarded)
    kwargs = {k: v for k, v in extra.items() if v is not None}
    return task.signature(args, kwargs, argsrepr=repr(args), kwargsrepr=repr(kwargs))


def _evaluation_order(step: Step) -> tuple[list[Evaluation], list[Evaluation]]:
    """The order a step's evaluations are queued in: the probes first (every target's best
    suspect, then every target's second, ...), then the rest.

    With fail-fast watching some samples, runs, samples and targets are interleaved so each
    candidate meets its guarded samples early: a regression then stops it after a few
    evaluations. Otherwise every evaluation is needed anyway, and each target's are queued
    together: consecutive calls then render the same prompt, so a server that keeps the last
    prompt's prefix (llama.cpp's slot, prefix caches) reuses it instead of reading it again.
    """
    targets = step.targets
    if not any(t.guard for t in targets):
        return [], [(t, sid, run) for t in targets for run in t.run_indices for sid in t.sample_ids]
    probed = [
        (k, t.probe[i], t.first_run)
        for i in range(max(len(t.probe) for t in targets))
        for k, t in enumerate(targets)
        if i < len(t.probe)
    ]
    skip = set(probed)
    members = [frozenset(t.sample_ids) for t in targets]
    order = _sample_order(step)
    rest = [
        (k, sid, run)
        for run in sorted({r for t in targets for r in t.run_indices})
        for sid in order
        for k, t in enumerate(targets)
        if run in t.run_indices and sid in members[k] and (k, sid, run) not in skip
    ]
    return [(targets[k], sid, run) for k, sid, run in probed], [
        (targets[k], sid, run) for k, sid, run in rest
    ]


def _held(step: Step) -> set[int]:
    """The probed targets whose other evaluations are held: those with at least half of the
    step's evaluations. A target sharing its step with several others has only its share of the
    first wave in flight when its probe answers (the order interleaves targets), about a probe's
    worth on a fleet of a few dozen threads, while holding would idle every thread for a model
    call; one that owns its step would have the whole wave in flight."""
    total = sum(t.size for t in step.targets)
    return {id(t) for t in step.targets if t.probe and 2 * t.size >= total}


def probe_wait(latency_s: float) -> float:
    """The longest a held evaluation waits for its step's probes, counted from the first probe's
    start: one model call and a half, plus :data:`PROBE_MARGIN_S` (a minute at most)."""
    return min(1.5 * latency_s + PROBE_MARGIN_S, MAX_PROBE_WAIT_S)


def model_latency(evals: Sequence[EvalResult]) -> float | None:
    """The median time of the model calls among ``evals`` (seconds); None under 3 calls."""
    made = sorted(r.latency_ms for r in evals if not (r.skipped or r.cached) and r.error is None)
    return made[len(made) // 2] / 1000 if len(made) >= 3 else None


def _sample_order(step: Step) -> list[str]:
    seen: dict[str, bool] = {}
    for target in step.targets:
        for sid in target.sample_ids:
            guarded = target.guard is not None and sid in target.guard
            seen[sid] = seen.get(sid, False) or guarded
    return sorted(seen, key=lambda s: not seen[s])


def parse_results(step: Step, raw: Sequence[Any]) -> StepResults:
    """The chord's header results (small JSON dicts) as the step's typed results."""
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
        step=step,
        evals=tuple(evals),
        edits=tuple(edits),
        proposal_errors=tuple(errors),
        rewrites=tuple(rewrites),
    )


def _one_per_tag(step: Step) -> list[EvalTarget]:
    """A step's targets, one per temporary tag (several targets may share an experiment)."""
    return list({t.experiment.overrides_tag: t for t in step.targets}.values())


def _remove_step_tags(rt: Runtime, job_id: str, step: Step) -> None:
    spec = rt.spec(job_id)
    for target in _one_per_tag(step):
        rt.store.delete(spec.prompt.ns, spec.prompt.key, target.experiment.overrides_tag)


def remove_temp_tags(rt: Runtime, rec: JobRecord) -> list[str]:
    spec = rt.spec(rec.id)
    prefix = temp_tag_prefix(rec.id)
    removed = [t for t in rt.store.list_tags(spec.prompt.ns, spec.prompt.key) if t.startswith(prefix)]
    for tag in removed:
        rt.store.delete(spec.prompt.ns, spec.prompt.key, tag)
    return removed
