"""One contract for the eval cache and job signals, run on the in-process and the Redis backends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from optiflow.core.evaluation import EvalResult
from optiflow.distributed.cache import (
    EvalCache,
    JobSignals,
    MemoryEvalCache,
    MemoryJobSignals,
    RedisEvalCache,
    RedisJobSignals,
    cache_key,
)


@pytest.fixture(params=["memory", "redis"])
def backends(request: pytest.FixtureRequest) -> Iterator[tuple[EvalCache, JobSignals]]:
    if request.param == "memory":
        yield MemoryEvalCache(), MemoryJobSignals()
        return
    import redis

    url = request.getfixturevalue("redis_url")
    prefix = request.getfixturevalue("redis_prefix")
    client = redis.Redis.from_url(url)
    yield RedisEvalCache(client, prefix), RedisJobSignals(client, prefix)
    client.close()


def test_cache_round_trip_is_scoped_and_compact(backends: tuple[EvalCache, JobSignals]) -> None:
    cache, _ = backends
    key = cache_key({"system": "s", "user": "u", "run": 0})
    assert cache.get("job1", key) is None
    result = EvalResult(
        experiment_id="e", sample_id="s1", run=0, passed=True, score=1.0, output="long text", cost=0.5
    )
    cache.put("job1", key, result)
    got = cache.get("job1", key)
    assert got == result.compact() and got.output is None
    assert cache.get("job2", key) is None
    cache.clear("job1")
    assert cache.get("job1", key) is None


def test_cache_key_is_stable_and_sensitive() -> None:
    a = cache_key({"system": "s", "run": 0, "sample": "x"})
    assert a == cache_key({"sample": "x", "run": 0, "system": "s"})
    assert a != cache_key({"system": "s", "run": 1, "sample": "x"})


def test_signals(backends: tuple[EvalCache, JobSignals]) -> None:
    _, signals = backends
    assert signals.skip_reason("j", "e1") is None
    signals.mark_regressed("j", "e1")
    assert signals.skip_reason("j", "e1") == "regressed"
    assert signals.skip_reason("j", "e2") is None
    assert signals.skip_reason("other", "e1") is None
    assert not signals.cancelled("j")
    signals.cancel("j")
    assert signals.cancelled("j") and not signals.cancelled("other")
    assert signals.skip_reason("j", "e2") == "cancelled"
    signals.clear("j")
    assert not signals.cancelled("j")
    assert signals.skip_reason("j", "e1") is None
    assert signals.skip_reason("j", "e2") is None
