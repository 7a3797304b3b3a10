"""What the compression strategies share: a proposal, its refusal, and the checks every strategy
runs on a proposed body before it costs an evaluation.

Both :mod:`optiflow.llm.compress` (the ``llm`` and ``rule`` strategies, and
:func:`~optiflow.llm.compress.build_strategy`) and :mod:`optiflow.llm.extractive` import this
module; neither imports the other's internals, so the two strategy modules form no import circle.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from string import Template
from typing import Protocol, runtime_checkable

from optiflow.core.faithfulness import Faithfulness, FaithfulnessContext
from optiflow.core.prompt import Prompt, Section, template_params
from optiflow.errors import OptiflowError

log = logging.getLogger(__name__)


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


__all__ = [
    "CompressStrategy",
    "Proposal",
    "ProposalRefused",
    "clean_output",
    "guard_placeholders",
]
