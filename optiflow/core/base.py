"""Shared model base: frozen, strict about unknown fields, JSON round-trippable."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

JSONValue = Any  # values that survive json.dumps: str, int, float, bool, None, list, dict

MAX_NAME_LENGTH = 200
"""The longest job name, sample id or tag: their database columns (``optiflow_*``) hold 200."""


class Frozen(BaseModel):
    """Immutable model used for everything that crosses a process boundary."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


Verbosity = Literal["minimal", "summary", "full"]
"""How much a report says as text: one line, the report, the report with what it cost."""
