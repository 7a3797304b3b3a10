"""The simulated model's litellm adapter: a ``litellm.CustomLLM`` serving
:class:`~optiflow.llm.simulated.SimulatedModel` (sync, streaming, async).

Importing this module does not import litellm; :mod:`optiflow.llm.runtime` passes it in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from typing import Any

from optiflow.llm.simulated import (
    SIM_MODEL,
    SimOptions,
    SimReply,
    SimulatedError,
    SimulatedModel,
    _sleep,
    wait_out,
)


def timeout_seconds(value: Any) -> float | None:
    """litellm hands a custom provider its ``timeout`` as seconds or as an ``httpx.Timeout``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) if value > 0 else None
    read = getattr(value, "read", None)
    return float(read) if isinstance(read, int | float) and read > 0 else None


def _chunks(text: str, parts: int = 4) -> list[str]:
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def make_handler(litellm: Any) -> Any:
    """A ``litellm.CustomLLM`` instance serving :class:`SimulatedModel` (sync, streaming, async)."""
    usage_cls: Any = importlib_attr("litellm.types.utils", "Usage")
    sim = SimulatedModel()

    def raise_litellm(err: SimulatedError) -> None:
        kw = {"message": err.message, "llm_provider": "optiflow", "model": "sim"}
        exc_type = {
            "rate_limit": litellm.RateLimitError,
            "timeout": litellm.Timeout,
            "internal": litellm.InternalServerError,
            "server": litellm.ServiceUnavailableError,
            "auth": litellm.AuthenticationError,
            "bad_request": litellm.BadRequestError,
            "cancelled": litellm.BadRequestError,  # permanent: never retried
        }[err.kind]
        raise exc_type(**kw) from None

    def run(kwargs: Mapping[str, Any], *, sleep: bool) -> SimReply:
        litellm_params = kwargs.get("litellm_params") or {}
        try:
            return sim.reply(
                kwargs.get("messages") or [],
                kwargs.get("optional_params") or {},
                litellm_params.get("metadata") or {},
                sleep=sleep,
                timeout_s=timeout_seconds(kwargs.get("timeout")),
            )
        except SimulatedError as err:
            raise_litellm(err)
            raise  # unreachable

    class SimulatedLLM(litellm.CustomLLM):  # type: ignore[misc]
        def completion(self, *args: Any, **kwargs: Any) -> Any:
            reply = run(kwargs, sleep=True)
            response = kwargs["model_response"]
            response.choices[0].message.content = reply.text
            response.choices[0].finish_reason = "stop"
            response.model = SIM_MODEL
            response.usage = usage_cls(
                prompt_tokens=reply.prompt_tokens,
                completion_tokens=reply.completion_tokens,
                total_tokens=reply.prompt_tokens + reply.completion_tokens,
            )
            return response

        def streaming(self, *args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
            reply = run(kwargs, sleep=False)
            opts = SimOptions.from_params(kwargs.get("optional_params"))
            ttft = opts.ttft_ms if opts.ttft_ms is not None else opts.latency_ms / 2
            pieces = _chunks(reply.text)
            usage = {
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            }
            timeout_s = timeout_seconds(kwargs.get("timeout"))
            total_s = max(ttft, opts.latency_ms) / 1000.0
            if timeout_s is not None and total_s > timeout_s:  # the whole answer within the timeout
                try:
                    wait_out(total_s, timeout_s)
                except SimulatedError as err:
                    raise_litellm(err)
            try:
                if ttft > 0:
                    _sleep(ttft / 1000.0)
            except SimulatedError as err:
                raise_litellm(err)
            rest = max(0.0, opts.latency_ms - ttft) / 1000.0
            for i, piece in enumerate(pieces):
                last = i == len(pieces) - 1
                if last and rest > 0:
                    try:
                        _sleep(rest)
                    except SimulatedError as err:
                        raise_litellm(err)
                yield {
                    "text": piece,
                    "is_finished": last,
                    "finish_reason": "stop" if last else "",
                    "usage": usage if last else None,
                    "index": 0,
                    "tool_use": None,
                }

        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(self.completion, *args, **kwargs)

    return SimulatedLLM()


def importlib_attr(module: str, name: str) -> Any:
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = ["make_handler", "timeout_seconds"]
