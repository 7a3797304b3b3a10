"""Thin, idempotent, explicitly named Celery tasks. Each one re-reads what it needs by job id.

- ``optiflow.start(job_id)``: ask the workflow for its first action and launch it.
- ``optiflow.evaluate(job_id, experiment_id, tag, sample_id, run, guarded, probe_step, hold)``: one
  evaluation (a probe's, or one held behind its step's probes).
- ``optiflow.propose(job_id, section)``: one section's compression proposal.
- ``optiflow.rewrite(job_id, request)``: one model-assisted proposal of an optimizer.
- ``optiflow.advance(results, job_id, step)``: the chord body; it also ends the job when the
  workflow finishes or fails.
- ``optiflow.fail(job_id, error)``: end the job ``failed`` and reply.
- ``optiflow.chord_error(request, exc, traceback, job_id)``: errback that fails the job.
- ``optiflow.recover()``: resume stalled jobs, sweep orphaned temp tags (control workers send it
  to themselves at start and every ``recover_interval_s``).

No task stores a result of its own (``ignore_result``): a header task's return value still
reaches its chord (the Redis backend pushes it onto the chord's list), but the per-task
``celery-task-meta`` GET + SET + PUBLISH, and a key per evaluation kept for ``result_expires``,
are skipped. The one result stored is the job's reply (seed 000's mailbox), stored when the job ends.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from optiflow.core.step import Hold
from optiflow.distributed import driver, recovery, work

if TYPE_CHECKING:
    from celery import Celery

    from optiflow.distributed.runtime import Runtime

log = logging.getLogger(__name__)


def register_tasks(app: Celery, rt: Runtime) -> None:
    @app.task(name="optiflow.start", ignore_result=True, shared=False)  # type: ignore[untyped-decorator]
    def start(job_id: str) -> None:
        _guarded(app, rt, job_id, lambda: driver.start(app, rt, job_id), "start")

    @app.task(name="optiflow.evaluate", ignore_result=True, shared=False)  # type: ignore[untyped-decorator]
    def evaluate(
        job_id: str,
        experiment_id: str,
        tag: str,
        sample_id: str,
        run: int,
        guarded: bool,
        probe_step: int | None = None,
        hold: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return work.evaluate_one(
            rt,
            job_id,
            experiment_id,
            tag,
            sample_id,
            run,
            guarded,
            probe_step=probe_step,
            hold=Hold.read(hold),
        )

    @app.task(name="optiflow.propose", ignore_result=True, shared=False)  # type: ignore[untyped-decorator]
    def propose(job_id: str, section: str) -> dict[str, Any]:
        return work.propose_one(rt, job_id, section)

    @app.task(name="optiflow.rewrite", ignore_result=True, shared=False)  # type: ignore[untyped-decorator]
    def rewrite(job_id: str, request: dict[str, Any]) -> dict[str, Any]:
        return work.rewrite_one(rt, job_id, request)

    @app.task(name="optiflow.advance", ignore_result=True, shared=False)  # type: ignore[untyped-decorator]
    def advance(results: list[Any], job_id: str, step_index: int) -> None:
        _guarded(app, rt, job_id, lambda: driver.advance(app, rt, job_id, step_index, results), "advance")

    @app.task(name="optiflow.fail", ignore_result=True, shared=False)  # type: ignore[untyped-decorator]
    def fail(job_id: str, error: str) -> None:
        driver.fail(app, rt, job_id, error)

    @app.task(name="optiflow.recover", ignore_result=True, shared=False)  # type: ignore[untyped-decorator]
    def recover() -> list[str]:
        return [f"{r.job_id}: {r.what}" for r in recovery.recover(app, rt)]

    @app.task(name="optiflow.chord_error", ignore_result=True, shared=False)  # type: ignore[untyped-decorator]
    def chord_error(request: Any, exc: BaseException, traceback: Any, job_id: str) -> None:
        driver.fail(app, rt, job_id, f"evaluation step failed: {exc!r}")


def _guarded(app: Celery, rt: Runtime, job_id: str, fn: Any, task: str) -> None:
    """Any error in a control task ends the job ``failed`` with its message instead of hanging."""
    try:
        fn()
    except Exception as exc:
        log.exception("job %s: control task failed", job_id)
        driver.fail(app, rt, job_id, control_failure(exc, task, app.conf.task_soft_time_limit))


def control_failure(exc: BaseException, task: str, limit_s: float | None) -> str:
    """A control task's error as a job's error: what ran out, where, and what to change (a bare
    ``SoftTimeLimitExceeded()`` or ``MemoryError()`` said nothing; issue 27)."""
    from celery.exceptions import SoftTimeLimitExceeded

    if isinstance(exc, SoftTimeLimitExceeded):
        return (
            f"the control task {task!r} ran over its time limit ({limit_s:g} s) and was stopped: one step of "
            "this job is too large to decide in one task; use fewer samples, runs (gate.max_runs, "
            "acceptance.max_runs) or candidates"
        )
    if isinstance(exc, MemoryError):
        return (
            f"the control task {task!r} ran out of memory: one step of this job is too large to hold; use "
            "fewer samples, shorter sections or fewer candidates"
        )
    return f"{type(exc).__name__}: {exc}"
