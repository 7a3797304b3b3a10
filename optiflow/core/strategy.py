"""Which compression strategy a compress job uses: a small, JSON-safe spec (pure).

``{type: "llm", model: {...}}`` compresses through a model (litellm, or the simulated
``optiflow/sim``), each proposal checked for faithfulness (:mod:`optiflow.core.faithfulness`);
``{type: "extractive", model: {...}}`` asks the model which sentences and clauses to keep and
rebuilds the section from the original text only (faithful by construction); ``{type: "rule"}``
is deterministic, offline and free. The spec crosses
processes inside a job; :func:`optiflow.llm.compress.build_strategy` turns it into a strategy.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictBool, StrictInt

from optiflow.core.base import Frozen
from optiflow.core.model import ModelConfig


class LLMStrategySpec(Frozen):
    """Compress each section with a model, told to keep every rule, placeholder and fact."""

    type: Literal["llm"] = "llm"
    model: ModelConfig
    faithfulness: StrictBool = True
    """Refuse a proposal that is not a compression of its section (an answer, a label, a chat
    greeting, other content) before it costs an evaluation: :mod:`optiflow.core.faithfulness`."""
    retries: StrictInt = Field(default=2, ge=0, le=5)
    """Proposals asked again after a refusal, with its reason in the request."""


class ExtractiveStrategySpec(Frozen):
    """Ask the model which numbered sentences and clauses of a section to keep; the section is
    rebuilt from the kept pieces of the original text, so it can only lose text, never gain any."""

    type: Literal["extractive"] = "extractive"
    model: ModelConfig
    faithfulness: StrictBool = True
    """Refuse an extraction that drops a sentence carrying a rule (an obligation, a prohibition, a
    number or a code) unless the job allows it (``faithfulness.allow_dropped_rules``)."""


class RuleStrategySpec(Frozen):
    """Compress each section with :mod:`optiflow.core.compress.rules` (no model call)."""

    type: Literal["rule"] = "rule"


StrategySpec = Annotated[
    LLMStrategySpec | ExtractiveStrategySpec | RuleStrategySpec, Field(discriminator="type")
]

__all__ = ["ExtractiveStrategySpec", "LLMStrategySpec", "RuleStrategySpec", "StrategySpec"]
