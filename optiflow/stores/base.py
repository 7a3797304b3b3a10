"""The overrides store Protocol: one interface, four backends (memory, filesystem, redis, sql).

A store holds, per prompt ``(ns, key)``:

- the prompt itself (``put_prompt`` / ``get_prompt``), so workers and the CLI can render it;
- overrides per tag (``store`` / ``resolve`` / ``delete`` / ``list_tags``): temporary experiment
  tags are written and deleted freely (``store`` is the workers' primitive for them);
- versions of long-lived tags (``apply`` / ``history`` / ``rollback``): every apply that changes
  the tag records an immutable :class:`~optiflow.core.overrides.Version`; a tag's first apply
  records what the tag rendered before it as a version of its own (source ``original``), so a
  rollback can undo the first apply too; an apply that would change nothing writes nothing and
  says so (``Applied.status == "unchanged"``). History is append-only and two applies racing on
  one tag never lose a version. ``apply`` and ``rollback`` refuse a temporary tag (``opt-``).

Every write validates against the prompt's descriptor first (unknown section -> ValidationError,
frozen section -> ValidationError code ``frozen_section``, hash mismatch -> StaleOverrideError)
and writes nothing when any override of the call is refused. A multi-section write is atomic.

``apply`` and ``rollback`` are compare-and-sets against the prompt their caller read: in the
same transaction as the write, the stored prompt's sections (paths, order, body hashes, frozen
flags, titles) and user message are compared with it, and when they differ nothing is written
(:class:`~optiflow.errors.PromptChangedError`, code ``prompt_changed``, naming the sections added,
removed and changed). A prompt not in the store at all is registered by the ``apply`` that first
writes against it, in that same transaction. Neither ever writes a prompt body otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from optiflow.core.base import JSONValue
from optiflow.core.overrides import STABLE, Applied, PromptOverrides, SectionOverride, Version
from optiflow.core.prompt import Prompt
from optiflow.core.sections import PromptDescriptor


@runtime_checkable
class OverridesStore(Protocol):
    def put_prompt(self, prompt: Prompt) -> None:
        """Register (or replace) a prompt's base template. Overrides made for a section body it
        changes become stale: kept, never rendered (seed 000's hash guard)."""
        ...

    def get_prompt(self, ns: str, key: str) -> Prompt:
        """The registered prompt; NotFoundError when there is none."""
        ...

    def resolve(self, ns: str, key: str, tag: str) -> PromptOverrides | None:
        """What is stored under the tag, or None when the tag holds nothing."""
        ...

    def store(
        self,
        descriptor: PromptDescriptor,
        sections: Sequence[SectionOverride],
        *,
        tag: str,
        model_params: Mapping[str, JSONValue] | None = None,
        replace: bool = False,
    ) -> PromptOverrides:
        """Merge ``sections`` (and ``model_params``) into the tag, or replace its content when
        ``replace``. Validates every override first; atomic. Returns what the tag now holds."""
        ...

    def delete(self, ns: str, key: str, tag: str) -> bool:
        """Remove a tag's overrides (not its version history). True when something was removed."""
        ...

    def list_tags(self, ns: str, key: str) -> list[str]:
        """Tags holding overrides for the prompt, sorted."""
        ...

    def apply(
        self,
        prompt: Prompt,
        sections: Sequence[SectionOverride],
        *,
        tag: str = STABLE,
        source: str,
        description: str = "",
        model_params: Mapping[str, JSONValue] | None = None,
    ) -> Applied:
        """Merge into a long-lived tag and record the result as the next version (patch bump);
        on the tag's first apply, its previous content is recorded first (``Applied.original``).
        When the merge leaves the tag as it is, nothing is written (``status="unchanged"``).

        ``prompt`` is the prompt the changes were made against (a job's snapshot): when the store
        holds another, PromptChangedError and nothing is written; when it holds none, ``prompt``
        is registered with the write."""
        ...

    def history(self, ns: str, key: str, tag: str = STABLE) -> list[Version]:
        """Versions of the tag, oldest first."""
        ...

    def rollback(
        self,
        descriptor: PromptDescriptor,
        version: str,
        *,
        tag: str = STABLE,
        source: str = "rollback",
    ) -> Version:
        """Restore the overrides of ``version`` as a new version. NotFoundError if unknown;
        PromptChangedError when the stored prompt is not ``descriptor``'s (nothing written)."""
        ...

    def close(self) -> None: ...
