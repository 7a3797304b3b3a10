"""One contract for the job scratch (eval cache + signals), on the in-process and Redis backends."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from optiflow.core.evaluation import EvalResult
from optiflow.distributed.scratch import JobScratch, MemoryJobScratch, RedisJobScratch, cache_key


@pytest.fixture(params=["memory", "redis"])
def scratch(request: pytest.FixtureRequest) -> Iterator[JobScratch]:
    if request.param == "memory":
        yield MemoryJobScratch()
        return
    import redis

    client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
    yield RedisJobScratch(client, request.getfixturevalue("redis_prefix"))
    client.close()


RESULT = EvalResult(
    experiment_id="e1", sample_id="s1", run=0, passed=True, score=1.0, output="long text", cost=0.5
)


def test_cache_round_trip_is_job_scoped_and_compact(scratch: JobScratch) -> None:
    key = cache_key({"system": "s", "user": "u", "run": 0})
    assert scratch.lookup("job1", "e1", key) == (None, None)
    scratch.record("job1", "e1", key, RESULT, regressed=False)
    skip, hit = scratch.lookup("job1", "e2", key)  # any experiment rendering the same prompt
    assert skip is None and hit == RESULT.compact() and hit.output is None
    assert scratch.lookup("job2", "e1", key) == (None, None)
    scratch.clear("job1")
    assert scratch.lookup("job1", "e1", key) == (None, None)


def test_cache_key_is_stable_and_sensitive() -> None:
    a = cache_key({"system": "s", "run": 0, "sample": "x"})
    assert a == cache_key({"sample": "x", "run": 0, "system": "s"})
    assert a != cache_key({"system": "s", "run": 1, "sample": "x"})


def test_regression_skips_that_experiment_only(scratch: JobScratch) -> None:
    scratch.record("j", "e1", "k1", None, regressed=True)
    assert scratch.lookup("j", "e1", "k2") == ("regressed", None)
    assert scratch.lookup("j", "e2", "k2") == (None, None)
    assert scratch.lookup("other", "e1", "k2") == (None, None)


def test_cancel_skips_every_experiment_even_cached(scratch: JobScratch) -> None:
    scratch.record("j", "e1", "k", RESULT, regressed=False)
    assert not scratch.cancelled("j")
    scratch.cancel("j")
    assert scratch.cancelled("j") and not scratch.cancelled("other")
    assert scratch.lookup("j", "e2", "k") == ("cancelled", None)
    scratch.clear("j")
    assert not scratch.cancelled("j")
    assert scratch.lookup("j", "e1", "k") == (None, None)


def test_progress_counts_a_step_and_beats(scratch: JobScratch) -> None:
    assert scratch.progress("j") is None
    scratch.start_step("j", step=2, total=3)
    first = scratch.progress("j")
    assert first is not None and (first.step, first.total, first.done) == (2, 3, 0) and first.beat > 0
    scratch.record("j", "e1", "k1", RESULT, regressed=False)
    scratch.record("j", "e1", "k2", None, regressed=False)
    now = scratch.progress("j")
    assert now is not None and now.done == 2 and now.beat >= first.beat
    scratch.start_step("j", step=3, total=5)  # a new (or re-issued) step restarts the count
    again = scratch.progress("j")
    assert again is not None and (again.step, again.done) == (3, 0)
    scratch.clear("j")
    assert scratch.progress("j") is None


def test_lock_is_exclusive_until_it_expires(scratch: JobScratch) -> None:
    import time
    import uuid

    name = f"test-{uuid.uuid4().hex}"
    assert scratch.try_lock(name, 0.2)
    assert not scratch.try_lock(name, 0.2)
    time.sleep(0.3)
    assert scratch.try_lock(name, 0.2)


def test_beat_moves_a_running_steps_beat_only(scratch: JobScratch) -> None:
    scratch.beat("j")  # no running step: nothing appears
    assert scratch.progress("j") is None
    scratch.start_step("j", step=1, total=4)
    first = scratch.progress("j")
    assert first is not None
    time.sleep(0.01)
    scratch.beat("j")
    later = scratch.progress("j")
    assert later is not None and later.beat > first.beat
    assert (later.step, later.total, later.done) == (1, 4, 0)  # a beat is no evaluation done
