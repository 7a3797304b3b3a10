"""Model configuration: which model, with which params, and how to call it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from pydantic import Field, StrictFloat, StrictInt

from optiflow.core.base import Frozen, JSONValue


class ModelConfig(Frozen):
    """``model`` is a litellm model name (``openai/gpt-4o-mini``, ``optiflow/sim``, ...)."""

    model: str = Field(min_length=1)
    params: Mapping[str, JSONValue] = Field(default_factory=dict)
    api_base: str | None = None
    timeout: StrictFloat = Field(default=60.0, gt=0)
    retries: StrictInt = Field(default=2, ge=0, le=10)

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
