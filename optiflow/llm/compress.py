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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter

from optiflow.core.compress.rules import compress_text
from optiflow.core.faithfulness import FaithfulnessContext, check
from optiflow.core.model import ModelConfig
from optiflow.core.prompt import Prompt, Section, template_params
from optiflow.core.sections import path_str
from optiflow.core.strategy import ExtractiveStrategySpec, LLMStrategySpec, RuleStrategySpec, StrategySpec
from optiflow.errors import ModelProviderError, ValidationError
from optiflow.llm.extractive import ExtractiveCompressStrategy
from optiflow.llm.markers import COMPRESS_MARKER
from optiflow.llm.proposal import (
    CompressStrategy,
    Proposal,
    ProposalRefused,
    clean_output,
    guard_placeholders,
)

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
        return ExtractiveCompressStrategy(model=spec.model, faithfulness=spec.faithfulness)
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
