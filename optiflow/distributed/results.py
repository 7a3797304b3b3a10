"""The Redis result backend without celery/celery#4824's subscription leak.

Applying a chord builds GroupResults whose barrier subscribes to the result channel of every
header task (``AsyncResult.then`` -> ``add_pending_result``) in the process that applies it. In a
worker nobody waits on those results (Celery refuses ``result.get()`` inside a task), so the
subscriptions and result objects were never released: a control worker held about 1150 more
subscribed channels after every compress job. Inside a worker this backend tracks no pending
result; a client (``JobHandle.wait``) still waits on its reply as before.
"""

from __future__ import annotations

from typing import Any

from celery.backends.redis import RedisBackend as CeleryRedisBackend
from celery.result import task_join_will_block

SCHEMES = ("redis", "rediss")


class RedisBackend(CeleryRedisBackend):  # type: ignore[misc]
    def add_pending_result(self, result: Any, weak: bool = False, start_drainer: bool = True) -> Any:
        if task_join_will_block():  # in a worker: nothing here will ever wait on it
            return result
        return super().add_pending_result(result, weak=weak, start_drainer=start_drainer)


def backend_url(url: str) -> str:
    """``url`` with this backend for a Redis URL (Celery's ``class+url`` form); others as given."""
    if url.partition("://")[0] in SCHEMES:
        return f"{__name__}:RedisBackend+{url}"
    return url
