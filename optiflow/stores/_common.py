"""What every backend shares: checks, merge, versioning, rollback, the prompt guard.

A backend subclasses :class:`StoreBase` and supplies storage primitives (``_get_prompt``,
``_resolve``, ``_transact``, ...). The public methods validate their arguments, then call the
primitives, so the rules of :mod:`optiflow.stores.base` are written once.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from optiflow.core.base import JSONValue
from optiflow.core.overrides import (
    ORIGINAL_SOURCE,
    STABLE,
    Applied,
    PromptOverrides,
    SectionOverride,
    Version,
    check_tag,
    check_user_tag,
    check_version,
    next_version,
    now,
    prompt_changed,
    validate_overrides,
)
from optiflow.core.prompt import Prompt
from optiflow.core.sections import PromptDescriptor, path_str, prompt_diff
from optiflow.errors import NotFoundError, ValidationError

_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


@dataclass(frozen=True)
class State:
    """What a transaction read: the tag's content, its latest version and (only when the
    transaction guards the prompt) the stored prompt, None when there is none."""

    content: PromptOverrides | None
    head: Version | None
    prompt: Prompt | None = None


@dataclass(frozen=True)
class Write:
    """What a transaction writes: the tag's new content (None: leave the tag as it is), the
    versions to append to its history, oldest first, and a prompt to register (only when the
    transaction guards the prompt and none is stored). ``Write(None)`` writes nothing."""

    content: PromptOverrides | None
    versions: tuple[Version, ...] = ()
    prompt: Prompt | None = None

    @property
    def empty(self) -> bool:
        return self.content is None and not self.versions and self.prompt is None


#: Given what the transaction read, what to write; raising aborts the transaction with nothing
#: written. May run more than once (backends retry on conflict), so its only effect may be to
#: note what it decided: the last call is the one whose write committed.
Change = Callable[[State], Write]


def check_name(value: str, field: str) -> str:
    """A prompt ns or key: the characters a Prompt allows (never only dots), which keep Redis keys
    and file paths unambiguous."""
    if not _NAME.match(value) or set(value) == {"."}:
        raise ValidationError(f"invalid name {value!r} (letters, digits, '.', '_', '-')", field=field)
    return value


class StoreBase(ABC):
    """The OverridesStore Protocol on top of a few primitives; see :mod:`optiflow.stores.base`."""

    # -- primitives ---------------------------------------------------------------------------

    @abstractmethod
    def _put_prompt(self, prompt: Prompt) -> None: ...

    @abstractmethod
    def _get_prompt(self, ns: str, key: str) -> Prompt | None: ...

    @abstractmethod
    def _resolve(self, ns: str, key: str, tag: str) -> PromptOverrides | None: ...

    @abstractmethod
    def _delete(self, ns: str, key: str, tag: str) -> bool: ...

    @abstractmethod
    def _list_tags(self, ns: str, key: str) -> list[str]: ...

    @abstractmethod
    def _history(self, ns: str, key: str, tag: str) -> list[Version]: ...

    @abstractmethod
    def _transact(self, ns: str, key: str, tag: str, change: Change, *, guard_prompt: bool = False) -> Write:
        """Atomically read the tag's content and latest version, call ``change``, and write its
        result; retried on conflict. Two racing transactions never both succeed on one state.

        With ``guard_prompt`` the stored prompt is read in the same transaction (``State.prompt``)
        and no ``put_prompt`` can commit between that read and the write (a lock, a WATCH, a
        locked row), and ``Write.prompt`` is registered with the rest of the write."""

    def _errors(self) -> AbstractContextManager[None]:
        """Translate the backend's own exceptions into StoreError (default: nothing to translate)."""
        return nullcontext()

    @abstractmethod
    def close(self) -> None: ...

    # -- the Protocol -------------------------------------------------------------------------

    def put_prompt(self, prompt: Prompt) -> None:
        check_name(prompt.ns, "ns")
        check_name(prompt.key, "key")
        with self._errors():
            self._put_prompt(prompt)

    def get_prompt(self, ns: str, key: str) -> Prompt:
        _check_ref(ns, key)
        with self._errors():
            prompt = self._get_prompt(ns, key)
        if prompt is None:
            raise NotFoundError(f"no prompt {ns}/{key} in the store (push it first)", field="prompt")
        return prompt

    def resolve(self, ns: str, key: str, tag: str) -> PromptOverrides | None:
        _check_ref(ns, key, tag)
        with self._errors():
            return self._resolve(ns, key, tag)

    def store(
        self,
        descriptor: PromptDescriptor,
        sections: Sequence[SectionOverride],
        *,
        tag: str,
        model_params: Mapping[str, JSONValue] | None = None,
        replace: bool = False,
    ) -> PromptOverrides:
        _check_write(descriptor, sections, tag, model_params)

        def change(state: State) -> Write:
            base = _empty(descriptor, tag) if replace or state.content is None else state.content
            return Write(base.merged(sections, model_params))

        with self._errors():
            written = self._transact(descriptor.ns, descriptor.key, tag, change).content
        assert written is not None  # a store always writes the tag
        return written

    def delete(self, ns: str, key: str, tag: str) -> bool:
        _check_ref(ns, key, tag)
        with self._errors():
            return self._delete(ns, key, tag)

    def list_tags(self, ns: str, key: str) -> list[str]:
        _check_ref(ns, key)
        with self._errors():
            return sorted(self._list_tags(ns, key))

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
        descriptor = prompt.descriptor()
        check_user_tag(tag)
        _check_write(descriptor, sections, tag, model_params)
        outcome: list[Applied] = []  # set by the attempt that commits (a transaction may retry)

        def change(state: State) -> Write:
            _guard(descriptor, state.prompt, reader=source, advice="rerun the job on the current prompt")
            before = (state.content or _empty(descriptor, tag)).merged(())
            content = before.merged(sections, model_params)
            outcome.clear()
            if content == before:  # the tag already holds exactly this: no identical version
                outcome.append(Applied(status="unchanged", version=state.head))
                return Write(None)
            original = None
            if state.head is None:  # first apply: what the tag rendered until now is a version too
                original = _version(before, None, ORIGINAL_SOURCE, "before the first apply")
            version = _version(content, original or state.head, source, description)
            outcome.append(Applied(status="applied", version=version, original=original))
            versions = (version,) if original is None else (original, version)
            return Write(content, versions, prompt=prompt if state.prompt is None else None)

        with self._errors():
            self._transact(descriptor.ns, descriptor.key, tag, change, guard_prompt=True)
        return outcome[-1]

    def history(self, ns: str, key: str, tag: str = STABLE) -> list[Version]:
        _check_ref(ns, key, tag)
        with self._errors():
            return self._history(ns, key, tag)

    def rollback(
        self,
        descriptor: PromptDescriptor,
        version: str,
        *,
        tag: str = STABLE,
        source: str = "rollback",
    ) -> Version:
        check_version(version)
        check_user_tag(tag)
        target = next(
            (v for v in self.history(descriptor.ns, descriptor.key, tag) if v.version == version), None
        )
        if target is None:
            raise NotFoundError(
                f"no version {version} of {descriptor.ns}/{descriptor.key} under tag {tag!r}", field="version"
            )
        validate_overrides(descriptor, target.overrides.sections)

        def change(state: State) -> Write:
            _guard(descriptor, state.prompt, reader="the rollback", advice="show the prompt again and retry")
            restored = _version(target.overrides, state.head, source, f"rollback to {version}")
            return Write(restored.overrides, (restored,))

        with self._errors():
            written = self._transact(descriptor.ns, descriptor.key, tag, change, guard_prompt=True)
        return written.versions[-1]


