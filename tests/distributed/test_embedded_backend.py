"""The in-process result backend completes chords exactly once, with every part, in order.

Celery sets a chord's size just before publishing its last header task, so with a fast worker
many parts return before the size is known: they must not be lost.
"""

from __future__ import annotations

import time
from typing import Any

from celery import Celery, chord

from optiflow.distributed.embedded import EMBEDDED_BACKEND, EmbeddedWorker


def test_large_chords_complete_once_with_all_parts_in_order() -> None:
    app = Celery("embedded-test", broker="memory://", backend=EMBEDDED_BACKEND, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        broker_transport_options={"polling_interval": 0.005},
    )
    bodies: list[tuple[str, list[Any]]] = []

    @app.task(name="t.square")  # type: ignore[untyped-decorator]
    def square(x: int) -> int:
        return x * x

    @app.task(name="t.collect")  # type: ignore[untyped-decorator]
    def collect(results: list[int], label: str) -> None:
        bodies.append((label, results))

    worker = EmbeddedWorker(app, concurrency=16, queues=["celery"]).start()
    try:
        for label, n in (("a", 400), ("b", 5), ("c", 1200)):
            chord([square.s(i) for i in range(n)])(collect.s(label))
            deadline = time.monotonic() + 30
            while not any(b[0] == label for b in bodies) and time.monotonic() < deadline:
                time.sleep(0.01)
            done = [b for b in bodies if b[0] == label]
            assert len(done) == 1, f"chord {label} completed {len(done)} times"
            assert done[0][1] == [i * i for i in range(n)]
    finally:
        worker.stop()
