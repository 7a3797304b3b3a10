"""Section paths and a prompt's identity (pure, a leaf): what overrides are made against.

A section is named by its path (``("rules", "refunds")``, written ``rules/refunds``) and
identified by the sha256 of its base body; a :class:`PromptDescriptor` is what a store needs to
validate overrides without the prompt's text.
"""

from __future__ import annotations

import hashlib
import re

from optiflow.core.base import Frozen
from optiflow.errors import ValidationError

SectionPath = tuple[str, ...]
NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
"""One part of a section path (or a tag-like name): letters, digits, ``.``, ``_``, ``-``."""


def section_hash(body: str) -> str:
    """sha256 hex digest of a section's base body: the identity an override is made against."""
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def path_str(path: SectionPath) -> str:
    """``("rules", "refunds")`` -> ``"rules/refunds"``: the form used in files and CLI output."""
    return "/".join(path)


def parse_path(text: str) -> SectionPath:
    parts = tuple(p for p in text.strip().split("/") if p)
    if not parts or not all(NAME.match(p) for p in parts):
        raise ValidationError(f"invalid section path {text!r}", field="path")
    return parts


class SectionDescriptor(Frozen):
    path: SectionPath
    hash: str
    frozen: bool
    title: str | None = None
    """Rendered above the body (``# title``): a changed title is a changed prompt."""


class PromptDescriptor(Frozen):
    """What a store needs to validate overrides: identity plus each section's hash and flag (and
    what else renders: titles, the user message's hash), without the prompt's text."""

    ns: str
    key: str
    sections: tuple[SectionDescriptor, ...]
    user_hash: str | None = None

    def section(self, path: SectionPath) -> SectionDescriptor:
        for s in self.sections:
            if s.path == path:
                return s
        raise ValidationError(
            f"unknown section {path_str(path)!r} in prompt {self.ns}/{self.key}", field="path"
        )


class PromptDiff(Frozen):
    """How a prompt's sections differ from the ones a write was made against (by path).

    ``added``: in the prompt now, not in the one read; ``removed``: the other way round;
    ``changed``: the body differs (its hash); ``frozen``: the ``frozen`` flag differs;
    ``retitled``: the title differs; ``reordered``: the same sections in another order; ``user``:
    the user message template differs. Each of them renders another prompt."""

    added: tuple[SectionPath, ...] = ()
    removed: tuple[SectionPath, ...] = ()
    changed: tuple[SectionPath, ...] = ()
    frozen: tuple[SectionPath, ...] = ()
    retitled: tuple[SectionPath, ...] = ()
    reordered: bool = False
    user: bool = False

    @property
    def empty(self) -> bool:
        return not (
            self.added
            or self.removed
            or self.changed
            or self.frozen
            or self.retitled
            or self.reordered
            or self.user
        )

    def summary(self) -> str:
        """``added: warranty; changed: tone, billing``: what differs, in one line."""
        parts = [
            f"{what}: {', '.join(path_str(p) for p in paths)}"
            for what, paths in (
                ("added", self.added),
                ("removed", self.removed),
                ("changed", self.changed),
                ("frozen flag changed", self.frozen),
                ("title changed", self.retitled),
            )
            if paths
        ]
        if self.reordered:
            parts.append("sections reordered")
        if self.user:
            parts.append("user message changed")
        return "; ".join(parts) or "no difference"


def prompt_diff(read: PromptDescriptor, now: PromptDescriptor) -> PromptDiff:
    """What ``now`` changed against ``read`` (section paths in ``now``'s order, removed ones in
    ``read``'s)."""
    before = {s.path: s for s in read.sections}
    after = {s.path: s for s in now.sections}
    common = [s.path for s in now.sections if s.path in before]
    return PromptDiff(
        added=tuple(p for p in after if p not in before),
        removed=tuple(p for p in before if p not in after),
        changed=tuple(p for p in common if before[p].hash != after[p].hash),
        frozen=tuple(p for p in common if before[p].frozen != after[p].frozen),
        retitled=tuple(p for p in common if before[p].title != after[p].title),
        reordered=common != [s.path for s in read.sections if s.path in after],
        user=read.user_hash != now.user_hash,
    )