def _guard(read: PromptDescriptor, stored: Prompt | None, *, reader: str, advice: str) -> None:
    """The compare of a compare-and-set: the stored prompt (when there is one) is the one the
    write was made against, section by section; PromptChangedError naming the sections if not."""
    if stored is None:
        return
    diff = prompt_diff(read, stored.descriptor())
    if not diff.empty:
        raise prompt_changed(read.ns, read.key, diff, reader=reader, advice=advice)


def _check_ref(ns: str, key: str, tag: str | None = None) -> None:
    check_name(ns, "ns")
    check_name(key, "key")
    if tag is not None:
        check_tag(tag)


def _check_write(
    descriptor: PromptDescriptor,
    sections: Sequence[SectionOverride],
    tag: str,
    model_params: Mapping[str, JSONValue] | None,
) -> None:
    """Everything a write is refused for, checked before anything is written."""
    _check_ref(descriptor.ns, descriptor.key, tag)
    seen: set[tuple[str, ...]] = set()
    for ov in sections:
        if ov.path in seen:
            raise ValidationError(
                f"two overrides for section {path_str(ov.path)!r} in one write",
                field=f"sections.{path_str(ov.path)}",
            )
        seen.add(ov.path)
    validate_overrides(descriptor, sections)
    if model_params:
        try:
            json.dumps(dict(model_params), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"not JSON: {exc}", field="model_params") from None


def _empty(descriptor: PromptDescriptor, tag: str) -> PromptOverrides:
    return PromptOverrides(ns=descriptor.ns, key=descriptor.key, tag=tag)


def _version(content: PromptOverrides, head: Version | None, source: str, description: str) -> Version:
    previous = head.version if head else None
    return Version(
        ns=content.ns,
        key=content.key,
        tag=content.tag,
        version=next_version(previous),
        previous=previous,
        source=source,
        description=description,
        created_at=now(),
        overrides=content,
    )
