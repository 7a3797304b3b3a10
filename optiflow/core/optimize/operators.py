"""Structured mutation operators (seed 004 §4): deterministic edits of a parameter block.

No free-text rewriting: each operator changes named parameters of a
:class:`~optiflow.core.optimize.params.ParameterBlockSpec` and says what it did, in seed 004's
words ("Adjusted health_threshold: 0.300 → 0.400 (increase, Δ=0.100)"). Values are clamped to the
parameter's range; an operator that changes nothing (already at the bound, item already first)
returns the values unchanged and the proposer skips it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictFloat, StrictInt, model_validator

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.optimize.params import ParameterBlockSpec, ParamKind, format_float
from optiflow.errors import OptiflowError

Values = dict[str, JSONValue]


class MutationError(OptiflowError):
    code = "invalid_mutation"


def _require(block: ParameterBlockSpec, name: str, kinds: tuple[ParamKind, ...]) -> None:
    param = block.params.get(name)
    if param is None:
        raise MutationError(f"parameter {name!r} is not in the block", field=name)
    if param.type not in kinds:
        raise MutationError(f"parameter {name!r} is {param.type}, expected {' or '.join(kinds)}", field=name)


def _number(values: Values, name: str) -> float:
    value = values.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MutationError(f"parameter {name!r} has no numeric value", field=name)
    return float(value)


class ThresholdOp(Frozen):
    """``ThresholdAdjustmentMutation``: move a decision threshold by ``delta``."""

    op: Literal["threshold"] = "threshold"
    param: str
    delta: StrictFloat = Field(gt=0)
    direction: Literal["increase", "decrease"]

    def check(self, block: ParameterBlockSpec) -> None:
        _require(block, self.param, ("float", "int"))

    def apply(self, values: Values, block: ParameterBlockSpec) -> tuple[Values, str]:
        self.check(block)
        old = _number(values, self.param)
        step = self.delta if self.direction == "increase" else -self.delta
        new = round(block.params[self.param].clamp(old + step), 6)
        if block.params[self.param].type == "int":
            new = round(new)
        return {**values, self.param: new}, (
            f"Adjusted {self.param}: {old:.3f} → {new:.3f} ({self.direction}, Δ={self.delta:.3f})"
        )


class PriorityOp(Frozen):
    """``SkillPriorityMutation``: prioritize / deprioritize an item, or rotate the order."""

    op: Literal["priority"] = "priority"
    param: str
    operation: Literal["prioritize", "deprioritize", "rotate"]
    item: str | None = None

    @model_validator(mode="after")
    def _item(self) -> PriorityOp:
        if self.operation != "rotate" and not self.item:
            raise ValueError(f"{self.operation} needs an item")
        return self

    def check(self, block: ParameterBlockSpec) -> None:
        _require(block, self.param, ("order",))

    def apply(self, values: Values, block: ParameterBlockSpec) -> tuple[Values, str]:
        self.check(block)
        current = values.get(self.param)
        if not isinstance(current, list):
            raise MutationError(f"parameter {self.param!r} has no list value", field=self.param)
        old = [str(v) for v in current]
        if self.operation == "rotate":
            new = old[1:] + old[:1]
            return {**values, self.param: new}, f"Rotated {self.param}: {old} → {new}"
        item = next((v for v in old if v.casefold() == str(self.item).casefold()), None)
        if item is None:
            return dict(values), f"{self.item!r} is not in {self.param}"
        rest = [v for v in old if v != item]
        if self.operation == "prioritize":
            new = [item, *rest]
            return {**values, self.param: new}, f"Prioritized {item!r}: {old} → {new}"
        new = [*rest, item]
        return {**values, self.param: new}, f"Deprioritized {item!r}: {old} → {new}"


def _risk_label(value: float) -> str:
    if value < 0.4:
        return "conservative"
    return "balanced" if value <= 0.6 else "aggressive"


class RiskToleranceOp(Frozen):
    """``RiskToleranceMutation``: set (``value``) or shift (``delta``) a tolerance in [0, 1]."""

    op: Literal["risk_tolerance"] = "risk_tolerance"
    param: str = "risk_tolerance"
    value: StrictFloat | None = Field(default=None, ge=0.0, le=1.0)
    delta: StrictFloat | None = None

    @model_validator(mode="after")
    def _one(self) -> RiskToleranceOp:
        if (self.value is None) == (self.delta is None):
            raise ValueError("give exactly one of value and delta")
        return self

    def check(self, block: ParameterBlockSpec) -> None:
        _require(block, self.param, ("float",))

    def apply(self, values: Values, block: ParameterBlockSpec) -> tuple[Values, str]:
        self.check(block)
        old = _number(values, self.param)
        target = self.value if self.value is not None else old + (self.delta or 0.0)
        new = round(min(1.0, max(0.0, block.params[self.param].clamp(target))), 6)
        return {**values, self.param: new}, (
            f"Changed risk tolerance: {_risk_label(old)} ({old:.3f}) → {_risk_label(new)} ({new:.3f})"
        )


class MaxStepsOp(Frozen):
    """``MaxStepsMutation``: change integer limits, by ``delta`` (default) or to a value (``set``)."""

    op: Literal["max_steps"] = "max_steps"
    changes: dict[str, StrictInt] = Field(min_length=1)
    mode: Literal["delta", "set"] = "delta"

    def check(self, block: ParameterBlockSpec) -> None:
        for name in self.changes:
            _require(block, name, ("int", "float"))

    def apply(self, values: Values, block: ParameterBlockSpec) -> tuple[Values, str]:
        self.check(block)
        new_values = dict(values)
        parts = []
        for name, change in self.changes.items():
            old = _number(values, name)
            target = old + change if self.mode == "delta" else float(change)
            clamped = block.params[name].clamp(target)
            new: float | int = round(clamped) if block.params[name].type == "int" else round(clamped, 6)
            new_values[name] = new
            shown_old = str(round(old)) if block.params[name].type == "int" else format_float(old)
            parts.append(f"{name}: {shown_old} → {new}")
        return new_values, "Adjusted " + ", ".join(parts)


MutationOperator = Annotated[
    ThresholdOp | PriorityOp | RiskToleranceOp | MaxStepsOp, Field(discriminator="op")
]

__all__ = [
    "MaxStepsOp",
    "MutationError",
    "MutationOperator",
    "PriorityOp",
    "RiskToleranceOp",
    "ThresholdOp",
    "Values",
]
