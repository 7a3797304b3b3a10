"""The Celery app of the chaos matrix's workers: ``workers.app`` plus test-only parking hooks.

``celery -A tests.support.chaos_app worker ...`` runs the product's app unchanged, and with
``OPTIFLOW_CHAOS_PARK=1`` it parks a job where its cell wants the kill, so that one SIGKILL of the
worker (a real ``kill -9``) lands mid-step for every job parked in it:

- **eval**: the first ``hold`` evaluations of the job's target step that start once a fraction
  ``after`` of its evaluations started block in this worker (in flight, unacknowledged, when it
  is killed);
  the step's other evaluations go on, so its chord waits for the parked ones, as it waits for the
  evaluations a killed worker had in flight.
- **control**: the job's ``advance`` of its target step (its chord body) blocks at ``point``:
  ``entry`` (before the workflow reads the results), ``committed`` (the transition recorded, the
  next step not launched yet) or ``launched`` (the next step's chord published, the step's
  per-sample rows not stored yet); or, ``idle``, the step's evaluations park as for an eval kill
  while the control worker, which then holds nothing of the job, is killed.

A job's plan is a Redis key named after the job (its spec's ``name``, unique per cell), written
before submission; a parked task records where it parked (step, kind, progress, pid) and blocks
until the key :func:`release_key` exists or its worker dies. Every worker of the app also records
each step it launches (``steps_key``): the test reads which steps a job took. None of this changes
what a task does: a hook only waits, and records in keys of its own.

Workers without ``OPTIFLOW_CHAOS_PARK`` never park; with ``OPTIFLOW_CHAOS_PRELOAD=1`` a worker
loads litellm at start even when it consumes no eval queue yet (a standby eval worker, told to
consume ``optiflow.eval`` once the one it replaces was killed).
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from celery.signals import after_setup_logger, task_prerun, worker_init

from optiflow.distributed import driver
from optiflow.distributed.app import runtime_of
from tests.support.chaos_matrix import (
    count_key,
    parked_key,
    plan_key,
    release_key,
    started_key,
    step_kind,
    steps_key,
)
from workers.app import app

__all__ = ["app"]

PARK_POLL_S = 1.0


# -- the hooks ------------------------------------------------------------------------------------
_PARK = os.environ.get("OPTIFLOW_CHAOS_PARK") == "1"
_plans: dict[str, dict[str, Any] | None] = {}
_lock = threading.Lock()


def _prefix() -> str:
    return runtime_of(app).settings.key_prefix


def _plan(job_id: str) -> tuple[str, dict[str, Any] | None]:
    """The job's name and park plan (read once per process: plans are written before submission)."""
    rt = runtime_of(app)
    name = rt.spec(job_id).name
    with _lock:
        if job_id in _plans:
            return name, _plans[job_id]
    raw = rt.redis.get(plan_key(_prefix(), name))
    plan = json.loads(raw) if raw else None
    with _lock:
        _plans[job_id] = plan
    return name, plan


def _occurrence(job_id: str, index: int, kind: str) -> int:
    """How many steps of ``kind`` the job launched before step ``index``."""
    launched = runtime_of(app).redis.lrange(steps_key(_prefix(), job_id), 0, -1)
    seen: dict[int, str] = {}
    for raw in launched:
        i, _, name = raw.decode().partition(":")
        seen[int(i)] = name
    return sum(1 for i, name in seen.items() if i < index and step_kind(name) == kind)


def _park(name: str, plan: dict[str, Any], limit: int, where: dict[str, Any]) -> None:
    """Block here when fewer than ``limit`` tasks of the job parked yet, after recording where."""
    rt = runtime_of(app)
    prefix = _prefix()
    if rt.redis.incr(count_key(prefix, name)) > limit:
        return
    rt.redis.hsetnx(
        parked_key(prefix, name), "where", json.dumps({**where, "pid": os.getpid(), "at": time.time()})
    )
    while not rt.redis.exists(release_key(prefix)):
        time.sleep(PARK_POLL_S)


_names: dict[tuple[str, int], str] = {}


