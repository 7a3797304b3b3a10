"""Experiments: an isolated evaluation context backed by an overrides tag (seed 000, 001's mask_id)."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field

from optiflow.core.base import Frozen


class Experiment(Frozen):
    id: str
    name: str
    overrides_tag: str
    parent_tag: str | None = None
    flags: Mapping[str, bool] = Field(default_factory=dict)
