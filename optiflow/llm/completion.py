"""One model call through litellm, with retries in exactly one layer (this one).

:func:`complete` never raises for a provider error: it returns a :class:`Completion` whose
``error`` is the provider's message (``transient`` tells whether retries were exhausted on a
transient error or the error was permanent).

- Every call is ``litellm.completion(model, messages, timeout=config.timeout,
  api_base=config.api_base, num_retries=0, metadata=..., **config.params)``: litellm and the
  OpenAI SDK under it do not retry (``num_retries=0`` also maps to the SDK's ``max_retries=0``).
- Transient errors (429 rate limit, timeouts, connection errors, 5xx) are retried
  ``config.retries`` times with exponential backoff and full jitter:
  ``delay = base * 2**attempt * uniform(0.5, 1.5)``, capped at :data:`MAX_BACKOFF_S`. ``base`` is
  the ``backoff_base_s`` argument, else ``OPTIFLOW_RETRY_BACKOFF_S``, else
  :data:`DEFAULT_BACKOFF_BASE_S`. Permanent errors (auth, bad request, not found, context window,
  content policy, anything else) are returned at once.
- Streaming: a call streams when ``config.params["stream"]`` says so, and by default for real
  providers; it does not by default for the simulated model (``optiflow/...``) and for
  ``mock_response`` test calls, whose per-call overhead matters in benchmarks. ``ttft_ms`` is the
  time to the first chunk carrying content when streaming, and equals ``latency_ms`` otherwise
  (the whole answer arrives at once). ``latency_ms`` is the answering attempt's (backoff waits
  excluded); for an error it is the whole time spent, retries included.
- Cost: litellm's own ``response_cost`` when it computed one, else ``litellm.completion_cost``,
  else 0.0 (unknown model price). The simulated model's price is registered, so it is non-zero.
- Rate limits: a call whose model matches a configured route (``OPTIFLOW_MODEL_LIMITS``) waits
  for the route's limiter before every attempt and reports the provider's usage and push-back
  (``Retry-After``, ``x-ratelimit-*``) after it (:mod:`optiflow.llm.limiter`); ``wait_ms`` is
  the time waited, outside ``latency_ms``. A 429 on a limited route is retried without a backoff
  of its own: the limiter's pause is the backoff, for the whole fleet.
- Usage: every call's cost and tokens (prompt + completion) go to the meters open in its context
  (:func:`optiflow.llm.usage.metered`): what a job's budget is charged.
- ``metadata`` (e.g. ``{"sample_id", "run", "experiment_id"}``) is passed to litellm as
  ``metadata`` with ``attempt`` added; the simulated provider seeds noise and injected errors
  from it. litellm does not send ``metadata`` to providers.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.model import ModelConfig
from optiflow.core.rate_limits import RouteLimit
from optiflow.errors import public_message
from optiflow.llm import usage
from optiflow.llm.limiter import (
    LEASE_MARGIN_S,
    Lease,
    Limiter,
    LimiterTimeout,
    Outcome,
    Status,
    normalize_headers,
    outcome_from_headers,
)
from optiflow.llm.limiter import installed as installed_limiter
from optiflow.llm.runtime import SIM_PROVIDER, get_litellm

log = logging.getLogger(__name__)

DEFAULT_BACKOFF_BASE_S = 0.5
MAX_BACKOFF_S = 30.0
_TRANSIENT_STATUS = frozenset({408, 409, 425, 429})

Message = Mapping[str, Any]


class Completion(Frozen):
    """What one model call produced (after retries)."""

    output: str = ""
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    cost: float = Field(default=0.0, ge=0.0)
    latency_ms: float = Field(default=0.0, ge=0.0)
    ttft_ms: float | None = None
    error: str | None = None
    transient: bool = False
    attempts: int = Field(default=1, ge=1)
    wait_ms: float = Field(default=0.0, ge=0.0, description="time spent waiting for the route's limiter")

    @property
    def ok(self) -> bool:
        return self.error is None


def backoff_base() -> float:
    raw = os.environ.get("OPTIFLOW_RETRY_BACKOFF_S")
    if raw:
        try:
            return max(0.0, float(raw))
        except ValueError:
            pass
    return DEFAULT_BACKOFF_BASE_S


def backoff_delay(attempt: int, base: float, rng: random.Random | None = None) -> float:
    """Seconds to wait before retry number ``attempt + 1`` (exponential, jittered, capped)."""
    r = rng.random() if rng is not None else random.random()
    return float(min(MAX_BACKOFF_S, base * (2**attempt) * (0.5 + r)))


def wants_stream(config: ModelConfig) -> bool:
    explicit = config.params.get("stream")
    if explicit is not None:
        return bool(explicit)
    return not (config.model.startswith(f"{SIM_PROVIDER}/") or "mock_response" in config.params)


def is_transient(exc: BaseException) -> bool:
    """Rate limits, timeouts, connection errors and 5xx are worth retrying; the rest are not."""
    litellm = get_litellm()
    permanent = (
        litellm.AuthenticationError,
        litellm.PermissionDeniedError,
        litellm.NotFoundError,
        litellm.BadRequestError,
        litellm.UnprocessableEntityError,
    )
    if isinstance(exc, permanent):
        return False
    transient = (
        litellm.RateLimitError,
        litellm.Timeout,
        litellm.APIConnectionError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
    )
    if isinstance(exc, transient):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in _TRANSIENT_STATUS or status >= 500)


def error_message(exc: BaseException) -> str:
    message = getattr(exc, "message", None)
    text = message if isinstance(message, str) and message else str(exc)
    text = public_message(text) if text.strip() else ""  # no traceback, no server path
    return text or type(exc).__name__


def complete(
    config: ModelConfig,
    messages: Sequence[Message],
    *,
    metadata: Mapping[str, JSONValue] | None = None,
    backoff_base_s: float | None = None,
    limiter: Limiter | None = None,
) -> Completion:
    """Call the model (retrying transient errors); never raises for a provider error.

    Every attempt of a call whose model matches a configured route first waits for the route's
    limiter (``limiter``, else the one installed in this process: see
    :mod:`optiflow.llm.limiter`), then reports what the provider said; a 429 on a limited route
    is retried after the route's pause (the limiter's wait), not after a backoff of its own.
    What the call cost goes to the open meters (:mod:`optiflow.llm.usage`)."""
    result = _complete(config, messages, metadata, backoff_base_s, limiter)
    usage.report(result.cost, result.prompt_tokens + result.completion_tokens)
    return result


def _complete(
    config: ModelConfig,
    messages: Sequence[Message],
    metadata: Mapping[str, JSONValue] | None,
    backoff_base_s: float | None,
    limiter: Limiter | None,
) -> Completion:
    litellm = get_litellm()
    base = backoff_base() if backoff_base_s is None else backoff_base_s
    stream = wants_stream(config)
    params = {k: v for k, v in config.params.items() if k != "stream"}
    msgs = [dict(m) for m in messages]
    limiter = limiter if limiter is not None else installed_limiter()
    route = limiter.route_for(config) if limiter is not None else None
    estimate = (
        limiter.estimate_tokens(route, config, msgs) if limiter is not None and route is not None else 0
    )
    started = time.perf_counter()
    waited = 0.0
    attempt = 0
    while True:
        lease: Lease | None = None
        if limiter is not None and route is not None:
            try:
                lease, wait_s = limiter.admit(route, estimate, lease_s=config.timeout + LEASE_MARGIN_S)
            except LimiterTimeout as exc:
                return Completion(
                    error=str(exc),
                    transient=True,
                    latency_ms=(time.perf_counter() - started) * 1000.0,
                    attempts=attempt + 1,
                    wait_ms=(waited + exc.waited_s) * 1000.0,
                )
            except Exception as exc:  # the limiter's store is down: this call goes unlimited
                log.warning("model route %s: limiter unavailable, calling without it: %s", route.name, exc)
                lease, wait_s = None, 0.0
            waited += wait_s
        try:
            result, headers = _call_once(litellm, config, msgs, params, metadata, attempt, stream)
        except Exception as exc:
            transient = _safe_is_transient(exc)
            rate_limited = _is_rate_limit(exc)
            if limiter is not None and route is not None and lease is not None:
                status: Status = "rate_limited" if rate_limited else "error"
                _finish(limiter, route, lease, outcome_from_headers(status, _error_headers(exc)))
            if not transient or attempt >= config.retries:
                return Completion(
                    error=error_message(exc),
                    transient=transient,
                    latency_ms=(time.perf_counter() - started - waited) * 1000.0,
                    attempts=attempt + 1,
                    wait_ms=waited * 1000.0,
                )
            if lease is None or not rate_limited:  # a limited route's 429 waits in the limiter
                delay = backoff_delay(attempt, base)
                log.info(
                    "model call to %s failed (%s), retry %d of %d in %.2fs",
                    config.model,
                    error_message(exc)[:200],
                    attempt + 1,
                    config.retries,
                    delay,
                )
                time.sleep(delay)
            else:
                log.info(
                    "model call to %s rate limited (%s), retry %d of %d after the route's pause",
                    config.model,
                    error_message(exc)[:200],
                    attempt + 1,
                    config.retries,
                )
            attempt += 1
            continue
        if limiter is not None and route is not None and lease is not None:
            used = result.prompt_tokens + result.completion_tokens
            outcome = outcome_from_headers("ok", headers, tokens_used=used if used > 0 else None)
            _finish(limiter, route, lease, outcome, completion_tokens=result.completion_tokens or None)
        return result.model_copy(update={"wait_ms": waited * 1000.0}) if waited else result


def _finish(
    limiter: Limiter, route: RouteLimit, lease: Lease, outcome: Outcome, completion_tokens: int | None = None
) -> None:
    """Report the call to its route; a store that is down loses the report (the lease expires)."""
    try:
        limiter.finish(route, lease, outcome, completion_tokens=completion_tokens)
    except Exception as exc:
        log.warning("model route %s: limiter unavailable, call not reported: %s", route.name, exc)


def _is_rate_limit(exc: BaseException) -> bool:
    try:
        if isinstance(exc, get_litellm().RateLimitError):
            return True
    except Exception:
        pass
    return getattr(exc, "status_code", None) == 429


def _error_headers(exc: BaseException) -> dict[str, str]:
    """The provider's response headers of a failed call (litellm keeps them on the exception)."""
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
    try:
        return normalize_headers(headers)
    except Exception:
        return {}


