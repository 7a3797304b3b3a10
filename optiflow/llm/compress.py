"""Compression strategies: propose a shorter body for one section of a prompt.

A :class:`CompressStrategy` is called once per section, by a Celery task, in parallel with the
others: it is stateless, cheap to build from its spec (:func:`build_strategy`) and never needs
pickling. It returns a proposed body; the compress workflow measures the tokens saved and proves
by evaluation that nothing regressed.

Both strategies refuse (return the original body) a proposal that would break rendering: one that
loses or adds a ``${param}`` placeholder, or has an invalid ``$`` template.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from string import Template
from typing import Any, Protocol, runtime_checkable

from pydantic import TypeAdapter

from optiflow.core.compress.rules import compress_text
from optiflow.core.model import ModelConfig
from optiflow.core.prompt import Prompt, Section, template_params
from optiflow.core.sections import path_str
from optiflow.core.strategy import LLMStrategySpec, RuleStrategySpec, StrategySpec
from optiflow.errors import ModelProviderError, ValidationError
from optiflow.llm.markers import COMPRESS_MARKER

log = logging.getLogger(__name__)


COMPRESS_SYSTEM = """{marker}
You shorten one section of the system prompt of an LLM application ({prompt_id}, section "{path}").
Rewrite the section the user sends so that it uses as few tokens as possible while meaning exactly
the same to the assistant that reads it:
- keep every rule and instruction, with its conditions, codes, labels, numbers, names and links;
- keep every fact the assistant needs;
- keep every placeholder exactly as written{placeholders};
- remove redundancy, repetition, filler, pleasantries and hedging; short plain sentences or bullets;
- add nothing new: no title, no commentary, no quotes around the text.
Return only the new section text."""


@runtime_checkable
class CompressStrategy(Protocol):
    """Proposes a new body for one section. Stateless; built per task from a spec."""

    @property
    def name(self) -> str: ...

    def compress(self, prompt: Prompt, section: Section) -> str:
        """A proposed body for ``section`` of ``prompt`` (may equal the current body)."""
        ...


def guard_placeholders(original: str, proposed: str, where: str = "") -> str:
    """``proposed`` unless it changes the placeholders or is not a valid template; else ``original``."""
    before = template_params(original)
    after = template_params(proposed)
    if before != after:
        lost = sorted(before - after)
        added = sorted(after - before)
        log.warning(
            "compression of %s refused: placeholders %s%s",
            where or "a section",
            f"lost {lost}" if lost else "",
            f" added {added}" if added else "",
        )
        return original
    if Template(original).is_valid() and not Template(proposed).is_valid():
        log.warning("compression of %s refused: invalid '$' template", where or "a section")
        return original
    return proposed


_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n(.*?)\n?```\s*$", re.S)


def clean_output(text: str) -> str:
    """The section text from a model answer: no code fence, no wrapping quotes, trimmed."""
    out = text.strip()
    m = _FENCE.match(out)
    if m:
        out = m.group(1).strip()
    if len(out) >= 2 and out[0] == out[-1] and out[0] in "\"'" and out.count(out[0]) == 2:
        out = out[1:-1].strip()
    return out


@dataclass(frozen=True, slots=True)
class LLMCompressStrategy:
    """Compresses through :func:`optiflow.llm.completion.complete` (any litellm model)."""

    model: ModelConfig

    @property
    def name(self) -> str:
        return f"llm:{self.model.model}"

    def messages(self, prompt: Prompt, section: Section) -> list[dict[str, str]]:
        params = sorted(template_params(section.body))
        placeholders = ": " + ", ".join("${" + p + "}" for p in params) if params else " (like ${name})"
        system = COMPRESS_SYSTEM.format(
            marker=COMPRESS_MARKER,
            prompt_id=prompt.id,
            path=path_str(section.path),
            placeholders=placeholders,
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": section.body}]

    def compress(self, prompt: Prompt, section: Section) -> str:
        from optiflow.llm.completion import complete

        where = f"{prompt.id}/{path_str(section.path)}"
        result = complete(
            self.model,
            self.messages(prompt, section),
            metadata={"purpose": "compress", "prompt": prompt.id, "section": path_str(section.path)},
        )
        if result.error is not None:
            raise ModelProviderError(
                f"compressing section {path_str(section.path)!r}: {result.error}", field="strategy.model"
            )
        proposed = clean_output(result.output)
        if not proposed:
            log.warning("compression of %s refused: empty answer", where)
            return section.body
        return guard_placeholders(section.body, proposed, where)


@dataclass(frozen=True, slots=True)
class RuleCompressStrategy:
    """Deterministic, offline: :func:`optiflow.core.compress.rules.compress_text`."""

    @property
    def name(self) -> str:
        return "rule"

    def compress(self, prompt: Prompt, section: Section) -> str:
        proposed = compress_text(section.body)
        if not proposed.strip():
            return section.body
        return guard_placeholders(section.body, proposed, f"{prompt.id}/{path_str(section.path)}")


_SPEC: TypeAdapter[StrategySpec] = TypeAdapter(StrategySpec)


def build_strategy(spec: StrategySpec | Mapping[str, Any]) -> CompressStrategy:
    """The strategy a spec describes (a spec model or its JSON-like mapping)."""
    if isinstance(spec, Mapping):
        import pydantic

        try:
            spec = _SPEC.validate_python(dict(spec))
        except pydantic.ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise ValidationError(err["msg"], field=f"strategy.{loc}" if loc else "strategy") from None
    if isinstance(spec, LLMStrategySpec):
        return LLMCompressStrategy(model=spec.model)
    if isinstance(spec, RuleStrategySpec):
        return RuleCompressStrategy()
    raise ValidationError(f"unknown strategy {spec!r}", field="strategy.type")


__all__ = [
    "COMPRESS_MARKER",
    "CompressStrategy",
    "LLMCompressStrategy",
    "RuleCompressStrategy",
    "build_strategy",
    "clean_output",
    "guard_placeholders",
]
