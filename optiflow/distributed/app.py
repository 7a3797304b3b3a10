"""The Celery app factory.

One factory for every role: the embedded default (memory broker, in-process results, a worker
thread in the client's process) and the distributed deployment (Redis broker and results, eval
and control workers chosen by queue). JSON only; late acks so a killed worker's task comes back.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from celery import Celery, bootsteps
from celery.signals import worker_init, worker_process_init

from optiflow.distributed.embedded import EMBEDDED_BACKEND
from optiflow.distributed.publishing import BatchingCelery
from optiflow.distributed.ratelimit import startup_lines
from optiflow.distributed.results import backend_url
from optiflow.distributed.runtime import Runtime
from optiflow.distributed.tasks import register_tasks
from optiflow.errors import ConfigError, OptiflowError
from optiflow.settings import Settings

log = logging.getLogger(__name__)
QUEUE_CONTROL = "optiflow.control"
QUEUE_EVAL = "optiflow.eval"
QUEUES = (QUEUE_CONTROL, QUEUE_EVAL)
VISIBILITY_TIMEOUT_S = 3600
MODEL_TASKS = ("optiflow.evaluate", "optiflow.propose", "optiflow.rewrite")


def create_app(settings: Settings | None = None, *, embedded: bool | None = None) -> Celery:
    settings = settings or Settings()
    if embedded is None:
        embedded = not settings.distributed
    broker: str | None = "memory://"
    backend: str | None = EMBEDDED_BACKEND
    if not embedded:
        broker = settings.broker_url or settings.redis_url
        backend = settings.result_backend or settings.redis_url
        if backend:
            backend = backend_url(backend)
        if not broker or not backend:
            raise ConfigError(
                "distributed mode needs OPTIFLOW_REDIS_URL (or a broker and a result backend)",
                field="OPTIFLOW_REDIS_URL",
            )
    app = BatchingCelery("optiflow", broker=broker, backend=backend, set_as_current=False)
    transport: dict[str, Any] = {"visibility_timeout": VISIBILITY_TIMEOUT_S}
    if embedded:
        # kombu's virtual transports sleep polling_interval (1 s) whenever a poll finds nothing.
        broker_transport: dict[str, Any] = {"polling_interval": 0.005}
    else:
        # Queues live under the key prefix too, so several deployments (or test runs) share a Redis.
        broker_transport = {**transport, "global_keyprefix": f"{settings.key_prefix}:"}
        # kombu's option covers the broker's keys only; the result backend has its own, which
        # puts celery-task-meta-*, celery-taskset-meta-* and the chord counters under the prefix.
        transport = {**transport, "global_keyprefix": f"{settings.key_prefix}:"}
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue=QUEUE_CONTROL,
        # Every task that calls a model goes to the eval queue (threads, scaled out); a
        # control-only worker never imports litellm.
        task_routes={name: {"queue": QUEUE_EVAL} for name in MODEL_TASKS},
        # Control tasks are short; evaluate tasks are bounded by the litellm timeout instead
        # (the threads pool has no time limits).
        task_soft_time_limit=300,
        task_time_limit=600,
        broker_transport_options=broker_transport,
        result_backend_transport_options=transport,
        result_expires=7 * 24 * 3600,
        result_chord_join_timeout=30,
        broker_connection_retry_on_startup=True,
        # Flower broadcasts enable_events while it runs, and shows a task from its "received"
        # event on; OPTIFLOW_TASK_EVENTS=true sends worker events always, and "sent" events too
        # (those are the producer's: a control worker launching a step publishes one per task).
        worker_send_task_events=settings.task_events and not embedded,
        task_send_sent_event=settings.task_events and not embedded,
        worker_hijack_root_logger=False,
        enable_utc=True,
    )
    runtime = Runtime(settings, embedded=embedded)
    app.optiflow_runtime = runtime
    register_tasks(app, runtime)
    if not embedded:

        def check_database(sender: Any = None, **_: Any) -> None:
            """Refuse to start on an unmigrated (or unreachable) database, with one clear line.
            SystemExit, because Celery logs and ignores an Exception raised by a signal handler."""
            if not _is_worker_of(sender, app):
                return
            try:
                runtime.jobs  # noqa: B018 -- opening the repository checks the schema revision
            except OptiflowError as exc:
                sys.stderr.write(f"optiflow worker refused to start: error[{exc.code}]: {exc}\n")
                raise SystemExit(2) from None

        worker_init.connect(check_database, weak=False)

        def forget_inherited_connections(**_: Any) -> None:
            """In each prefork child: the pools opened in the parent (the database check above)
            belong to the parent; a child using them shares one connection with its siblings."""
            after_fork(runtime)

        worker_process_init.connect(forget_inherited_connections, weak=False)

        def preload_litellm(sender: Any = None, **_: Any) -> None:
            """An eval worker pays litellm's import (seconds) before it says "ready", not in its
            first job; a control-only worker never calls a model and skips it."""
            from optiflow.llm.runtime import preload

            if not _is_worker_of(sender, app):
                return
            queues = set(sender.app.amqp.queues.consume_from) if sender is not None else set()
            if not queues or QUEUE_EVAL in queues:
                preload()

        worker_init.connect(preload_litellm, weak=False)

        def setup_limits(sender: Any = None, **_: Any) -> None:
            """Refuse to start on bad OPTIFLOW_MODEL_LIMITS (one line naming the field); an
            eval worker says what it enforces (its runtime's limiter, in Redis, shared by the
            fleet: every model call of its tasks passes it)."""
            if not _is_worker_of(sender, app):
                return
            try:
                lines = startup_lines(settings)
                queues = set(sender.app.amqp.queues.consume_from) if sender is not None else set()
                if not queues or QUEUE_EVAL in queues:
                    # Before the banner, on stderr: worker_init comes before Celery's logging.
                    sys.stderr.write("".join(f"{line}\n" for line in lines))
                    sys.stderr.flush()
            except OptiflowError as exc:
                sys.stderr.write(f"optiflow worker refused to start: error[{exc.code}]: {exc}\n")
                raise SystemExit(2) from None

        worker_init.connect(setup_limits, weak=False)

        app.steps["consumer"].add(Recovery)
    return app


def after_fork(runtime: Runtime) -> None:
    """Drop what a forked process inherited: every SQLAlchemy pool is disposed of without closing
    the parent's connections (``dispose(close=False)``: the child opens its own), and the Redis
    clients, store and scratch made before the fork are rebuilt on first use in the child."""
    jobs = runtime.__dict__.get("jobs")  # the runtime's repository, if the parent made one
    if jobs is not None:
        jobs.after_fork()
    for name in ("redis", "store", "scratch"):
        inherited = runtime.__dict__.pop(name, None)  # functools.cached_property values
        store_engine = getattr(inherited, "_engine", None)  # SqlOverridesStore
        if store_engine is not None and hasattr(store_engine, "dispose"):
            store_engine.dispose(close=False)


def _is_worker_of(sender: Any, app: Celery) -> bool:
    """``worker_init`` is one signal for the whole process: a handler connected for one app must
    leave the workers of other apps alone (an embedded worker started after a distributed app was
    created in the same process, as in tests). No sender: a caller outside Celery, assume ours."""
    return sender is None or getattr(sender, "app", app) is app


class Recovery(bootsteps.StartStopStep):  # type: ignore[misc]
    """On a worker that consumes the control queue: resume stalled jobs and sweep orphaned temp
    tags when it starts, then every ``recover_interval_s`` (``optiflow.recover``)."""

    requires = {"celery.worker.consumer.tasks:Tasks"}

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.tref: Any = None

    def start(self, c: Any) -> None:
        if QUEUE_CONTROL not in {q.name for q in c.task_consumer.queues}:
            return
        app = c.app
        interval = runtime_of(app).settings.recover_interval_s

        def tick() -> None:
            try:
                app.tasks["optiflow.recover"].apply_async(queue=QUEUE_CONTROL)
            except Exception as exc:  # the broker is down: the next tick tries again
                log.warning("recovery sweep not sent: %s", exc)

        tick()
        self.tref = c.timer.call_repeatedly(interval, tick)

    def stop(self, c: Any) -> None:
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None


def runtime_of(app: Celery) -> Runtime:
    rt: Runtime = app.optiflow_runtime
    return rt