def _step_name(job_id: str, index: int) -> str | None:
    """The name of the job's step ``index`` while it is the pending one (read once per process)."""
    with _lock:
        if (job_id, index) in _names:
            return _names[(job_id, index)]
    rec = runtime_of(app).jobs.get(job_id)
    if rec.step_index != index or not rec.action or rec.action.get("type") != "step":
        return None
    name = str(rec.action.get("name"))
    with _lock:
        _names[(job_id, index)] = name
    return name


def _wanted(job_id: str, plan: dict[str, Any], index: int, name: str | None) -> bool:
    if name is None or step_kind(name) != plan["kind"]:
        return False
    return _occurrence(job_id, index, plan["kind"]) == int(plan.get("occurrence", 0))


def _on_prerun(task: Any = None, args: Any = None, **_: Any) -> None:
    if task is None or not args:
        return
    if task.name == "optiflow.evaluate":
        job_id = args[0]
        name, plan = _plan(job_id)
        if plan is None or not (plan["role"] == "eval" or plan.get("point") == "idle"):
            return
        rt = runtime_of(app)
        progress = rt.scratch.progress(job_id)
        if progress is None:
            return
        step = _step_name(job_id, progress.step)
        if not _wanted(job_id, plan, progress.step, step):
            return
        # the evaluations that start once a fraction ``after`` of the step's have started park
        # (not "are done": on a worker with more threads than the step has evaluations, every
        # one of them starts before the first is done)
        started = rt.redis.incr(started_key(_prefix(), name, progress.step))
        if started <= float(plan.get("after", 0.0)) * progress.total:
            return
        where = {
            "role": plan["role"],
            "point": "idle" if plan["role"] == "control" else "evaluation",
            "step": progress.step,
            "name": step,
            "started": started,
            "done": progress.done,
            "total": progress.total,
        }
        _park(name, plan, int(plan.get("hold", 1)), where)
    elif task.name == "optiflow.advance" and len(args) >= 3:
        _control_point(args[1], int(args[2]), "entry")


def _control_point(job_id: str, index: int, point: str, name: str | None = None) -> None:
    job_name, plan = _plan(job_id)
    if plan is None or plan["role"] != "control" or plan.get("point", "entry") != point:
        return
    step = name if name is not None else _step_name(job_id, index)
    if not _wanted(job_id, plan, index, step):
        return
    _park(job_name, plan, 1, {"role": "control", "step": index, "name": step, "point": point})


def _install() -> None:
    launch, remove, store_items = driver._launch_step, driver._remove_step_tags, driver._store_items

    def launch_step(a: Any, rt: Any, job_id: str, step: Any, **kwargs: Any) -> None:
        rt.redis.rpush(steps_key(rt.settings.key_prefix, job_id), f"{step.index}:{step.name}")
        launch(a, rt, job_id, step, **kwargs)

    def remove_step_tags(rt: Any, job_id: str, step: Any) -> None:
        if _PARK:
            _control_point(job_id, step.index, "committed", step.name)
        remove(rt, job_id, step)

    def store(rt: Any, job_id: str, items: Any) -> None:
        if _PARK:
            rec = rt.jobs.get(job_id)
            _control_point(
                job_id, rec.step_index - 1, "launched", _launched_name(rt, job_id, rec.step_index - 1)
            )
        store_items(rt, job_id, items)

    driver._launch_step = launch_step  # type: ignore[assignment]
    driver._remove_step_tags = remove_step_tags  # type: ignore[assignment]
    driver._store_items = store  # type: ignore[assignment]
    if _PARK:
        task_prerun.connect(_on_prerun, weak=False)


def _launched_name(rt: Any, job_id: str, index: int) -> str | None:
    for raw in reversed(rt.redis.lrange(steps_key(rt.settings.key_prefix, job_id), 0, -1)):
        i, _, name = raw.decode().partition(":")
        if int(i) == index:
            return str(name)
    return None


def _preload(**_: Any) -> None:
    from optiflow.llm.runtime import preload

    preload()


_install()
if os.environ.get("OPTIFLOW_CHAOS_PRELOAD") == "1":
    worker_init.connect(_preload, weak=False)


def _quiet(**_: Any) -> None:
    """One line per task received and per task done (with its result) is most of what a worker
    logs; a matrix run makes thousands of them."""
    import logging

    for name in ("celery.app.trace", "celery.worker.strategy"):
        logging.getLogger(name).setLevel(logging.WARNING)


after_setup_logger.connect(_quiet, weak=False)
