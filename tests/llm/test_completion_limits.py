"""``complete`` through the limiter against the rate-limited provider (a real HTTP server on
127.0.0.1 reached by litellm as ``openai/<name>``), and the provider's headers read right."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from optiflow.core.model import ModelConfig
from optiflow.core.rate_limits import ModelLimits, RouteLimit
from optiflow.llm.completion import complete
from optiflow.llm.limiter import (
    Limiter,
    LocalLimiterBackend,
    installed,
    limited_by,
    outcome_from_headers,
    parse_duration,
    retry_after_s,
    while_waiting,
)
from tests.support.ratelimited_server import RateLimitedServer

MSGS = [
    {"role": "system", "content": "When a customer asks about a refund, reply with code RFD-201."},
    {"role": "user", "content": "Can I get a refund for my order?"},
]


@pytest.fixture(scope="module")
def server() -> Iterator[RateLimitedServer]:
    with RateLimitedServer() as srv:
        yield srv


@pytest.fixture
def provider(server: RateLimitedServer) -> RateLimitedServer:
    server.configure(rpm=None, tpm=None, burst_s=1.0, latency_ms=0)
    server.reset()
    return server


def model(server: RateLimitedServer, **params: object) -> ModelConfig:
    return ModelConfig(
        model="openai/limited",
        api_base=server.api_base,
        params={"api_key": "test", "stream": False, **params},
        timeout=10,
        retries=2,
    )


def limiter_for(server: RateLimitedServer, **limits: object) -> Limiter:
    route = RouteLimit.model_validate({"name": "limited", "model": "openai/limited", **limits})
    assert route.matches("openai/limited", server.api_base + "/")
    return Limiter(ModelLimits(routes=(route,)), LocalLimiterBackend())


def test_calls_from_many_threads_stay_under_the_providers_rate(provider: RateLimitedServer) -> None:
    provider.configure(rpm=600, burst_s=1.0)  # 10/s, the provider's bucket holds 1 s
    limiter = limiter_for(provider, rpm=600)  # ours holds 0.1 s: one call
    cfg = model(provider)
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: complete(cfg, MSGS, limiter=limiter), range(15)))
    elapsed = time.monotonic() - started
    assert all(r.ok and "RFD-201" in r.output for r in results)
    assert all(r.attempts == 1 for r in results)
    stats = provider.stats()
    assert stats["rejected"] == 0 and stats["accepted"] == 15
    assert elapsed >= 1.3  # one at once, 14 more at 10/s
    assert sum(r.wait_ms > 0 for r in results) >= 13
    # waiting is counted apart from latency: both fit in the wall time of the whole batch
    assert all(r.latency_ms + r.wait_ms <= elapsed * 1000 + 50 for r in results)
    assert max(r.wait_ms for r in results) >= 500  # 8 threads: up to 7 turns of 0.1 s ahead


def test_a_429_pauses_the_route_and_its_retry_passes_the_limiter(provider: RateLimitedServer) -> None:
    provider.configure(rpm=60, burst_s=1.0)  # one call per second
    limiter = limiter_for(provider, rpm=6000)  # configured far too high
    cfg = model(provider)
    assert complete(cfg, MSGS, limiter=limiter).ok
    started = time.monotonic()
    second = complete(cfg, MSGS, limiter=limiter)
    elapsed = time.monotonic() - started
    assert second.ok and second.attempts == 2  # the 429, then the retry after the pause
    assert second.wait_ms >= 700 and elapsed >= 0.7  # Retry-After (about 1 s), the whole route
    assert provider.stats()["rejected"] == 1
    # the provider said 60 rpm: the route now runs at that, not at the configured 6000
    (status,) = limiter.status()
    assert status.effective_rpm == pytest.approx(60)


def test_token_estimate_is_reconciled_with_reported_usage(provider: RateLimitedServer) -> None:
    limiter = limiter_for(provider, tpm=600_000)
    cfg = model(provider)
    route = limiter.route_for(cfg)
    assert route is not None
    before = limiter.estimate_tokens(route, cfg, MSGS)
    result = complete(cfg, MSGS, limiter=limiter)
    assert result.ok and result.prompt_tokens > 0
    assert before == result.prompt_tokens  # tiktoken counts the prompt as the provider does
    after = limiter.estimate_tokens(route, cfg, MSGS)  # now with the route's mean completion
    assert after == result.prompt_tokens + result.completion_tokens
    assert limiter.estimate_tokens(route, model(provider, max_tokens=7), MSGS) == result.prompt_tokens + 7


def test_unlimited_models_never_touch_the_limiter(provider: RateLimitedServer) -> None:
    limiter = limiter_for(provider, rpm=1)
    other = ModelConfig(model="gpt-4o-mini", params={"mock_response": "fine"})
    for _ in range(3):
        assert complete(other, MSGS, limiter=limiter).wait_ms == 0


def test_the_limiter_in_effect_is_used_and_the_wait_hook_runs(
    provider: RateLimitedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from optiflow.llm import limiter as limiter_mod

    monkeypatch.setattr(limiter_mod, "BEAT_EVERY_S", 0.0)
    limiter = limiter_for(provider, rpm=120, burst_s=0.1)  # one call per 0.5 s
    beats: list[float] = []
    with limited_by(limiter), while_waiting(lambda: beats.append(time.monotonic())):
        assert installed() is limiter
        first = complete(model(provider), MSGS)
        second = complete(model(provider), MSGS)
    assert installed() is None  # scoped to the block: no process-wide state
    assert first.ok and second.ok and second.wait_ms >= 300
    assert beats  # a waiting call keeps its job's progress beat


def test_a_limiter_whose_store_is_down_lets_the_call_through() -> None:
    import redis

    from optiflow.distributed.ratelimit import RedisLimiterBackend
    from optiflow.llm.local_model import free_port

    down = redis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=0.2)
    route = RouteLimit(name="m", model="gpt-4o-mini", rpm=60)
    limiter = Limiter(ModelLimits(routes=(route,)), RedisLimiterBackend(down, "x"))
    result = complete(
        ModelConfig(model="gpt-4o-mini", params={"mock_response": "fine"}), MSGS, limiter=limiter
    )
    assert result.ok and result.output == "fine" and result.wait_ms == 0


def test_header_parsing() -> None:
    assert parse_duration("20ms") == pytest.approx(0.02)
    assert parse_duration("1.5s") == 1.5
    assert parse_duration("6m0s") == 360
    assert parse_duration("2") == 2
    assert parse_duration("soon") is None
    assert retry_after_s({"retry-after-ms": "250", "retry-after": "1"}) == 0.25
    assert retry_after_s({"retry-after": "3"}) == 3
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < (retry_after_s({"retry-after": date}) or 0) <= 30
    limited = outcome_from_headers(
        "rate_limited",
        {"retry-after": "2", "x-ratelimit-limit-requests": "500", "x-ratelimit-limit-tokens": "30000"},
    )
    assert (limited.retry_after_s, limited.provider_rpm, limited.provider_tpm) == (2, 500, 30000)
    exhausted = outcome_from_headers(
        "ok", {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "30s"}, tokens_used=5
    )
    assert exhausted.pause_s == 30 and exhausted.tokens_used == 5 and exhausted.retry_after_s is None
    short = outcome_from_headers(
        "ok", {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "50ms"}
    )
    assert short.pause_s == 0  # our own bucket's job
