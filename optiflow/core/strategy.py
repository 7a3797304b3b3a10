"""Which compression strategy a compress job uses: a small, JSON-safe spec (pure).

``{type: "llm", model: {...}}`` compresses through a model (litellm, or the simulated
``optiflow/sim``); ``{type: "rule"}`` is deterministic, offline and free. The spec crosses
processes inside a job; :func:`optiflow.llm.compress.build_strategy` turns it into a strategy.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from optiflow.core.base import Frozen
from optiflow.core.model import ModelConfig


class LLMStrategySpec(Frozen):
    """Compress each section with a model, told to keep every rule, placeholder and fact."""

    type: Literal["llm"] = "llm"
    model: ModelConfig


class RuleStrategySpec(Frozen):
    """Compress each section with :mod:`optiflow.core.compress.rules` (no model call)."""

    type: Literal["rule"] = "rule"


StrategySpec = Annotated[LLMStrategySpec | RuleStrategySpec, Field(discriminator="type")]

__all__ = ["LLMStrategySpec", "RuleStrategySpec", "StrategySpec"]
