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
    text = " ".join(text.split())
    return text or type(exc).__name__


def complete(
    config: ModelConfig,
    messages: Sequence[Message],
    *,
    metadata: Mapping[str, JSONValue] | None = None,
    backoff_base_s: float | None = None,
) -> Completion:
    """Call the model (retrying transient errors); never raises for a provider error."""
    litellm = get_litellm()
    base = backoff_base() if backoff_base_s is None else backoff_base_s
    stream = wants_stream(config)
    params = {k: v for k, v in config.params.items() if k != "stream"}
    msgs = [dict(m) for m in messages]
    started = time.perf_counter()
    attempt = 0
    while True:
        try:
            return _call_once(litellm, config, msgs, params, metadata, attempt, stream)
        except Exception as exc:
            transient = _safe_is_transient(exc)
            if not transient or attempt >= config.retries:
                return Completion(
                    error=error_message(exc),
                    transient=transient,
                    latency_ms=(time.perf_counter() - started) * 1000.0,
                    attempts=attempt + 1,
                )
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
            attempt += 1


def _safe_is_transient(exc: BaseException) -> bool:
    try:
        return is_transient(exc)
    except Exception:
        return False


def _call_once(
    litellm: Any,
    config: ModelConfig,
    messages: list[dict[str, Any]],
    params: Mapping[str, Any],
    metadata: Mapping[str, JSONValue] | None,
    attempt: int,
    stream: bool,
) -> Completion:
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
    ttft_ms: float | None = None
    if stream:
        kwargs["stream"] = True
        chunks: list[Any] = []
        for chunk in litellm.completion(**kwargs):
            if ttft_ms is None and _chunk_has_content(chunk):
                ttft_ms = (time.perf_counter() - t0) * 1000.0
            chunks.append(chunk)
        response = litellm.stream_chunk_builder(chunks, messages=messages)
        if response is None:
            raise litellm.APIConnectionError(
                message="empty stream: the provider sent no chunks", llm_provider="", model=config.model
            )
    else:
        response = litellm.completion(**kwargs)
    latency_ms = (time.perf_counter() - t0) * 1000.0
    if ttft_ms is None:
        ttft_ms = latency_ms
    output = _output_text(response)
    usage = getattr(response, "usage", None)
    prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    return Completion(
        output=output,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost=_cost(litellm, response),
        latency_ms=latency_ms,
        ttft_ms=ttft_ms,
        attempts=attempt + 1,
    )


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
