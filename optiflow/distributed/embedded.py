"""Embedded mode: a real Celery worker in this process, with no services.

Broker: kombu's ``memory://`` transport. Results: :class:`InProcessBackend`, a key-value backend
in this process's memory that completes chords with a counter, as Celery's Redis backend does.
(Celery's ``cache+memory://`` backend restores the whole group result on every chord part, O(n²):
a 2,000-task chord takes about a minute.)
"""

from __future__ import annotations

import threading
from typing import Any

from celery import Celery, states
from celery.backends.base import KeyValueStoreBackend
from celery.canvas import maybe_signature
from celery.exceptions import ChordError

from optiflow.errors import ConfigError

EMBEDDED_BACKEND = "optiflow.distributed.embedded:InProcessBackend"


class ResultTable:
    """The results and chord counters of one embedded app, shared by every thread of the process
    (Celery makes a backend object per thread). The app owns it: a second app in the process has
    its own."""

    def __init__(self) -> None:
        self.data: dict[Any, Any] = {}
        self.chords: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()


class InProcessBackend(KeyValueStoreBackend):  # type: ignore[misc]
    """Results in the app's :class:`ResultTable`; chords by counter."""

    supports_native_join = True
    supports_autoexpire = False
    implements_incr = True

    def __init__(self, app: Celery, url: str | None = None, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        # dict.setdefault is atomic: backends made by two threads at once get the same table
        table: ResultTable = app.__dict__.setdefault("optiflow_results", ResultTable())
        self._data, self._chords, self._lock = table.data, table.chords, table.lock

    # key-value primitives
    def get(self, key: Any) -> Any:
        return self._data.get(key)

    def mget(self, keys: list[Any]) -> list[Any]:
        return [self._data.get(k) for k in keys]

    def set(self, key: Any, value: Any) -> None:
        with self._lock:
            self._data[key] = value

    def delete(self, key: Any) -> None:
        with self._lock:
            self._data.pop(key, None)

    def incr(self, key: Any) -> int:
        with self._lock:
            value = int(self._data.get(key) or 0) + 1
            self._data[key] = value
            return value

    def expire(self, key: Any, value: Any) -> None:
        return None

    # chords
    def apply_chord(self, header_result_args: Any, body: Any, **kwargs: Any) -> None:
        self.ensure_chords_allowed()

    def set_chord_size(self, group_id: str, chord_size: int) -> None:
        # Celery calls this just before publishing the LAST header task: parts may be in already.
        with self._lock:
            self._chords.setdefault(group_id, {"parts": {}})["size"] = chord_size

    def on_chord_part_return(self, request: Any, state: str, result: Any, **kwargs: Any) -> None:
        gid, tid = request.group, request.id
        if not gid or not tid:
            return
        with self._lock:
            chord = self._chords.setdefault(gid, {"parts": {}})
            # keyed by task id: a redelivered task replaces its part instead of counting twice
            chord["parts"][tid] = (request.group_index or 0, state, result)
            size = chord.get("size") or request.chord.get("chord_size")
            if size is None or len(chord["parts"]) < size:
                return
            del self._chords[gid]
        callback = maybe_signature(request.chord, app=self.app)
        parts = sorted(chord["parts"].values(), key=lambda p: p[0])
        failed = next((p for p in parts if p[1] in states.PROPAGATE_STATES), None)
        if failed is not None:
            self.chord_error_from_stack(callback, ChordError(f"a header task failed: {failed[2]!r}"))
            return
        callback.delay([p[2] for p in parts])


WAKE = "optiflow.embedded.wake"


def _wake() -> None:
    """Nothing: a message that wakes an idle embedded worker so it sees it must stop."""


class EmbeddedWorker:
    """A Celery WorkController (threads pool) consuming every optiflow queue in a daemon thread.

    One per process: Celery's worker set-up (current app, task registry of the trace fast path,
    the shutdown flag) is process-wide, so a second worker would run the first one's tasks.
    """

    _running: EmbeddedWorker | None = None
    _guard = threading.Lock()

    def __init__(self, app: Celery, *, concurrency: int, queues: list[str]) -> None:
        from celery.app.trace import setup_worker_optimizations
        from celery.worker import WorkController

        with EmbeddedWorker._guard:
            if EmbeddedWorker._running is not None:
                raise ConfigError(
                    "an embedded worker already runs in this process: close its Client first, or set "
                    "OPTIFLOW_REDIS_URL and run `optiflow worker` processes",
                    field="embedded",
                )
            EmbeddedWorker._running = self
        try:
            self.app, self.queues = app, queues
            if WAKE not in app.tasks:
                app.task(name=WAKE, ignore_result=True, shared=False)(_wake)
            hostname = f"optiflow-embedded@{threading.get_ident()}"
            # What `celery worker` does before starting (celery.apps.worker.Worker): make this app the
            # current and default one, so pool threads trace tasks against it and its result backend.
            setup_worker_optimizations(app, hostname)
            self.ready = threading.Event()
            self.controller = WorkController(
                app=app,
                concurrency=concurrency,
                pool="threads",
                queues=queues,
                loglevel="WARNING",
                without_heartbeat=True,
                without_mingle=True,
                without_gossip=True,
                hostname=hostname,
                ready_callback=lambda _consumer: self.ready.set(),
            )
        except BaseException:
            EmbeddedWorker._running = None
            raise
        self.thread = threading.Thread(target=self.controller.start, name="optiflow-worker", daemon=True)

    def start(self, timeout: float = 30.0) -> EmbeddedWorker:
        from celery._state import _set_task_join_will_block

        self.thread.start()
        self.ready.wait(timeout)
        # The worker marks the process as "inside a task" (result.get() refuses to block); this
        # process is also the client, which may wait on results: undo it, as Celery's own
        # in-thread test worker does.
        _set_task_join_will_block(False)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        from celery.worker import state

        state.should_terminate = 0
        # An idle worker loop checks the flag only between 2-second waits for a message, and on
        # seeing it waits once more (celery.worker.loops.synloop drains in a ``finally``): hand it
        # a message for each wait, so closing a client takes milliseconds instead of 4 seconds.
        for _ in range(2):
            self.app.tasks[WAKE].apply_async(queue=self.queues[0])
        self.thread.join(timeout)
        state.should_terminate = None
        with EmbeddedWorker._guard:
            if EmbeddedWorker._running is self:
                EmbeddedWorker._running = None
