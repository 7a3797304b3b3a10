"""A typed parameter block inside a prompt section (seed 004's ``policy_parameters``).

The block is a set of ``name: value`` lines in one mutable section, e.g.::

    policy_parameters:
      health_threshold: 0.3            # flee if health < 30%
      max_exploration_steps: 100
      skill_priority: [explore, fight, eat, flee]

:class:`ParameterBlockSpec` declares which names are parameters and their types (``float`` and
``int`` with an optional range, ``order``: a list of names whose order matters). :meth:`parse`
reads the values from a body and :meth:`render` writes new values back in place, keeping every
other line, the indentation and trailing ``# comments``, so a mutation changes only the numbers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, StrictFloat, field_validator, model_validator

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.sections import SectionPath, parse_path
from optiflow.errors import OptiflowError

ParamKind = Literal["float", "int", "order"]
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ParameterBlockError(OptiflowError):
    code = "invalid_parameter_block"


class BlockParam(Frozen):
    type: ParamKind = "float"
    min: StrictFloat | None = None
    max: StrictFloat | None = None

    @model_validator(mode="after")
    def _range(self) -> BlockParam:
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self

    def clamp(self, value: float) -> float:
        if self.min is not None:
            value = max(self.min, value)
        if self.max is not None:
            value = min(self.max, value)
        return value


class ParameterBlockSpec(Frozen):
    section: SectionPath
    params: dict[str, BlockParam] = Field(min_length=1)

    @field_validator("section", mode="before")
    @classmethod
    def _path(cls, value: Any) -> Any:
        return parse_path(value) if isinstance(value, str) else value

    @field_validator("params", mode="before")
    @classmethod
    def _params(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: ({"type": v} if isinstance(v, str) else v) for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _names(self) -> ParameterBlockSpec:
        bad = [n for n in self.params if not _NAME.match(n)]
        if bad:
            raise ValueError(f"invalid parameter name(s) {bad}")
        return self

    def _line(self, name: str) -> re.Pattern[str]:
        # the value is greedy and ends on a non-blank: a lazy value ahead of the blanks of the trail
        # split every run of blanks in it both ways (64 KB of spaces inside a value: 52 s, issue 27)
        return re.compile(
            rf"^(?P<lead>[ \t]*(?:[-*][ \t]*)?){re.escape(name)}(?P<sep>[ \t]*:[ \t]*)"
            rf"(?P<value>(?:[^\n#]*[^\n# \t])?)(?P<trail>[ \t]*(?:#[^\n]*)?)$",
            re.M,
        )

    def parse(self, body: str) -> dict[str, JSONValue]:
        """Every declared parameter's value in ``body``; :class:`ParameterBlockError` otherwise."""
        values: dict[str, JSONValue] = {}
        for name, param in self.params.items():
            m = self._line(name).search(body)
            if m is None:
                raise ParameterBlockError(f"parameter {name!r} not found in the block", field=name)
            values[name] = _parse_value(name, param, m.group("value").strip())
        return values

    def check(self, values: Mapping[str, JSONValue]) -> None:
        for name, param in self.params.items():
            if name not in values:
                raise ParameterBlockError(f"parameter {name!r} has no value", field=name)
            value = values[name]
            if param.type == "order":
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ParameterBlockError(f"{name!r} must be a list of names", field=name)
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ParameterBlockError(f"{name!r} must be a number", field=name)
            if param.clamp(float(value)) != float(value):
                raise ParameterBlockError(
                    f"{name!r} = {value} is outside [{param.min}, {param.max}]", field=name
                )

    def render(self, body: str, values: Mapping[str, JSONValue]) -> str:
        """``body`` with the given parameters' values written in place."""
        for name, value in values.items():
            param = self.params.get(name)
            if param is None:
                raise ParameterBlockError(f"unknown parameter {name!r}", field=name)
            text = format_value(param, value)
            m = self._line(name).search(body)
            if m is None:
                raise ParameterBlockError(f"parameter {name!r} not found in the block", field=name)
            line = f"{m.group('lead')}{name}{m.group('sep')}{text}{m.group('trail')}"
            body = body[: m.start()] + line + body[m.end() :]
        return body


def format_value(param: BlockParam, value: JSONValue) -> str:
    if param.type == "order":
        assert isinstance(value, list)
        return "[" + ", ".join(str(v) for v in value) + "]"
    if param.type == "int":
        assert isinstance(value, int | float)
        return str(round(value))
    assert isinstance(value, int | float)
    return format_float(float(value))


def format_float(value: float) -> str:
    """``0.30000000000000004 -> "0.3"``, ``1.0 -> "1.0"``."""
    return repr(round(value, 6))


def _parse_value(name: str, param: BlockParam, text: str) -> JSONValue:
    try:
        if param.type == "order":
            if not (text.startswith("[") and text.endswith("]")):
                raise ValueError("expected [a, b, ...]")
            return [v.strip().strip("'\"") for v in text[1:-1].split(",") if v.strip()]
        if param.type == "int":
            number = float(text)
            if not number.is_integer():
                raise ValueError("expected an integer")
            return int(number)
        return float(text)
    except ValueError as exc:
        raise ParameterBlockError(f"parameter {name!r}: cannot read {text!r} ({exc})", field=name) from None


__all__ = [
    "BlockParam",
    "ParamKind",
    "ParameterBlockError",
    "ParameterBlockSpec",
    "format_float",
    "format_value",
]
