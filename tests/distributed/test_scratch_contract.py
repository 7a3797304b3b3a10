"""One contract for the job scratch (eval cache + signals), on the in-process and Redis backends."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from optiflow.core.budget import Charge, JobBudget, Spend
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


def test_a_mark_skips_model_calls_not_answers_already_made(scratch: JobScratch) -> None:
    """A step launched again after a crash gets back the answer that set its candidate's mark."""
    scratch.record("j", "e1", "k1", RESULT, regressed=True)
    assert scratch.lookup("j", "e1", "k1") == (None, RESULT.compact())
    assert scratch.lookup("j", "e1", "k2") == ("regressed", None)


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


# -- the job's spend (budgets) ---------------------------------------------------------------------
BUDGET = JobBudget(max_cost_usd=1.0, max_tokens=1000)


def test_spend_starts_at_zero_and_adds_every_charge(scratch: JobScratch) -> None:
    assert scratch.spend("j") == Spend()
    scratch.record("j", "e1", "k1", RESULT, regressed=False, charge=Charge(cost_usd=0.25, tokens=100))
    scratch.record("j", "e1", "k2", None, regressed=False, charge=Charge(skipped=1))
    after = scratch.charge("j", Charge(cost_usd=0.125, tokens=20))
    assert after == scratch.spend("j") == Spend(cost_usd=0.375, tokens=120, skipped=1)
    assert scratch.spend("other") == Spend()
    scratch.clear("j")
    assert scratch.spend("j") == Spend()


def test_lookup_skips_for_the_budget_once_either_cap_is_reached(scratch: JobScratch) -> None:
    scratch.record("j", "e1", "cached", RESULT, regressed=False, charge=Charge(cost_usd=0.5, tokens=500))
    assert scratch.lookup("j", "e1", "k", BUDGET) == (None, None)  # half spent
    assert scratch.lookup("j", "e1", "k", None) == (None, None)
    scratch.charge("j", Charge(cost_usd=0.1, tokens=500))  # tokens reach their cap
    assert scratch.lookup("j", "e1", "k", BUDGET) == ("budget_exhausted", None)
    assert scratch.lookup("j", "e1", "k", JobBudget(max_cost_usd=1.0)) == (None, None)
    assert scratch.lookup("j", "e1", "k", None) == (None, None)  # a job without a budget
    # a cached answer costs no call: still served; cancel and fail-fast come first
    skip, hit = scratch.lookup("j", "e2", "cached", BUDGET)
    assert skip is None and hit == RESULT.compact()
    scratch.record("j", "e3", "x", None, regressed=True)
    assert scratch.lookup("j", "e3", "k", BUDGET) == ("regressed", None)
    scratch.cancel("j")
    assert scratch.lookup("j", "e1", "k", BUDGET) == ("cancelled", None)


def test_charges_ending_at_or_past_the_budget_are_over_calls(scratch: JobScratch) -> None:
    budget = JobBudget(max_cost_usd=1.0)
    scratch.charge("j", Charge(cost_usd=0.6), budget)
    scratch.record("j", "e1", "k1", None, regressed=False, charge=Charge(cost_usd=0.4), budget=budget)
    assert scratch.spend("j").over_calls == 1  # the call that reached the budget
    scratch.record("j", "e1", "k2", None, regressed=False, charge=Charge(cost_usd=0.2), budget=budget)
    scratch.charge("j", Charge(skipped=1), budget)  # a skipped call spends nothing
    scratch.charge("j", Charge(), budget)  # nor does a failed one
    assert scratch.spend("j") == Spend(cost_usd=1.2, tokens=0, skipped=1, over_calls=2)
    scratch.charge("k", Charge(cost_usd=5.0))  # no budget given: nothing counts as over
    assert scratch.spend("k").over_calls == 0


def test_concurrent_charges_all_add_up(scratch: JobScratch) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int) -> None:
        scratch.record("j", "e1", f"k{i}", None, regressed=False, charge=Charge(cost_usd=0.125, tokens=3))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(200)))
    assert scratch.spend("j") == Spend(cost_usd=25.0, tokens=600)
    progress = scratch.progress("j")
    assert progress is not None and progress.done == 200


def test_probes_count_a_steps_probe_answers_and_stop_on_regression_or_cancel(scratch: JobScratch) -> None:
    assert scratch.probes("j", "e1", 3) == (0, False, None)
    scratch.record("j", "e1", "k1", RESULT, regressed=False, probe_step=3)
    scratch.record("j", "e2", "k2", None, regressed=False, probe_step=3)
    scratch.record("j", "e2", "k3", None, regressed=False)  # not a probe's
    scratch.record("j", "e1", "k4", None, regressed=False, charge=Charge(cost_usd=0.1), probe_step=3)
    assert scratch.probes("j", "e1", 3) == (3, False, None)
    assert scratch.probes("j", "e1", 4) == (0, False, None)  # another step's probes
    assert scratch.probes("other", "e1", 3) == (0, False, None)
    scratch.record("j", "e2", "k5", None, regressed=True, probe_step=4)
    assert scratch.probes("j", "e2", 4) == (1, True, None)  # its experiment regressed: no need to wait
    assert scratch.probes("j", "e1", 4) == (1, False, None)
    scratch.cancel("j")
    assert scratch.probes("j", "e1", 3) == (3, True, None)
    scratch.clear("j")
    assert scratch.probes("j", "e1", 3) == (0, False, None)


def test_a_probes_lookup_marks_its_steps_probes_begun_once(scratch: JobScratch) -> None:
    before = time.time()
    assert scratch.lookup("j", "e1", "k1", probe_step=3) == (None, None)
    _, _, began = scratch.probes("j", "e2", 3)  # any experiment's evaluation reads the step's clock
    assert began is not None and before <= began <= time.time()
    time.sleep(0.01)
    scratch.lookup("j", "e2", "k2", probe_step=3)  # a later probe: the first one's time stays
    scratch.lookup("j", "e2", "k3")  # not a probe's
    assert scratch.probes("j", "e1", 3)[2] == began
    assert scratch.probes("j", "e1", 4)[2] is None and scratch.probes("other", "e1", 3)[2] is None
    scratch.clear("j")
    assert scratch.probes("j", "e1", 3) == (0, False, None)
