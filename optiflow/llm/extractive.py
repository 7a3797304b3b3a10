"""The extractive strategy: the model picks which numbered pieces of a section to keep.

The section is split into sentences and clauses (:mod:`optiflow.core.compress.extract`), sent
numbered; the reply's numbers are the pieces kept, and the section is rebuilt from the original
text of those pieces only. A reply that names no piece in range leaves the section unchanged (an
edit that saves nothing is not evaluated).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from optiflow.core.compress.extract import chosen, numbered, pieces, rebuild
from optiflow.core.faithfulness import FaithfulnessContext, check
from optiflow.core.model import ModelConfig
from optiflow.core.prompt import Prompt, Section
from optiflow.core.sections import path_str
from optiflow.errors import ModelProviderError
from optiflow.llm.markers import EXTRACT_MARKER
from optiflow.llm.proposal import Proposal, ProposalRefused, guard_placeholders

log = logging.getLogger(__name__)

EXTRACT_SYSTEM = """{marker}
You shorten one section of the system prompt of an LLM application ({prompt_id}, section "{path}")
by choosing which of its numbered pieces to keep. Keep every piece that states a rule, an
instruction, a condition, a label, a format, an example the assistant needs, or a fact it needs.
Drop filler, repetition, pleasantries, hedging and background the assistant does not need.
Reply with the numbers of the pieces to keep, in order, separated by commas (for example: 1, 3, 4),
and nothing else."""


@dataclass(frozen=True, slots=True)
class ExtractiveCompressStrategy:
    """Extractive compression through :func:`optiflow.llm.completion.complete`."""

    model: ModelConfig
    faithfulness: bool = True

    @property
    def name(self) -> str:
        return f"extractive:{self.model.model}"

    def messages(self, prompt: Prompt, section: Section) -> list[dict[str, str]]:
        system = EXTRACT_SYSTEM.format(
            marker=EXTRACT_MARKER, prompt_id=prompt.id, path=path_str(section.path)
        )
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": numbered(pieces(section.body))},
        ]

    def compress(self, prompt: Prompt, section: Section) -> str:
        from optiflow.llm.completion import complete

        ps = pieces(section.body)
        if len(ps) < 2:
            return section.body
        result = complete(
            self.model,
            self.messages(prompt, section),
            metadata={"purpose": "compress", "prompt": prompt.id, "section": path_str(section.path)},
        )
        if result.error is not None:
            raise ModelProviderError(
                f"compressing section {path_str(section.path)!r}: {result.error}", field="strategy.model"
            )
        keep = chosen(result.output, len(ps))
        if keep is None:
            log.warning(
                "extraction of %s: the answer names no piece; section unchanged", path_str(section.path)
            )
            return section.body
        body = rebuild(ps, keep)
        if not body.strip():
            return section.body
        return guard_placeholders(section.body, body, f"{prompt.id}/{path_str(section.path)}")

    def propose(
        self, prompt: Prompt, section: Section, context: FaithfulnessContext | None = None
    ) -> Proposal:
        """The kept pieces, read like any proposal (:func:`optiflow.core.faithfulness.check`): an
        extraction cannot add words, but it can drop a rule; refused then (no retry: the pieces
        to choose from do not change)."""
        body = self.compress(prompt, section)
        if not self.faithfulness or context is None or body == section.body:
            return Proposal(body)
        verdict = check(section.body, body, context)
        if not verdict.faithful:
            log.warning("extraction of %s refused: %s", path_str(section.path), verdict.reason)
            raise ProposalRefused(verdict.reason, body, verdict, 1)
        return Proposal(body, verdict)


__all__ = ["EXTRACT_SYSTEM", "ExtractiveCompressStrategy"]
