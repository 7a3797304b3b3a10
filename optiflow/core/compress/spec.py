"""What a compress job is given (seed 000): self-contained, so workers never re-read user files."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictBool, StrictInt, field_serializer, model_validator

from optiflow.core.base import MAX_NAME_LENGTH, JSONValue
from optiflow.core.budget import JobBudget
from optiflow.core.checks import CheckSpec
from optiflow.core.dataset import Dataset
from optiflow.core.faithfulness import FaithfulnessSpec
from optiflow.core.gate.spec import GateSpec
from optiflow.core.model import ModelConfig
from optiflow.core.overrides import STABLE, SectionOverride
from optiflow.core.prompt import Prompt
from optiflow.core.sections import SectionPath
from optiflow.core.strategy import StrategySpec

_DEFAULT_CAP = GateSpec.model_fields["max_runs"].default


class CompressSpec(JobBudget):
    """Everything a compress job needs; self-contained so workers never re-read user files.
    ``max_cost_usd`` / ``max_tokens``: the job's hard budget (:class:`JobBudget`)."""

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
    """Model params of the baseline, on top of ``model.params``. At submission the baseline tag's
    stored model params merge in (unless the document sets ``baseline_overrides``: then it names
    its baseline itself): a key only one side sets is kept, a key both set to the same value is
    kept, a key both set to different values is refused naming both
    (:func:`optiflow.core.overrides.merge_baseline_params`). Every check sees the merged params."""
    eval_runs: StrictInt = Field(default=3, ge=1, le=50)
    min_section_tokens: StrictInt = Field(default=40, ge=0)
    fail_fast: StrictBool = True
    require_sensitivity: StrictBool = True
    """Before candidates, evaluate the prompt with every mutable section emptied (the ablation,
    :mod:`optiflow.core.compress.ablation`); the job fails when the gate finds it non-inferior.
    ``false``: no ablation (seed 000 exactly), and the report marks every decision unchecked."""
    flags: dict[str, StrictBool] = Field(default_factory=dict)
    faithfulness: FaithfulnessSpec = Field(default_factory=FaithfulnessSpec)
    """How proposals are read before they cost an evaluation (:mod:`optiflow.core.faithfulness`):
    ``allow_dropped_rules`` lets a proposal drop a sentence carrying a rule (listed in the report
    as not verified by the dataset); ``judge: {model: ...}`` asks a model whether each proposal
    that passes imposes the same instructions as the original (:mod:`optiflow.llm.faithjudge`)."""
    gate: GateSpec = Field(default_factory=GateSpec)
    """How candidates, the combination and greedy sets are accepted (:mod:`optiflow.core.gate`).
    ``eval_runs`` is the first round's runs per sample (the gate's ``first_runs``)."""

    @model_validator(mode="before")
    @classmethod
    def _one_first_round(cls, data: Any) -> Any:
        """``eval_runs`` is the gate's first round; a document that also sets ``gate.first_runs``
        must agree with it, and a gate without it gets it from ``eval_runs`` (so its cap is read
        against the runs the job makes, not against the gate's default first round)."""
        if not (isinstance(data, dict) and isinstance(data.get("gate"), dict)):
            return data
        gate, runs = data["gate"], data.get("eval_runs", cls.model_fields["eval_runs"].default)
        if "first_runs" in gate:
            if gate["first_runs"] != runs:
                raise ValueError(f"gate.first_runs ({gate['first_runs']}) differs from eval_runs ({runs})")
            return data
        if type(runs) is not int:  # eval_runs' own check names it; the gate is left alone
            return data
        gate = {**gate, "first_runs": runs}
        if "max_runs" not in gate and runs > _DEFAULT_CAP:
            gate["max_runs"] = runs  # eval_runs above the default cap raises it
        return {**data, "gate": gate}

    @model_validator(mode="after")
    def _runs_within_the_cap(self) -> CompressSpec:
        explicit = "max_runs" in self.gate.model_fields_set
        if explicit and self.gate.max_runs < self.eval_runs:
            raise ValueError(f"gate.max_runs ({self.gate.max_runs}) is below eval_runs ({self.eval_runs})")
        return self

    @field_serializer("gate")
    def _gate_without_first_runs(self, gate: GateSpec) -> dict[str, Any]:
        """Stored as the job runs it, without ``first_runs``: ``eval_runs`` says it (a copy with
        other ``eval_runs`` stays consistent)."""
        return self.gate_spec.model_dump(mode="json", exclude={"first_runs"})

    @property
    def gate_spec(self) -> GateSpec:
        """The gate as the workflow runs it: its first round is ``eval_runs`` runs (and its cap,
        unless set, at least that)."""
        return self.gate.model_copy(
            update={"first_runs": self.eval_runs, "max_runs": max(self.gate.max_runs, self.eval_runs)}
        )

    def effective_body(self, path: SectionPath) -> str:
        """The body the baseline renders for a section (its baseline override, if any)."""
        for ov in self.baseline_overrides:
            if ov.path == path:
                return ov.body
        return self.prompt.section(path).body
