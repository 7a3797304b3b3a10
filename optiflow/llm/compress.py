"""Compression strategies: propose a shorter body for one section of a prompt.

A :class:`CompressStrategy` is called once per section, by a Celery task, in parallel with the
others: it is stateless, cheap to build from its spec (:func:`build_strategy`) and never needs
pickling. It returns a proposed body; the compress workflow measures the tokens saved and proves
by evaluation that nothing regressed.

Every strategy refuses (returns the original body) a proposal that would break rendering: one
that loses or adds a ``${param}`` placeholder, or has an invalid ``$`` template.

The ``llm`` strategy also checks each proposal for faithfulness
(:func:`optiflow.core.faithfulness.check`) before it costs an evaluation: a refused proposal is
asked again (``retries``), with the reason in the request; when every attempt is refused the
section gets :class:`ProposalRefused` (a proposal error with its reason, never evaluated). The
``extractive`` strategy is faithful by construction: it only keeps pieces of the original.
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
from optiflow.core.faithfulness import Faithfulness, FaithfulnessContext, check
from optiflow.core.model import ModelConfig
from optiflow.core.prompt import Prompt, Section, template_params
from optiflow.core.sections import path_str
from optiflow.core.strategy import ExtractiveStrategySpec, LLMStrategySpec, RuleStrategySpec, StrategySpec
from optiflow.errors import ModelProviderError, OptiflowError, ValidationError
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

RETRY_NOTE = """
Your previous answer was refused: it {reason}. It was:
<refused>{previous}</refused>
Do not answer or greet: return the section itself, shortened."""


@dataclass(frozen=True, slots=True)
class Proposal:
    """A strategy's proposed body, with what the faithfulness check measured (None: not checked)."""

    body: str
    faithfulness: Faithfulness | None = None
    attempts: int = 1


class ProposalRefused(OptiflowError):
    """Every proposal for a section was refused by the faithfulness check: nothing to evaluate."""

    code = "proposal_refused"

    def __init__(self, reason: str, body: str, faithfulness: Faithfulness, attempts: int) -> None:
        super().__init__(f"refused after {attempts} proposal(s): {reason}")
        self.reason = reason
        self.body = body
        self.faithfulness = faithfulness
        self.attempts = attempts


@runtime_checkable
class CompressStrategy(Protocol):
    """Proposes a new body for one section. Stateless; built per task from a spec."""

    @property
    def name(self) -> str: ...

    def compress(self, prompt: Prompt, section: Section) -> str:
        """A proposed body for ``section`` of ``prompt`` (may equal the current body)."""
        ...

    def propose(
        self, prompt: Prompt, section: Section, context: FaithfulnessContext | None = None
    ) -> Proposal:
        """:meth:`compress` with what was checked; may raise :class:`ProposalRefused`."""
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
    faithfulness: bool = True
    retries: int = 2

    @property
    def name(self) -> str:
        return f"llm:{self.model.model}"

    def messages(
        self, prompt: Prompt, section: Section, refused: tuple[str, str] | None = None
    ) -> list[dict[str, str]]:
        params = sorted(template_params(section.body))
        placeholders = ": " + ", ".join("${" + p + "}" for p in params) if params else " (like ${name})"
        system = COMPRESS_SYSTEM.format(
            marker=COMPRESS_MARKER,
            prompt_id=prompt.id,
            path=path_str(section.path),
            placeholders=placeholders,
        )
        if refused is not None:
            system += RETRY_NOTE.format(reason=refused[0], previous=refused[1])
        return [{"role": "system", "content": system}, {"role": "user", "content": section.body}]

    def compress(self, prompt: Prompt, section: Section) -> str:
        return self._ask(prompt, section, None)

    def propose(
        self, prompt: Prompt, section: Section, context: FaithfulnessContext | None = None
    ) -> Proposal:
        """Ask, check, and ask again with the reason while refused (at most ``retries`` more)."""
        if not self.faithfulness or context is None:
            return Proposal(self._ask(prompt, section, None))
        refused: tuple[str, str] | None = None
        for attempt in range(1, self.retries + 2):
            body = self._ask(prompt, section, refused)
            verdict = check(section.body, body, context)
            if verdict.faithful or body == section.body:
                return Proposal(body, verdict, attempt)
            log.warning("proposal %d for %s refused: %s", attempt, path_str(section.path), verdict.reason)
            refused = (verdict.reason, body)
        raise ProposalRefused(verdict.reason, body, verdict, self.retries + 1)

    def _ask(self, prompt: Prompt, section: Section, refused: tuple[str, str] | None) -> str:
        from optiflow.llm.completion import complete

        where = f"{prompt.id}/{path_str(section.path)}"
        result = complete(
            self.model,
            self.messages(prompt, section, refused),
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

    def propose(
        self, prompt: Prompt, section: Section, context: FaithfulnessContext | None = None
    ) -> Proposal:
        return Proposal(self.compress(prompt, section))


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
        return LLMCompressStrategy(model=spec.model, faithfulness=spec.faithfulness, retries=spec.retries)
    if isinstance(spec, ExtractiveStrategySpec):
        from optiflow.llm.extractive import ExtractiveCompressStrategy

        return ExtractiveCompressStrategy(model=spec.model)
    if isinstance(spec, RuleStrategySpec):
        return RuleCompressStrategy()
    raise ValidationError(f"unknown strategy {spec!r}", field="strategy.type")


__all__ = [
    "COMPRESS_MARKER",
    "CompressStrategy",
    "LLMCompressStrategy",
    "Proposal",
    "ProposalRefused",
    "RuleCompressStrategy",
    "build_strategy",
    "clean_output",
    "guard_placeholders",
]
