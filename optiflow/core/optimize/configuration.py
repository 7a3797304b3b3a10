"""Candidate configurations: the treatment factor, their canonical form and hash (seed 001, 003).

A configuration is plain JSON, the treatment factor's values only (fixed factors never change
within one optimization, so they add nothing to a candidate's identity)::

    {"sections": {"rules/refunds": "<body>", ...}, "model_params": {"temperature": 0.2, ...}}

Section keys are paths written ``a/b``. ``model_params`` may hold ``model`` (the litellm model
name). :func:`canonical` normalizes a configuration deterministically (stable key order, numbers
``1 == 1.0``, strings NFC with ``\\n`` line ends and no trailing blanks) and :func:`config_hash`
hashes that form: two proposals that differ only in such details are duplicates.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from collections.abc import Mapping
from typing import Any

from pydantic import Field, StrictFloat, field_validator, model_validator

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.sections import SectionPath, parse_path, path_str

Configuration = dict[str, JSONValue]
"""``{"sections": {path: body}, "model_params": {name: value}}`` (both keys always present)."""

_FLOAT_DIGITS = 12


class ParamDomain(Frozen):
    """Allowed values of one model param: a closed range and/or a list of choices."""

    min: StrictFloat | None = None
    max: StrictFloat | None = None
    choices: tuple[JSONValue, ...] | None = None

    @model_validator(mode="after")
    def _range(self) -> ParamDomain:
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self

    def violation(self, value: JSONValue) -> str | None:
        """Why ``value`` is not allowed, or None."""
        if self.choices is not None:
            allowed = {json.dumps(normalize_value(c), sort_keys=True) for c in self.choices}
            if json.dumps(normalize_value(value), sort_keys=True) not in allowed:
                return f"{value!r} is not one of {list(self.choices)!r}"
        if self.min is not None or self.max is not None:
            if isinstance(value, bool) or not isinstance(value, int | float):
                return f"{value!r} is not a number"
            if self.min is not None and value < self.min:
                return f"{value} is below the minimum {self.min}"
            if self.max is not None and value > self.max:
                return f"{value} is above the maximum {self.max}"
        return None


class TreatmentFactor(Frozen):
    """What an optimization may change; everything else is a fixed factor (seed 003).

    ``sections``: mutable sections whose bodies candidates may replace. ``model_params``: model
    params candidates may set (``model`` included), each with an optional domain.
    """

    sections: tuple[SectionPath, ...] = ()
    model_params: dict[str, ParamDomain] = Field(default_factory=dict)

    @field_validator("sections", mode="before")
    @classmethod
    def _paths(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [value]
        if isinstance(value, list | tuple):
            return tuple(parse_path(v) if isinstance(v, str) else tuple(v) for v in value)
        return value

    @field_validator("model_params", mode="before")
    @classmethod
    def _params(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [value]
        if isinstance(value, list | tuple):  # a bare list of names: no domain
            return {str(name): {} for name in value}
        if isinstance(value, Mapping):
            return {k: ({} if v is None else v) for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> TreatmentFactor:
        if not self.sections and not self.model_params:
            raise ValueError("the treatment factor names no section and no model param")
        if len(set(self.sections)) != len(self.sections):
            raise ValueError("a section is named twice in the treatment factor")
        return self

    @property
    def name(self) -> str:
        """Human form, e.g. ``sections:tone,rules + model_params:temperature``."""
        parts = []
        if self.sections:
            parts.append("sections:" + ",".join(path_str(p) for p in self.sections))
        if self.model_params:
            parts.append("model_params:" + ",".join(self.model_params))
        return " + ".join(parts)

    @property
    def type(self) -> str:
        if self.sections and self.model_params:
            return "prompt sections + model params"
        return "prompt sections" if self.sections else "model params"


def make_config(
    sections: Mapping[SectionPath, str] | None = None, model_params: Mapping[str, JSONValue] | None = None
) -> Configuration:
    return {
        "sections": {path_str(p): body for p, body in (sections or {}).items()},
        "model_params": dict(model_params or {}),
    }


def config_sections(config: Mapping[str, JSONValue]) -> dict[SectionPath, str]:
    """The section bodies of a (validated) configuration, keyed by path."""
    sections = config.get("sections") or {}
    return {parse_path(k): str(v) for k, v in sections.items()}


def config_params(config: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    return dict(config.get("model_params") or {})


def with_section(config: Mapping[str, JSONValue], path: SectionPath, body: str) -> Configuration:
    """A copy of ``config`` whose section ``path`` has ``body``."""
    return {
        "sections": {**(config.get("sections") or {}), path_str(path): body},
        "model_params": dict(config.get("model_params") or {}),
    }


def with_params(config: Mapping[str, JSONValue], params: Mapping[str, JSONValue]) -> Configuration:
    return {
        "sections": dict(config.get("sections") or {}),
        "model_params": {**(config.get("model_params") or {}), **params},
    }


def normalize_text(text: str) -> str:
    """NFC, ``\\n`` line ends, no trailing blanks per line, no leading/trailing blank lines."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()


def normalize_value(value: Any) -> JSONValue:
    """Deterministic JSON form of a value: sorted mappings, lists, numbers and strings normalized.

    Integral floats become ints (``1.0 -> 1``); other floats are rounded to 12 significant
    digits; ``bool`` stays ``bool``. Raises ``ValueError`` for NaN/infinity or a non-JSON type.
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a finite number")
        if value.is_integer():
            return int(value)
        return float(f"{value:.{_FLOAT_DIGITS}g}")
    if isinstance(value, str):
        return normalize_text(value)
    if isinstance(value, Mapping):
        return {str(k): normalize_value(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [normalize_value(v) for v in value]
    raise ValueError(f"{type(value).__name__} is not a JSON value")


def canonical(config: Mapping[str, JSONValue]) -> Configuration:
    """The normalized configuration (both keys present)."""
    out = normalize_value(
        {"sections": config.get("sections") or {}, "model_params": config.get("model_params") or {}}
    )
    assert isinstance(out, dict)
    return out


def config_hash(config: Mapping[str, JSONValue]) -> str:
    """The canonical config hash: sha256 of the canonical JSON, first 16 hex digits."""
    text = json.dumps(canonical(config), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


__all__ = [
    "Configuration",
    "ParamDomain",
    "TreatmentFactor",
    "canonical",
    "config_hash",
    "config_params",
    "config_sections",
    "make_config",
    "normalize_text",
    "normalize_value",
    "with_params",
    "with_section",
]
