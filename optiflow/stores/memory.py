"""In-process store: the reference backend, for tests and single-process runs. Thread-safe."""

from __future__ import annotations

import threading

from optiflow.core.overrides import PromptOverrides, Version
from optiflow.core.prompt import Prompt
from optiflow.stores._common import Change, State, StoreBase, Write

_Tag = tuple[str, str, str]


class MemoryOverridesStore(StoreBase):
    """Everything in dicts behind one lock; gone when the process exits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._prompts: dict[tuple[str, str], Prompt] = {}
        self._tags: dict[_Tag, PromptOverrides] = {}
        self._versions: dict[_Tag, list[Version]] = {}

    def _put_prompt(self, prompt: Prompt) -> None:
        with self._lock:
            self._prompts[prompt.ns, prompt.key] = prompt

    def _get_prompt(self, ns: str, key: str) -> Prompt | None:
        with self._lock:
            return self._prompts.get((ns, key))

    def _resolve(self, ns: str, key: str, tag: str) -> PromptOverrides | None:
        with self._lock:
            return self._tags.get((ns, key, tag))

    def _delete(self, ns: str, key: str, tag: str) -> bool:
        with self._lock:
            return self._tags.pop((ns, key, tag), None) is not None

    def _list_tags(self, ns: str, key: str) -> list[str]:
        with self._lock:
            return [t for (n, k, t) in self._tags if (n, k) == (ns, key)]

    def _history(self, ns: str, key: str, tag: str) -> list[Version]:
        with self._lock:
            return list(self._versions.get((ns, key, tag), ()))

    def _transact(self, ns: str, key: str, tag: str, change: Change, *, guard_prompt: bool = False) -> Write:
        where = (ns, key, tag)
        with self._lock:  # put_prompt takes it too: the prompt cannot change under a guarded write
            versions: list[Version] = self._versions.get(where, [])
            stored = self._prompts.get((ns, key)) if guard_prompt else None
            write = change(State(self._tags.get(where), versions[-1] if versions else None, stored))
            if write.prompt is not None:
                self._prompts[ns, key] = write.prompt
            if write.content is not None:
                self._tags[where] = write.content
            if write.versions:
                self._versions[where] = [*versions, *write.versions]
            return write

    def close(self) -> None:
        """Nothing to release."""
