"""``complete``: litellm's own ``mock_response`` hooks for success, permanent and transient errors."""

from __future__ import annotations

import random
import time
from types import SimpleNamespace
from typing import Any

import pytest

from optiflow.core.model import ModelConfig
from optiflow.llm import completion as completion_mod
from optiflow.llm.completion import backoff_base, backoff_delay, complete, is_transient, wants_stream
from optiflow.llm.runtime import get_litellm

MSGS = [{"role": "user", "content": "Hello there"}]


def mock(response: Any, **kw: Any) -> ModelConfig:
    return ModelConfig(model="gpt-4o-mini", params={"mock_response": response}, **kw)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every kwargs litellm.completion receives (the call itself still happens)."""
    litellm = get_litellm()
    seen: list[dict[str, Any]] = []
    real = litellm.completion

    def spy(**kwargs: Any) -> Any:
        seen.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(litellm, "completion", spy)
    return seen


def test_success_carries_output_usage_cost(calls: list[dict[str, Any]]) -> None:
    c = complete(mock("Hi, how can I help?"), MSGS, metadata={"sample_id": "a", "run": 2})
    assert c.ok and c.output == "Hi, how can I help?" and c.attempts == 1
    assert c.prompt_tokens > 0 and c.completion_tokens > 0
    assert c.cost > 0  # gpt-4o-mini is in litellm's local price map
    assert c.latency_ms > 0 and c.ttft_ms == c.latency_ms
    (kw,) = calls
    assert kw["num_retries"] == 0 and kw["timeout"] == 60.0 and "stream" not in kw
    assert {k: kw["metadata"][k] for k in ("sample_id", "run", "attempt")} == {
        "sample_id": "a",
        "run": 2,
        "attempt": 0,
    }


def test_api_base_timeout_and_params_are_passed(calls: list[dict[str, Any]]) -> None:
    cfg = ModelConfig(
        model="gpt-4o-mini",
        params={"mock_response": "ok", "temperature": 0.1},
        api_base="http://127.0.0.1:9/v1",
        timeout=7.5,
    )
    assert complete(cfg, MSGS).output == "ok"
    (kw,) = calls
    assert kw["api_base"] == "http://127.0.0.1:9/v1" and kw["timeout"] == 7.5 and kw["temperature"] == 0.1


def test_streaming_measures_time_to_first_token(calls: list[dict[str, Any]]) -> None:
    cfg = ModelConfig(model="gpt-4o-mini", params={"mock_response": "Streaming works fine", "stream": True})
    c = complete(cfg, MSGS)
    assert c.output == "Streaming works fine"
    assert calls[0]["stream"] is True
    assert c.ttft_ms is not None and c.ttft_ms <= c.latency_ms
    assert c.prompt_tokens > 0 and c.completion_tokens > 0 and c.cost > 0


def test_stream_default() -> None:
    assert wants_stream(ModelConfig(model="openai/gpt-4o"))
    assert not wants_stream(ModelConfig(model="optiflow/sim"))
    assert not wants_stream(mock("x"))
    assert wants_stream(ModelConfig(model="optiflow/sim", params={"stream": True}))
    assert not wants_stream(ModelConfig(model="openai/gpt-4o", params={"stream": False}))


def permanent() -> list[Exception]:
    litellm = get_litellm()
    return [
        litellm.AuthenticationError(
            message="Incorrect API key provided", llm_provider="openai", model="gpt-4o-mini"
        ),
        litellm.BadRequestError(message="messages: too long", model="gpt-4o-mini", llm_provider="openai"),
        litellm.NotFoundError(message="model gpt-9 does not exist", model="gpt-9", llm_provider="openai"),
        litellm.PermissionDeniedError(
            message="not allowed", llm_provider="openai", model="gpt-4o-mini", response=_response(403)
        ),
    ]


def transient() -> list[Exception]:
    litellm = get_litellm()
    return [
        litellm.RateLimitError(
            message="Rate limit reached, retry in 1s", llm_provider="openai", model="gpt-4o-mini"
        ),
        litellm.Timeout(message="Request timed out", model="gpt-4o-mini", llm_provider="openai"),
        litellm.InternalServerError(message="upstream 500", llm_provider="openai", model="gpt-4o-mini"),
        litellm.ServiceUnavailableError(message="overloaded", llm_provider="openai", model="gpt-4o-mini"),
        litellm.APIConnectionError(message="connection refused", llm_provider="openai", model="gpt-4o-mini"),
    ]


def _response(status: int) -> Any:
    import httpx

    return httpx.Response(status, request=httpx.Request("POST", "https://example.invalid/v1"))


@pytest.mark.parametrize("index", range(4))
def test_permanent_errors_are_returned_at_once(index: int, calls: list[dict[str, Any]]) -> None:
    exc = permanent()[index]
    c = complete(mock(exc, retries=3), MSGS)
    assert not c.ok and not c.transient and c.attempts == 1 and len(calls) == 1
    assert c.error is not None and exc.message.split(": ", 1)[-1] in c.error
    assert c.output == "" and c.cost == 0.0


@pytest.mark.parametrize("index", range(5))
def test_transient_errors_are_retried_then_reported(index: int, calls: list[dict[str, Any]]) -> None:
    exc = transient()[index]
    c = complete(mock(exc, retries=2), MSGS)
    assert not c.ok and c.transient and c.attempts == 3 and len(calls) == 3
    assert c.error is not None and exc.message.split(": ", 1)[-1] in c.error


def test_string_hooks_for_rate_limit_and_server_error() -> None:
    for hook, name in (
        ("litellm.RateLimitError", "RateLimitError"),
        ("litellm.InternalServerError", "InternalServer"),
    ):
        c = complete(mock(hook, retries=1), MSGS)
        assert c.transient and c.attempts == 2 and c.error is not None and name in c.error


def test_transient_then_success(monkeypatch: pytest.MonkeyPatch) -> None:
    litellm = get_litellm()
    real = litellm.completion
    n = {"calls": 0}

    def flaky(**kwargs: Any) -> Any:
        n["calls"] += 1
        if n["calls"] <= 2:
            kwargs["mock_response"] = litellm.RateLimitError(
                message="slow down", llm_provider="openai", model="m"
            )
        return real(**kwargs)

    monkeypatch.setattr(litellm, "completion", flaky)
    c = complete(mock("finally", retries=2), MSGS)
    assert c.ok and c.output == "finally" and c.attempts == 3


def test_no_retries_configured(calls: list[dict[str, Any]]) -> None:
    c = complete(mock(transient()[0], retries=0), MSGS)
    assert c.transient and c.attempts == 1 and len(calls) == 1


def test_classification_by_status_code() -> None:
    class Weird(Exception):
        def __init__(self, status: int) -> None:
            super().__init__("weird")
            self.status_code = status

    assert is_transient(Weird(429)) and is_transient(Weird(502)) and is_transient(Weird(408))
    assert not is_transient(Weird(400)) and not is_transient(Weird(401)) and not is_transient(ValueError("x"))


def test_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(0)
    delays = [backoff_delay(a, 0.1, rng) for a in range(4)]
    for attempt, d in enumerate(delays):
        assert 0.05 * 2**attempt <= d <= 0.15 * 2**attempt
    assert backoff_delay(30, 1.0) == completion_mod.MAX_BACKOFF_S
    monkeypatch.setenv("OPTIFLOW_RETRY_BACKOFF_S", "0.25")
    assert backoff_base() == 0.25
    monkeypatch.delenv("OPTIFLOW_RETRY_BACKOFF_S")
    assert backoff_base() == completion_mod.DEFAULT_BACKOFF_BASE_S


def test_backoff_sleeps_between_attempts(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    # this module's clock only: threads elsewhere in the process (a check process pool's
    # manager, litellm's loggers) sleep too
    fake_time = SimpleNamespace(perf_counter=time.perf_counter, sleep=slept.append)
    monkeypatch.setattr(completion_mod, "time", fake_time)
    c = complete(mock(transient()[0], retries=3), MSGS, backoff_base_s=0.2)
    assert c.attempts == 4 and len(slept) == 3
    assert 0.1 <= slept[0] <= 0.3 and 0.2 <= slept[1] <= 0.6 and 0.4 <= slept[2] <= 1.2


def test_unknown_price_costs_zero() -> None:
    c = complete(ModelConfig(model="openai/my-private-model-xyz", params={"mock_response": "ok"}), MSGS)
    assert c.ok and c.cost == 0.0
