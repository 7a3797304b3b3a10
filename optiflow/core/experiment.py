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


TEMP_TAG_PREFIX = "opt-"


def temp_tag_prefix(job_id: str) -> str:
    """Every temporary tag of a job starts with this; a sweeper can remove them by prefix."""
    return f"{TEMP_TAG_PREFIX}{job_id}-"
