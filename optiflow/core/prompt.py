"""Prompts made of ordered sections, their hashes, and rendering with overrides.

A :class:`Prompt` is the base template an application ships. Overrides (see
:mod:`optiflow.core.overrides`) replace section bodies per tag; each override carries the hash of
the body it was made against, so an override made for an older body is never applied.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from string import Template
from typing import Annotated

from pydantic import Field, StrictBool, field_validator, model_validator

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.overrides import PromptOverrides, SectionOverride
from optiflow.core.sections import (
    NAME,
    PromptDescriptor,
    SectionDescriptor,
    SectionPath,
    parse_path,
    path_str,
    section_hash,
)
from optiflow.errors import ValidationError

log = logging.getLogger(__name__)

_PARAM = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def template_params(text: str) -> frozenset[str]:
    """Names of the ``${param}`` placeholders in ``text``."""
    return frozenset(_PARAM.findall(text))


class Section(Frozen):
    """One part of a prompt. ``frozen`` sections are never edited by any optimizer."""

    path: SectionPath
    body: str
    title: str | None = None
    frozen: StrictBool = False

    @field_validator("path", mode="before")
    @classmethod
    def _coerce_path(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                return parse_path(value)
            except ValidationError as exc:  # as a ValueError, pydantic names where it is
                raise ValueError(exc.message) from None
        return value

    @field_validator("path")
    @classmethod
    def _check_path(cls, value: SectionPath) -> SectionPath:
        if not value or not all(NAME.match(p) for p in value):
            raise ValueError(f"invalid section path {value!r}")
        return value

    @property
    def hash(self) -> str:
        return section_hash(self.body)


class RenderedPrompt(Frozen):
    """A prompt ready for a model: the system text, the user text, and model params."""

    system: str
    user: str
    model_params: Mapping[str, JSONValue] = Field(default_factory=dict)

    def messages(self) -> list[dict[str, str]]:
        out: list[dict[str, str]] = []
        if self.system:
            out.append({"role": "system", "content": self.system})
        out.append({"role": "user", "content": self.user})
        return out


class Prompt(Frozen):
    """A prompt template: ``ns``/``key`` identity, ordered sections, and a user-message template.

    ``user`` is rendered with the sample's input: ``${input}`` is the input itself when it is a
    string; when the input is a mapping its entries are the params of every section and of
    ``user``.
    """

    # ns and key: at most 128 characters, what the SQL store's columns hold
    ns: Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.\-]+$")]
    key: Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.\-]+$")]
    sections: tuple[Section, ...] = Field(min_length=1)
    user: str = "${input}"
    description: str = ""

    @model_validator(mode="after")
    def _unique_paths(self) -> Prompt:
        seen: set[SectionPath] = set()
        for s in self.sections:
            if s.path in seen:
                raise ValueError(f"duplicate section path {path_str(s.path)!r}")
            seen.add(s.path)
        return self

    @property
    def id(self) -> str:
        return f"{self.ns}/{self.key}"

    def descriptor(self) -> PromptDescriptor:
        return PromptDescriptor(
            ns=self.ns,
            key=self.key,
            sections=tuple(
                SectionDescriptor(path=s.path, hash=s.hash, frozen=s.frozen, title=s.title)
                for s in self.sections
            ),
            user_hash=section_hash(self.user),
        )

    def section(self, path: SectionPath) -> Section:
        for s in self.sections:
            if s.path == path:
                return s
        raise ValidationError(f"unknown section {path_str(path)!r} in prompt {self.id}", field="path")

    def with_bodies(self, bodies: Mapping[SectionPath, str]) -> Prompt:
        """A copy whose sections have the given bodies (used to measure candidate prompts)."""
        for p in bodies:
            self.section(p)
        return self.model_copy(
            update={
                "sections": tuple(
                    s.model_copy(update={"body": bodies[s.path]}) if s.path in bodies else s
                    for s in self.sections
                )
            }
        )

    def fresh_overrides(self, overrides: PromptOverrides | None) -> tuple[SectionOverride, ...]:
        """The overrides that apply to this prompt as it is now.

        A stale override (its ``expected_hash`` is not the section's current hash), an override
        of an unknown section and one of a frozen section are skipped with a warning.
        """
        if overrides is None:
            return ()
        current = {s.path: s for s in self.sections}
        fresh = []
        for ov in overrides.sections:
            base = current.get(ov.path)
            if base is None:
                log.warning("override for unknown section %s of %s skipped", path_str(ov.path), self.id)
            elif ov.expected_hash != base.hash:
                log.warning(
                    "stale override for %s of %s (tag %s) skipped: made for another body",
                    path_str(ov.path),
                    self.id,
                    overrides.tag,
                )
            elif base.frozen:
                log.warning("override of frozen section %s of %s skipped", path_str(ov.path), self.id)
            else:
                fresh.append(ov)
        return tuple(fresh)

    def effective_bodies(self, overrides: PromptOverrides | None) -> dict[SectionPath, str]:
        """Each section's body once the fresh overrides of ``overrides`` are applied."""
        bodies = {s.path: s.body for s in self.sections}
        bodies.update((ov.path, ov.body) for ov in self.fresh_overrides(overrides))
        return bodies

    def render(
        self,
        input: JSONValue = "",
        *,
        params: Mapping[str, JSONValue] | None = None,
        overrides: PromptOverrides | None = None,
    ) -> RenderedPrompt:
        """Render the system and user messages for one input under optional overrides."""
        values: dict[str, JSONValue] = {}
        if isinstance(input, Mapping):
            values.update({str(k): v for k, v in input.items()})
        else:
            values["input"] = input
        if params:
            values.update(params)
        bodies = self.effective_bodies(overrides)
        parts: list[str] = []
        for s in self.sections:
            body = _substitute(bodies[s.path], values, f"sections.{path_str(s.path)}")
            parts.append(f"# {s.title}\n{body}" if s.title else body)
        return RenderedPrompt(
            system="\n\n".join(p for p in parts if p.strip()),
            user=_substitute(self.user, values, "user"),
            model_params=dict(overrides.model_params) if overrides else {},
        )


def _substitute(text: str, values: Mapping[str, JSONValue], where: str) -> str:
    try:
        return Template(text).substitute({k: _as_text(v) for k, v in values.items()})
    except KeyError as exc:
        raise ValidationError(f"missing template param {exc.args[0]!r}", field=where) from None
    except ValueError as exc:
        raise ValidationError(f"bad placeholder: {exc}", field=where) from None


def _as_text(value: JSONValue) -> str:
    return value if isinstance(value, str) else str(value)
