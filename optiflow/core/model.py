"""Model configuration: which model, with which params, and how to call it."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from pydantic import Field, StrictFloat, StrictInt, model_validator

from optiflow.core.base import Frozen, JSONValue

MAX_TIMEOUT_S = 600.0
"""The longest ``model.timeout`` (litellm's own default): the threads pool has no time limit of its
own, so this is the only bound on a hung call."""
MAX_CALL_S = 1800.0
"""The longest a model call may take with its retries (``timeout x (retries + 1)``): half the
broker's redelivery window (``VISIBILITY_TIMEOUT_S``, 3,600 s), so a call never outlives its task's
message and runs twice in parallel."""
MAX_SIM_LATENCY_MS = 60_000.0
"""The longest simulated latency (``sim_latency_ms``, ``sim_ttft_ms``) of ``optiflow/...`` models."""
SIM_LATENCY_PARAMS = ("sim_latency_ms", "sim_ttft_ms")


class ModelConfig(Frozen):
    """``model`` is a litellm model name (``openai/gpt-4o-mini``, ``optiflow/sim``, ...)."""

    model: str = Field(min_length=1)
    params: Mapping[str, JSONValue] = Field(default_factory=dict)
    api_base: str | None = None
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=100)
    """The environment variable holding the key for ``api_base``. A call to a non-default endpoint
    carries this key or none: never the provider's own key (``OPENAI_API_KEY`` ...) by default."""
    timeout: StrictFloat = Field(default=60.0, gt=0, le=MAX_TIMEOUT_S)
    retries: StrictInt = Field(default=2, ge=0, le=10)

    @model_validator(mode="after")
    def _bounded(self) -> ModelConfig:
        if self.timeout * (self.retries + 1) > MAX_CALL_S:
            raise ValueError(
                f"timeout x (retries + 1) = {self.timeout * (self.retries + 1):g} s is over "
                f"{MAX_CALL_S:g} s, the longest a model call may take (the broker's redelivery window "
                "would run it twice)"
            )
        check_params(self.model, self.params)
        return self

    def with_params(self, extra: Mapping[str, JSONValue]) -> ModelConfig:
        """A copy with ``extra`` params (e.g. a tag's model-param overrides) layered on top."""
        if not extra:
            return self
        params = {**self.params, **extra}
        model = str(params.pop("model", self.model))
        return self.model_copy(update={"model": model, "params": params})

    def fingerprint(self) -> str:
        """Stable hash of what changes a model's answer (not timeout or retries)."""
        payload = json.dumps(
            {"model": self.model, "params": dict(self.params), "api_base": self.api_base},
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


def check_params(model: str, params: Mapping[str, Any], field: str = "params") -> None:
    """Every number in ``params`` finite; the simulated model's latencies within
    :data:`MAX_SIM_LATENCY_MS` (ValueError naming the param)."""
    stack: list[tuple[Any, str]] = [(v, f"{field}.{k}") for k, v in params.items()]
    while stack:
        value, where = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{where}: {value} is not a finite number")
        if isinstance(value, Mapping):
            stack.extend((v, f"{where}.{k}") for k, v in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((v, f"{where}.{i}") for i, v in enumerate(value))
    if not model.startswith("optiflow/"):
        return
    for name in SIM_LATENCY_PARAMS:
        value = params.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{field}.{name}: expected a number of milliseconds, got {value!r}")
        if not 0 <= value <= MAX_SIM_LATENCY_MS:
            raise ValueError(
                f"{field}.{name}: must be between 0 and {MAX_SIM_LATENCY_MS:g} ms, got {value:g}"
            )
