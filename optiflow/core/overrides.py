"""Overrides: per-tag replacement bodies for a prompt's sections, and their versions."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Literal

from pydantic import Field, field_validator

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.experiment import TEMP_TAG_PREFIX
from optiflow.core.sections import PromptDescriptor, PromptDiff, SectionPath, parse_path, path_str
from optiflow.errors import PromptChangedError, StaleOverrideError, ValidationError

STABLE = "stable"
_TAG = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
_SEMVER = re.compile(r"^v(\d+)\.(\d+)\.(\d+)$")


def check_tag(tag: str, field: str = "tag") -> str:
    """A tag's syntax (any tag, temporary ones included: what reading a tag accepts)."""
    if not _TAG.match(tag):
        raise ValidationError(f"invalid tag {tag!r} (letters, digits, '.', '_', '-')", field=field)
    return tag


def check_user_tag(tag: str, field: str = "tag") -> str:
    """A tag a user may write (apply, rollback) or start a job from: valid, and not under the
    temporary prefix (``opt-``), whose tags belong to optiflow's jobs alone: the workers write
    them (:meth:`~optiflow.stores.base.OverridesStore.store`) and the sweep deletes them."""
    check_tag(tag, field)
    if tag.startswith(TEMP_TAG_PREFIX):
        raise ValidationError(
            f"tag {tag!r}: tags starting with {TEMP_TAG_PREFIX!r} are optiflow's temporary experiment "
            "tags (written by jobs and deleted when they end); choose another name",
            field=field,
        )
    return tag


def prompt_changed(ns: str, key: str, diff: PromptDiff, *, reader: str, advice: str) -> PromptChangedError:
    """The refusal of a write made against a prompt the store no longer holds: names the
    sections that differ (``diff``: the stored prompt against the one ``reader`` read)."""
    return PromptChangedError(
        f"{ns}/{key} changed in the store since {reader} read it ({diff.summary()}): "
        f"nothing was written; {advice}",
        added=tuple(path_str(p) for p in diff.added),
        removed=tuple(path_str(p) for p in diff.removed),
        changed=tuple(path_str(p) for p in diff.changed),
        frozen=tuple(path_str(p) for p in diff.frozen),
        retitled=tuple(path_str(p) for p in diff.retitled),
        reordered=diff.reordered,
        user=diff.user,
    )


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


def merge_baseline_params(
    document: Mapping[str, JSONValue], stored: Mapping[str, JSONValue], *, tag: str
) -> dict[str, JSONValue]:
    """The baseline's model params once the baseline tag's snapshot meets a document's own
    ``baseline_model_params``. The rule: a key only one side sets is kept; a key both set to the
    same value is kept; a key both set to different values is refused (ValidationError naming
    ``baseline_model_params.<key>`` and both values), since either choice would run the job on a
    baseline other than one of the two its author and the tag's writer named."""
    for name in sorted(document.keys() & stored.keys()):
        if not same_json(document[name], stored[name]):
            raise ValidationError(
                f"the document sets {_shown(document[name])} but the baseline tag {tag!r} stores "
                f"{_shown(stored[name])}: set the tag's value, drop the key, or start from another "
                "baseline_tag",
                field=f"baseline_model_params.{name}",
            )
    return {**stored, **document}


def same_json(a: JSONValue, b: JSONValue) -> bool:
    """JSON equality: numbers by value (``0`` is ``0.0``), a bool only equal to a bool."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _shown(value: JSONValue) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
