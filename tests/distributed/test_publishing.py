"""A step's messages go to Redis in pipelines of ``BATCH`` (kombu's publish batches), all or none."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from optiflow.distributed.app import QUEUE_EVAL, create_app
from optiflow.distributed.publishing import BATCH, batched
from optiflow.settings import Settings

pytestmark = pytest.mark.redis


def queued(client: redis.Redis, prefix: str) -> int:
    return int(client.llen(f"{prefix}:{QUEUE_EVAL}"))


def test_publishes_inside_a_batch_reach_the_queue_in_pipelines(
    redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    app = create_app(Settings(redis_url=redis_url, key_prefix=redis_prefix, home=tmp_path), embedded=False)
    evaluate = app.tasks["optiflow.evaluate"]
    client = redis.Redis.from_url(redis_url)
    n = 2 * BATCH + 10
    with batched(app):
        for i in range(n):
            evaluate.s("job", "exp", "tag", f"s{i}", 0, False).apply_async()
            if i == BATCH - 2:
                assert queued(client, redis_prefix) == 0  # still buffered
        assert queued(client, redis_prefix) == 2 * BATCH  # full pipelines went out already
    assert queued(client, redis_prefix) == n

    with pytest.raises(RuntimeError), batched(app):
        for i in range(10):
            evaluate.s("job", "exp", "tag", f"t{i}", 0, False).apply_async()
        raise RuntimeError("the step failed while it was being published")
    assert queued(client, redis_prefix) == n  # the failed block published nothing

    evaluate.s("job", "exp", "tag", "after", 0, False).apply_async()  # outside: at once
    assert queued(client, redis_prefix) == n + 1
    client.close()
