"""One contract for every limiter backend: in-process and Redis (the real server, db 13, a key
prefix of its own). Rates are high and waits short, so the whole suite takes a few seconds."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from optiflow.core.rate_limits import RouteLimit
from optiflow.llm.limiter import (
    DEFAULT_PAUSE_S,
    POLL_S,
    Lease,
    Limiter,
    LimiterBackend,
    LimiterTimeout,
    LocalLimiterBackend,
    Outcome,
    Ticket,
)


@pytest.fixture(params=["local", "redis"])
def backend(request: pytest.FixtureRequest) -> Iterator[LimiterBackend]:
    if request.param == "local":
        yield LocalLimiterBackend()
        return
    import redis

    from optiflow.distributed.ratelimit import RedisLimiterBackend

    client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
    yield RedisLimiterBackend(client, request.getfixturevalue("redis_prefix"))
    client.close()


def route(**kw: object) -> RouteLimit:
    return RouteLimit.model_validate({"name": "r", "model": "m", **kw})


def lease_now(backend: LimiterBackend, r: RouteLimit, tokens: int = 0, lease_s: float = 30) -> Lease:
    adm = backend.acquire(r, tokens=tokens, lease_s=lease_s, ticket=None)
    assert adm.lease is not None, adm
    return adm.lease


def test_requests_per_minute_paced_after_the_burst(backend: LimiterBackend) -> None:
    r = route(rpm=1200, burst_s=0.25)  # 20/s, a bucket of 5
    limiter = Limiter(_limits(r), backend)
    started = time.monotonic()
    for _ in range(25):
        lease, _ = limiter.admit(r, 0, lease_s=10)
        limiter.finish(r, lease, Outcome())
    elapsed = time.monotonic() - started
    assert 0.95 <= elapsed <= 1.6, elapsed  # 5 at once, then 20 at 20/s: never faster


def test_reservations_queue_in_order_without_polling(backend: LimiterBackend) -> None:
    r = route(rpm=600, burst_s=0.1)  # 10/s, a bucket of 1
    lease_now(backend, r)
    a = backend.acquire(r, tokens=0, lease_s=10, ticket=None)
    b = backend.acquire(r, tokens=0, lease_s=10, ticket=None)
    assert a.lease is None and b.lease is None and a.ticket is not None and b.ticket is not None
    assert a.wait_s == pytest.approx(0.1, abs=0.05) and b.wait_s == pytest.approx(0.2, abs=0.05)
    again = backend.acquire(r, tokens=0, lease_s=10, ticket=a.ticket)  # asking early keeps the turn
    assert again.lease is None and again.ticket == a.ticket and again.wait_s <= a.wait_s
    time.sleep(a.wait_s + 0.01)
    assert backend.acquire(r, tokens=0, lease_s=10, ticket=a.ticket).lease is not None
    # backlog: how long a new call would wait now (behind b's turn)
    assert backend.status(r).backlog_s == pytest.approx(b.wait_s + 0.1 - a.wait_s - 0.01, abs=0.05)


def test_tokens_reconcile_refund_and_debt(backend: LimiterBackend) -> None:
    r = route(tpm=6000, burst_s=1)  # 100 tokens/s, a bucket of 100
    first = lease_now(backend, r, tokens=100)
    # the provider reports 20: 80 come back, so 50 more fit at once
    backend.release(r, first, Outcome(tokens_used=20))
    second = lease_now(backend, r, tokens=50)
    # it used 350: 3 s of debt before 10 more tokens fit
    backend.release(r, second, Outcome(tokens_used=350))
    late = backend.acquire(r, tokens=10, lease_s=10, ticket=None)
    assert late.lease is None and late.wait_s == pytest.approx(2.8, abs=0.1)  # 0.7 + 3.0 - 0.9


def test_a_call_larger_than_the_bucket_goes_when_it_is_full_then_owes(backend: LimiterBackend) -> None:
    r = route(tpm=6000, burst_s=1)
    lease_now(backend, r, tokens=500)  # 5 buckets' worth: admitted on a full bucket
    nxt = backend.acquire(r, tokens=100, lease_s=10, ticket=None)
    assert nxt.lease is None and nxt.wait_s == pytest.approx(5.0, abs=0.1)


def test_concurrency_cap_and_release(backend: LimiterBackend) -> None:
    r = route(concurrency=2)
    a, _b = lease_now(backend, r), lease_now(backend, r)
    full = backend.acquire(r, tokens=0, lease_s=30, ticket=None)
    assert full.lease is None and 0 < full.wait_s <= POLL_S
    assert backend.status(r).in_flight == 2
    backend.release(r, a, Outcome())
    assert backend.acquire(r, tokens=0, lease_s=30, ticket=full.ticket).lease is not None


def test_a_lease_expires_so_a_killed_worker_frees_its_slot(backend: LimiterBackend) -> None:
    r = route(concurrency=1)
    lease_now(backend, r, lease_s=0.3)  # never released: its worker was killed
    assert backend.acquire(r, tokens=0, lease_s=30, ticket=None).lease is None
    time.sleep(0.35)
    assert backend.acquire(r, tokens=0, lease_s=30, ticket=None).lease is not None
    assert backend.status(r).in_flight == 1


def test_retry_after_pauses_the_route_and_voids_reservations(backend: LimiterBackend) -> None:
    r = route(rpm=600, burst_s=0.1)
    first = lease_now(backend, r)
    queued = backend.acquire(r, tokens=0, lease_s=10, ticket=None)
    assert queued.ticket is not None
    backend.release(r, first, Outcome(status="rate_limited", retry_after_s=0.4))
    status = backend.status(r)
    assert status.paused_s == pytest.approx(0.4, abs=0.05) and status.factor == 1.0  # one 429: a pause
    paused = backend.acquire(r, tokens=0, lease_s=10, ticket=queued.ticket)
    assert paused.lease is None and paused.ticket is None and paused.wait_s == pytest.approx(0.4, abs=0.05)
    time.sleep(paused.wait_s + 0.01)
    # the old turn is void: a fresh reservation, and the bucket restarts empty (no burst)
    assert backend.acquire(r, tokens=0, lease_s=10, ticket=queued.ticket).lease is not None
    after = backend.acquire(r, tokens=0, lease_s=10, ticket=None)
    assert after.lease is None and after.wait_s == pytest.approx(0.1, abs=0.03)


def test_a_429_without_retry_after_pauses_the_default(backend: LimiterBackend) -> None:
    r = route(rpm=6000)
    backend.release(r, lease_now(backend, r), Outcome(status="rate_limited"))
    assert backend.status(r).paused_s == pytest.approx(DEFAULT_PAUSE_S, abs=0.05)


def test_aimd_halves_on_a_storm_and_climbs_back(backend: LimiterBackend) -> None:
    r = route(rpm=6000, recover_s=0.5)
    early = lease_now(backend, r)
    in_flight = lease_now(backend, r)
    backend.release(r, early, Outcome(status="rate_limited", retry_after_s=0.1))
    # a 429 of a call sent before that pause: the same event, no halving
    backend.release(r, in_flight, Outcome(status="rate_limited", retry_after_s=0.1))
    assert backend.status(r).factor == 1.0
    time.sleep(0.12)
    obeyed = lease_now(backend, r)  # sent after the pause, and still refused: the rate is too high
    backend.release(r, obeyed, Outcome(status="rate_limited", retry_after_s=0.1))
    halved = backend.status(r)
    assert halved.factor == pytest.approx(0.5) and halved.effective_rpm == pytest.approx(3000)
    time.sleep(0.12)
    again = lease_now(backend, r)
    backend.release(r, again, Outcome(status="rate_limited", retry_after_s=0.05))
    assert backend.status(r).factor == pytest.approx(0.25)
    time.sleep(0.3)
    ok = lease_now(backend, r)
    backend.release(r, ok, Outcome())  # +0.5 per 2*recover_s of clean calls: about +0.3
    climbing = backend.status(r).factor
    assert 0.4 < climbing < 0.75, climbing
    time.sleep(0.6)
    backend.release(r, lease_now(backend, r), Outcome())
    assert backend.status(r).factor == 1.0  # back to the configured rate, never above


def test_provider_limit_below_the_configured_one_slows_the_route(backend: LimiterBackend) -> None:
    r = route(rpm=1200, tpm=100_000)
    backend.release(r, lease_now(backend, r), Outcome(provider_rpm=600, provider_tpm=200_000))
    s = backend.status(r)
    assert s.effective_rpm == pytest.approx(600) and s.effective_tpm == pytest.approx(100_000)


def test_long_reset_hint_pauses_the_route(backend: LimiterBackend) -> None:
    r = route(tpm=6000)
    backend.release(r, lease_now(backend, r, tokens=10), Outcome(pause_s=0.3))
    assert backend.status(r).paused_s == pytest.approx(0.3, abs=0.05)


def test_clear_forgets_everything(backend: LimiterBackend) -> None:
    r = route(rpm=60, concurrency=1)
    backend.release(r, lease_now(backend, r), Outcome(status="rate_limited", retry_after_s=30))
    backend.clear(r)
    status = backend.status(r)
    assert status.paused_s == 0 and status.factor == 1.0 and status.in_flight == 0
    assert backend.acquire(r, tokens=0, lease_s=10, ticket=None).lease is not None


def test_routes_are_independent(backend: LimiterBackend) -> None:
    a, b = route(rpm=60, burst_s=1), RouteLimit(name="other", model="x", rpm=60, burst_s=1)
    lease_now(backend, a)
    assert backend.acquire(a, tokens=0, lease_s=10, ticket=None).lease is None
    assert backend.acquire(b, tokens=0, lease_s=10, ticket=None).lease is not None


def test_a_stale_ticket_of_another_epoch_reserves_again(backend: LimiterBackend) -> None:
    r = route(rpm=600, burst_s=0.1)
    adm = backend.acquire(r, tokens=0, lease_s=10, ticket=Ticket(epoch=99, at=0.0))
    assert adm.lease is not None  # a fresh reservation on a full bucket


def test_waiting_longer_than_the_bound_gives_up(backend: LimiterBackend) -> None:
    r = route(rpm=60, burst_s=1)
    limiter = Limiter(_limits(r), backend, max_wait_s=0.2)
    limiter.admit(r, 0, lease_s=10)
    started = time.monotonic()
    with pytest.raises(LimiterTimeout, match="rate limit of model route 'r'"):
        limiter.admit(r, 0, lease_s=10)
    assert time.monotonic() - started < 0.5


def _limits(r: RouteLimit):  # type: ignore[no-untyped-def]
    from optiflow.core.rate_limits import ModelLimits

    return ModelLimits(routes=(r,))
