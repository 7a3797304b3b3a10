"""A step's chord published in one go.

kombu's Redis transport pipelines the publishes made inside ``Producer.batch()``: a step's
hundreds of task messages then cost a few round trips instead of one each, and the control
worker spends its CPU on the next step instead of waiting on sockets. Celery acquires a producer
from its pool for each group it applies, so :class:`BatchingCelery` hands out the current
thread's batching producer instead while :func:`batched` is active. On a transport without
batches (the embedded memory broker) messages are published at once, as before. If the block
raises, its unpublished messages are dropped with it (the step fails as a whole).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from celery import Celery

# Messages per pipeline: workers start on the first ones while the rest are being built.
BATCH = 16


class BatchingCelery(Celery):  # type: ignore[misc]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._batching = threading.local()

    def producer_or_acquire(self, producer: Any = None) -> AbstractContextManager[Any]:
        current = getattr(self._batching, "producer", None)
        if producer is None and current is not None:
            return nullcontext(current)
        return super().producer_or_acquire(producer)  # type: ignore[no-any-return]

    @contextmanager
    def batched(self) -> Iterator[None]:
        """Publishes of this thread inside the block go out together when it ends."""
        if getattr(self._batching, "producer", None) is not None:  # nested: the outer one flushes
            yield
            return
        with super().producer_or_acquire() as producer, producer.batch(max_size=BATCH):
            self._batching.producer = producer
            try:
                yield
            finally:
                self._batching.producer = None


def batched(app: Celery) -> AbstractContextManager[None]:
    """``app.batched()`` for an optiflow app; a plain Celery app publishes at once."""
    if isinstance(app, BatchingCelery):
        return app.batched()
    return nullcontext()