def _response_headers(response: Any) -> dict[str, str]:
    hidden = getattr(response, "_hidden_params", None)
    if not isinstance(hidden, dict):
        return {}
    return normalize_headers(hidden.get("additional_headers"))


def _safe_is_transient(exc: BaseException) -> bool:
    try:
        return is_transient(exc)
    except Exception:
        return False


NO_KEY = "optiflow-no-key"
"""What a call to a non-default endpoint without a key of its own carries: a value litellm accepts
as a key (an empty one makes it fall back to the provider's, e.g. ``OPENAI_API_KEY``)."""


def endpoint_key(config: ModelConfig) -> str:
    """The key a call to ``config``'s own endpoint carries: the variable ``api_key_env`` names,
    else :data:`NO_KEY`. Never the provider's default key: it is for the provider's endpoint."""
    key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
    return key or NO_KEY


def _call_once(
    litellm: Any,
    config: ModelConfig,
    messages: list[dict[str, Any]],
    params: Mapping[str, Any],
    metadata: Mapping[str, JSONValue] | None,
    attempt: int,
    stream: bool,
) -> tuple[Completion, dict[str, str]]:
    t0 = time.perf_counter()
    kwargs: dict[str, Any] = dict(params)
    kwargs.update(
        model=config.model,
        messages=messages,
        timeout=config.timeout,
        num_retries=0,
        metadata={**(metadata or {}), "attempt": attempt},
    )
    if config.api_base:
        kwargs["api_base"] = config.api_base
    if (config.api_base or params.get("api_base") or params.get("base_url")) and not params.get("api_key"):
        kwargs["api_key"] = endpoint_key(config)
    ttft_ms: float | None = None
    if stream:
        kwargs["stream"] = True
        chunks: list[Any] = []
        wrapper = litellm.completion(**kwargs)
        for chunk in wrapper:
            if ttft_ms is None and _chunk_has_content(chunk):
                ttft_ms = (time.perf_counter() - t0) * 1000.0
            chunks.append(chunk)
        headers = _response_headers(wrapper)
        response = litellm.stream_chunk_builder(chunks, messages=messages)
        if response is None:
            raise litellm.APIConnectionError(
                message="empty stream: the provider sent no chunks", llm_provider="", model=config.model
            )
    else:
        response = litellm.completion(**kwargs)
        headers = _response_headers(response)
    latency_ms = (time.perf_counter() - t0) * 1000.0
    if ttft_ms is None:
        ttft_ms = latency_ms
    output = _output_text(response)
    usage = getattr(response, "usage", None)
    prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    completion = Completion(
        output=output,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost=_cost(litellm, response),
        latency_ms=latency_ms,
        ttft_ms=ttft_ms,
        attempts=attempt + 1,
    )
    return completion, headers


def _chunk_has_content(chunk: Any) -> bool:
    choices = getattr(chunk, "choices", None)
    if not choices:
        return False
    delta = getattr(choices[0], "delta", None)
    return bool(getattr(delta, "content", None))


def _output_text(response: Any) -> str:
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        return ""
    return content if isinstance(content, str) else ""


def _cost(litellm: Any, response: Any) -> float:
    hidden = getattr(response, "_hidden_params", None) or {}
    cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
    if cost is None:
        try:
            cost = litellm.completion_cost(completion_response=response)
        except Exception:
            cost = None
    try:
        value = float(cost) if cost is not None else 0.0
    except (TypeError, ValueError):
        return 0.0
    return value if value > 0 else 0.0


__all__ = [
    "DEFAULT_BACKOFF_BASE_S",
    "MAX_BACKOFF_S",
    "Completion",
    "backoff_base",
    "backoff_delay",
    "complete",
    "error_message",
    "is_transient",
    "wants_stream",
]
