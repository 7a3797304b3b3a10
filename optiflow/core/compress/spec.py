"""What a compress job is given (seed 000): self-contained, so workers never re-read user files."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, StrictInt, model_validator

from optiflow.core.base import MAX_NAME_LENGTH, Frozen, JSONValue
from optiflow.core.checks import CheckSpec
from optiflow.core.dataset import Dataset
from optiflow.core.gate.spec import GateSpec
from optiflow.core.model import ModelConfig
from optiflow.core.overrides import STABLE, SectionOverride
from optiflow.core.prompt import Prompt
from optiflow.core.sections import SectionPath
from optiflow.core.strategy import StrategySpec


class CompressSpec(Frozen):
    """Everything a compress job needs; self-contained so workers never re-read user files."""

    kind: Literal["compress"] = "compress"
    name: str = Field(default="compress", max_length=MAX_NAME_LENGTH)
    prompt: Prompt
    dataset: Dataset
    check: CheckSpec
    model: ModelConfig
    strategy: StrategySpec
    baseline_tag: str = STABLE
    baseline_overrides: tuple[SectionOverride, ...] = ()
    baseline_model_params: dict[str, JSONValue] = Field(default_factory=dict)
    eval_runs: StrictInt = Field(default=3, ge=1, le=50)
    min_section_tokens: StrictInt = Field(default=40, ge=0)
    fail_fast: StrictBool = True
    flags: dict[str, StrictBool] = Field(default_factory=dict)
    gate: GateSpec = Field(default_factory=GateSpec)
    """How candidates, the combination and greedy sets are accepted (:mod:`optiflow.core.gate`).
    ``eval_runs`` is the first round's runs per sample (the gate's ``first_runs``)."""

    @model_validator(mode="after")
    def _first_round(self) -> CompressSpec:
        """``eval_runs`` is the gate's first round: ``gate.first_runs`` follows it, and a document
        that sets both must agree."""
        if self.gate.first_runs != self.eval_runs:
            if "first_runs" in self.gate.model_fields_set:
                raise ValueError(
                    f"gate.first_runs ({self.gate.first_runs}) differs from eval_runs ({self.eval_runs})"
                )
            object.__setattr__(self, "gate", self.gate.model_copy(update={"first_runs": self.eval_runs}))
        if self.gate.max_runs < self.eval_runs:
            raise ValueError(f"gate.max_runs ({self.gate.max_runs}) is below eval_runs ({self.eval_runs})")
        return self

    def effective_body(self, path: SectionPath) -> str:
        """The body the baseline renders for a section (its baseline override, if any)."""
        for ov in self.baseline_overrides:
            if ov.path == path:
                return ov.body
        return self.prompt.section(path).body
