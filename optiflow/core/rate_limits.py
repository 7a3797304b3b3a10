"""Rate limits per model route: what an operator configures (``OPTIFLOW_MODEL_LIMITS``).

A *route* is what a provider limits: a model (or a family of models: a glob pattern) at an
optional ``api_base``, under a name the operator gives. Every model call whose
:class:`~optiflow.core.model.ModelConfig` matches a route passes that route's limiter (see
:mod:`optiflow.llm.limiter`); a call that matches no route is not limited.

The document is a mapping from route name to its limits (JSON inline, or a JSON / YAML file)::

    {"openai-main": {"model": "openai/gpt-4o*", "rpm": 500, "tpm": 200000, "concurrency": 64},
     "openai/gpt-4o-mini": {"rpm": 1200},
     "local": {"model": "openai/smollm2", "api_base": "http://127.0.0.1:8012/v1", "concurrency": 4}}

``model`` defaults to the route's name; routes are tried in the order given, the first match wins.
Pure: stdlib + pydantic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from optiflow.core.base import Frozen
from optiflow.errors import ConfigError

_NAME = re.compile(r"^[^\s{}]{1,200}$")


def _norm_base(api_base: str | None) -> str | None:
    return api_base.rstrip("/") if api_base else None


class RouteLimit(Frozen):
    """The limits of one route. Rates are per minute, as providers publish them."""

    name: str
    model: str = Field(min_length=1, description="litellm model name or glob (openai/gpt-4o*)")
    api_base: str | None = Field(default=None, description="only calls to this endpoint; None: any")
    rpm: float | None = Field(default=None, gt=0, description="requests per minute, fleet-wide")
    tpm: float | None = Field(default=None, gt=0, description="tokens (prompt + completion) per minute")
    concurrency: int | None = Field(default=None, ge=1, description="calls in flight at once, fleet-wide")
    burst_s: float = Field(
        default=0.1,
        gt=0,
        le=60,
        description="the bucket holds this many seconds of the rate. Keep it well below the "
        "provider's own (providers enforce per-minute limits over short windows, OpenAI per "
        "second): the difference absorbs the jitter between a call's turn here and its arrival there",
    )
    recover_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="seconds of clean calls to climb from half the rate back to the full rate",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("a route name is 1-200 characters, without spaces or braces")
        return value

    @field_validator("api_base")
    @classmethod
    def _base(cls, value: str | None) -> str | None:
        return _norm_base(value)

    @model_validator(mode="after")
    def _something_limited(self) -> RouteLimit:
        if self.rpm is None and self.tpm is None and self.concurrency is None:
            raise ValueError("set at least one of rpm, tpm, concurrency")
        return self

    def matches(self, model: str, api_base: str | None) -> bool:
        if self.api_base is not None and self.api_base != _norm_base(api_base):
            return False
        return fnmatchcase(model, self.model)

    def describe(self) -> str:
        """One line, e.g. ``openai-main (openai/gpt-4o*): 500 rpm, 200000 tpm, 64 concurrent``."""
        parts = []
        if self.rpm is not None:
            parts.append(f"{self.rpm:g} rpm")
        if self.tpm is not None:
            parts.append(f"{self.tpm:g} tpm")
        if self.concurrency is not None:
            parts.append(f"{self.concurrency} concurrent")
        where = self.model + (f" at {self.api_base}" if self.api_base else "")
        label = self.name if self.name == self.model and not self.api_base else f"{self.name} ({where})"
        return f"{label}: {', '.join(parts)}, burst {self.burst_s:g} s"


class ModelLimits(Frozen):
    """Every configured route, in match order."""

    routes: tuple[RouteLimit, ...] = ()

    def route_for(self, model: str, api_base: str | None = None) -> RouteLimit | None:
        for route in self.routes:
            if route.matches(model, api_base):
                return route
        return None

    def __bool__(self) -> bool:
        return bool(self.routes)


def parse_model_limits(data: Any, source: str = "OPTIFLOW_MODEL_LIMITS") -> ModelLimits:
    """The routes of a limits document: ``{name: {model?, api_base?, rpm?, tpm?, ...}}``.

    Bad input raises :class:`~optiflow.errors.ConfigError` naming the field:
    ``OPTIFLOW_MODEL_LIMITS: openai-main.rpm: Input should be greater than 0``."""
    if data is None:
        return ModelLimits()
    if not isinstance(data, Mapping):
        raise ConfigError(
            'expected a mapping of route name to limits, e.g. {"openai/gpt-4o": {"rpm": 500}}', field=source
        )
    routes = []
    for name, body in data.items():
        if not isinstance(body, Mapping):
            raise ConfigError(
                "expected a mapping of limits (rpm, tpm, concurrency, ...)", field=f"{source}: {name}"
            )
        unknown = sorted(set(body) - set(RouteLimit.model_fields) | ({"name"} & set(body)))
        if unknown:
            known = ", ".join(f for f in RouteLimit.model_fields if f != "name")
            raise ConfigError(f"unknown field (known: {known})", field=f"{source}: {name}.{unknown[0]}")
        try:
            routes.append(RouteLimit.model_validate({"model": str(name), **body, "name": str(name)}))
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in (name, *err["loc"]))
            raise ConfigError(err["msg"].removeprefix("Value error, "), field=f"{source}: {loc}") from None
    return ModelLimits(routes=tuple(routes))


__all__ = ["ModelLimits", "RouteLimit", "parse_model_limits"]
