"""Crash-safe resume: re-issue a stalled job's pending action, and sweep orphaned temp tags.

A job's checkpoint and pending action are committed by every ``advance`` before the next action
is launched, so a job whose messages were lost (a worker killed with ``kill -9``, a Redis
restart without persistence) is resumed by launching its pending action again:

- a queued job gets its ``start`` again (``start`` is a no-op once the job left ``queued``);
- a step is launched again as a new chord: evaluations that finished before come from the eval
  cache, fail-fast marks still hold (they skip the evaluations not made yet; the one that set a
  mark answers from the cache, and a skip for a mark is the workflow's witness of that
  regression when the answer was not cached), and if the old chord completes after all, its
  ``advance`` is ignored by the step-index compare-and-set, so no sample is counted twice;
- a pending ``Finish`` / ``Fail`` is sent again (both end the job once).

A job is *stalled* when neither its row (every ``advance``) nor its progress (every evaluation)
moved for ``stale_after_s``. The control worker sweeps at start and then periodically; only one
sweep runs at a time across control workers, and one re-issue per job per ``stale_after_s``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from optiflow.core.actions import ACTION
from optiflow.core.experiment import TEMP_TAG_PREFIX
from optiflow.distributed import driver
from optiflow.errors import ConflictError, NotFoundError

if TYPE_CHECKING:
    from celery import Celery

    from optiflow.distributed.runtime import Runtime
    from optiflow.persistence.jobs import JobRecord

log = logging.getLogger(__name__)
ACTIVE = ("queued", "running")


@dataclass(frozen=True)
class Resumed:
    job_id: str
    what: str


def last_sign_of_life(rt: Runtime, rec: JobRecord) -> float:
    """Epoch seconds of the job's last advance or evaluation."""
    last = rec.updated_at.timestamp()
    progress = rt.scratch.progress(rec.id)
    if progress is not None and progress.step == rec.step_index:
        last = max(last, progress.beat)
    return last


def stalled(rt: Runtime, rec: JobRecord, stale_after_s: float, now: float | None = None) -> bool:
    now = time.time() if now is None else now
    return rec.status in ACTIVE and now - last_sign_of_life(rt, rec) >= stale_after_s


def resumable(rt: Runtime, job_id: str, *, force: bool = False) -> JobRecord:
    """The job, if its pending action may be launched again: ConflictError for a finished job,
    and for one making progress unless ``force`` (a second chord for a live step only costs
    model calls, but it costs them)."""
    rec = rt.jobs.get(job_id)
    if rec.finished:
        raise ConflictError(f"job {job_id} already ended {rec.status}; nothing to resume", field="job")
    stale_after = rt.settings.stale_after_s
    if not force and not stalled(rt, rec, stale_after):
        quiet = time.time() - last_sign_of_life(rt, rec)
        raise ConflictError(
            f"job {job_id} is making progress (last sign of life {quiet:.0f}s ago, stalled after "
            f"{stale_after:.0f}s); use --force to re-issue its step anyway",
            field="job",
        )
    return rec


def resume(app: Celery, rt: Runtime, job_id: str, *, force: bool = False) -> Resumed:
    """Launch the job's pending action again (see :func:`resumable`)."""
    rec = resumable(rt, job_id, force=force)
    if not rt.scratch.try_lock(f"resume:{job_id}", rt.settings.stale_after_s):
        return Resumed(job_id, "already being resumed")
    if rec.status == "queued" or rec.action is None:
        app.tasks["optiflow.start"].delay(job_id)
        return Resumed(job_id, "start sent again")
    action = ACTION.validate_python(rec.action)
    driver.launch(app, rt, job_id, action)
    what = f"step {rec.step_index} launched again" if rec.action.get("type") == "step" else "end sent again"
    log.warning("job %s resumed: %s", job_id, what)
    return Resumed(job_id, what)


def recover(app: Celery, rt: Runtime) -> list[Resumed]:
    """Resume every stalled job and remove temp tags of jobs that are not running. One sweep at a
    time across control workers (a Redis lock); safe to call from any process."""
    stale_after = rt.settings.stale_after_s
    if not rt.scratch.try_lock("recover", max(1.0, stale_after / 2)):
        return []
    resumed: list[Resumed] = []
    for rec in rt.jobs.list(status=ACTIVE, limit=1000):
        if not stalled(rt, rec, stale_after):
            continue
        try:
            resumed.append(resume(app, rt, rec.id))
        except Exception:
            log.exception("job %s: resume failed", rec.id)
    sweep_temp_tags(rt)
    return resumed


def sweep_temp_tags(rt: Runtime, recent: int = 200) -> list[str]:
    """Remove temporary tags whose job is not queued or running, on the prompts of the active
    and the ``recent`` most recent jobs."""
    active = {r.id: r for r in rt.jobs.list(status=ACTIVE, limit=1000)}
    prompts: set[tuple[str, str]] = set()
    for rec in [*active.values(), *rt.jobs.list(limit=recent)]:
        prompt = rec.spec.get("prompt")
        if isinstance(prompt, dict) and "ns" in prompt and "key" in prompt:
            prompts.add((str(prompt["ns"]), str(prompt["key"])))
    removed = []
    for ns, key in sorted(prompts):
        for tag in rt.store.list_tags(ns, key):
            if not tag.startswith(TEMP_TAG_PREFIX):
                continue
            job_id = tag[len(TEMP_TAG_PREFIX) :].split("-", 1)[0]
            if job_id not in active and not _active_now(rt, job_id):
                rt.store.delete(ns, key, tag)
                removed.append(f"{ns}/{key}:{tag}")
    if removed:
        log.warning("removed %d orphaned temporary tag(s): %s", len(removed), ", ".join(removed[:5]))
    return removed


def _active_now(rt: Runtime, job_id: str) -> bool:
    """A job submitted after the sweep listed the active ones may be writing its tags."""
    try:
        return rt.jobs.get(job_id).status in ACTIVE
    except NotFoundError:
        return False
