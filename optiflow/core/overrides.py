"""Overrides: per-tag replacement bodies for a prompt's sections, and their versions."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Literal

from pydantic import Field, field_validator

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.sections import PromptDescriptor, SectionPath, parse_path, path_str
from optiflow.errors import StaleOverrideError, ValidationError

STABLE = "stable"
_TAG = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
_SEMVER = re.compile(r"^v(\d+)\.(\d+)\.(\d+)$")


def check_tag(tag: str) -> str:
    if not _TAG.match(tag):
        raise ValidationError(f"invalid tag {tag!r} (letters, digits, '.', '_', '-')", field="tag")
    return tag


class SectionOverride(Frozen):
    """A replacement body for one section, valid only while the base body hashes to ``expected_hash``."""

    path: SectionPath
    expected_hash: str
    body: str

    @field_validator("path", mode="before")
    @classmethod
    def _coerce_path(cls, value: object) -> object:
        return parse_path(value) if isinstance(value, str) else value


class PromptOverrides(Frozen):
    """Everything stored under one ``(ns, key, tag)``: section overrides and model params."""

    ns: str
    key: str
    tag: str
    sections: tuple[SectionOverride, ...] = ()
    model_params: Mapping[str, JSONValue] = Field(default_factory=dict)

    def section(self, path: SectionPath) -> SectionOverride | None:
        return next((s for s in self.sections if s.path == path), None)

    def merged(
        self,
        sections: Iterable[SectionOverride],
        model_params: Mapping[str, JSONValue] | None = None,
    ) -> PromptOverrides:
        """A copy with ``sections`` replacing same-path overrides and ``model_params`` merged in."""
        by_path = {s.path: s for s in self.sections}
        for s in sections:
            by_path[s.path] = s
        params = {**self.model_params, **(model_params or {})}
        return self.model_copy(
            update={"sections": tuple(sorted(by_path.values(), key=lambda s: s.path)), "model_params": params}
        )


def validate_overrides(descriptor: PromptDescriptor, sections: Iterable[SectionOverride]) -> None:
    """Refuse overrides of unknown or frozen sections, and stale ones (hash guard)."""
    for ov in sections:
        sd = descriptor.section(ov.path)
        where = f"sections.{path_str(ov.path)}"
        if sd.frozen:
            raise ValidationError(
                f"section {path_str(ov.path)!r} of {descriptor.ns}/{descriptor.key} is frozen",
                field=where,
                code="frozen_section",
            )
        if ov.expected_hash != sd.hash:
            raise StaleOverrideError(
                f"override made for body {ov.expected_hash[:12]}, section is now {sd.hash[:12]}",
                field=where,
            )


class Version(Frozen):
    """An immutable record of one write to a long-lived tag."""

    ns: str
    key: str
    tag: str
    version: str
    previous: str | None
    source: str
    description: str
    created_at: datetime
    overrides: PromptOverrides


class Applied(Frozen):
    """What one ``apply`` did.

    ``status == "applied"``: ``version`` is the version just written. On a tag's first apply,
    ``original`` is the version written before it, recording what the tag rendered until then
    (the prompt's own sections when nothing was stored): rolling back to it undoes the apply.

    ``status == "unchanged"``: the tag already holds exactly this content, so nothing was written;
    ``version`` is the tag's latest version (None when it has none).
    """

    status: Literal["applied", "unchanged"]
    version: Version | None
    original: Version | None = None

    @property
    def unchanged(self) -> bool:
        return self.status == "unchanged"


ORIGINAL_SOURCE = "original"


def first_version() -> str:
    return "v1.0.0"


def next_version(previous: str | None) -> str:
    """Patch bump: ``None -> v1.0.0``, ``v1.0.3 -> v1.0.4``."""
    if previous is None:
        return first_version()
    m = _SEMVER.match(previous)
    if not m:
        raise ValidationError(f"not a semantic version: {previous!r}", field="version")
    major, minor, patch = (int(g) for g in m.groups())
    return f"v{major}.{minor}.{patch + 1}"


def check_version(text: str) -> str:
    if not _SEMVER.match(text):
        raise ValidationError(f"not a semantic version: {text!r} (expected like v1.0.2)", field="version")
    return text


def now() -> datetime:
    return datetime.now(UTC)


class Changes(Frozen):
    """What applying a finished job writes to a tag: section overrides and model params, and a
    description for the version's audit trail."""

    sections: tuple[SectionOverride, ...] = ()
    model_params: dict[str, JSONValue] = Field(default_factory=dict)
    description: str = ""

    @property
    def empty(self) -> bool:
        return not self.sections and not self.model_params
