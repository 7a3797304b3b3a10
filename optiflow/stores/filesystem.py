"""Store in JSON files under one directory: single machine, several processes.

Layout under ``root``::

    prompts/<ns>/<key>.json      the prompt
    overrides/<ns>/<key>.json    {"tags": {tag: overrides}, "versions": {tag: [version, ...]}}
    overrides/<ns>/<key>.lock    flock held while that file (or the prompt) is read, changed and
                                 replaced

Every file is written to a temporary file and moved into place with ``os.replace``, so a reader
sees either the old or the new content. One file per prompt makes a write that changes a tag and
appends its version a single atomic replace. ``put_prompt`` takes the same lock, so a guarded write
(``apply``, ``rollback``) reads the prompt, compares and writes with no push in between; an apply
that registers the prompt replaces the prompt file, then the overrides file, under that lock (a
crash between the two leaves the prompt registered and the tag as it was: the apply can be re-run).
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pydantic

from optiflow.core.overrides import PromptOverrides, Version
from optiflow.core.prompt import Prompt
from optiflow.errors import StoreError
from optiflow.stores._common import Change, State, StoreBase, Write

M = TypeVar("M", bound=pydantic.BaseModel)


class FilesystemOverridesStore(StoreBase):
    """JSON files under ``root`` (created on first write)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _prompt_path(self, ns: str, key: str) -> Path:
        return self.root / "prompts" / ns / f"{key}.json"

    def _state_path(self, ns: str, key: str) -> Path:
        return self.root / "overrides" / ns / f"{key}.json"

    def _put_prompt(self, prompt: Prompt) -> None:
        with _locked(self._state_path(prompt.ns, prompt.key)):
            _write_atomic(self._prompt_path(prompt.ns, prompt.key), prompt.model_dump_json(indent=2))

    def _get_prompt(self, ns: str, key: str) -> Prompt | None:
        path = self._prompt_path(ns, key)
        text = _read(path)
        return None if text is None else _parse(Prompt, _loads(text, path), path)

    def _resolve(self, ns: str, key: str, tag: str) -> PromptOverrides | None:
        return _State.load(self._state_path(ns, key)).overrides(tag)

    def _delete(self, ns: str, key: str, tag: str) -> bool:
        path = self._state_path(ns, key)
        with _locked(path):
            state = _State.load(path)
            if state.tags.pop(tag, None) is None:
                return False
            state.save()
            return True

    def _list_tags(self, ns: str, key: str) -> list[str]:
        return list(_State.load(self._state_path(ns, key)).tags)

    def _history(self, ns: str, key: str, tag: str) -> list[Version]:
        return _State.load(self._state_path(ns, key)).history(tag)

    def _transact(self, ns: str, key: str, tag: str, change: Change, *, guard_prompt: bool = False) -> Write:
        path = self._state_path(ns, key)
        with _locked(path):
            state = _State.load(path)
            raw_versions: list[Any] = state.versions.get(tag, [])
            head = _parse(Version, raw_versions[-1], path) if raw_versions else None
            stored = self._get_prompt(ns, key) if guard_prompt else None
            write = change(State(state.overrides(tag), head, stored))
            if write.empty:
                return write
            if write.prompt is not None:
                _write_atomic(self._prompt_path(ns, key), write.prompt.model_dump_json(indent=2))
            if write.content is not None:
                state.tags[tag] = write.content.model_dump(mode="json")
            if write.versions:
                state.versions[tag] = [*raw_versions, *(v.model_dump(mode="json") for v in write.versions)]
            if write.content is not None or write.versions:
                state.save()
            return write

    def close(self) -> None:
        """Nothing to release: files are opened per call."""


class _State:
    """One prompt's overrides file, as plain JSON data."""

    def __init__(self, path: Path, tags: dict[str, Any], versions: dict[str, list[Any]]) -> None:
        self.path = path
        self.tags = tags
        self.versions = versions

    @classmethod
    def load(cls, path: Path) -> _State:
        text = _read(path)
        if text is None:
            return cls(path, {}, {})
        data = _loads(text, path)
        try:
            return cls(path, dict(data["tags"]), dict(data["versions"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"corrupt store file: {exc}", field=str(path)) from None

    def overrides(self, tag: str) -> PromptOverrides | None:
        raw = self.tags.get(tag)
        return None if raw is None else _parse(PromptOverrides, raw, self.path)

    def history(self, tag: str) -> list[Version]:
        return [_parse(Version, raw, self.path) for raw in self.versions.get(tag, [])]

    def save(self) -> None:
        _write_atomic(self.path, json.dumps({"tags": self.tags, "versions": self.versions}, indent=1))


def _loads(text: str, path: Path) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise StoreError(f"corrupt store file: {exc}", field=str(path)) from None


def _parse(model: type[M], data: Any, path: Path) -> M:
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        raise StoreError(f"corrupt store file: {exc.errors()[0]['msg']}", field=str(path)) from None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"cannot read: {exc.strerror}", field=str(path)) from None


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive flock beside ``path``: excludes other processes and other threads alike
    (each call opens its own file description)."""
    lock = path.with_name(f"{path.stem}.lock")
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fh = lock.open("a")
    except OSError as exc:
        raise StoreError(f"cannot lock: {exc.strerror}", field=str(lock)) from None
    with fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file in the same directory, then ``os.replace`` it into place."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise StoreError(f"cannot write: {exc.strerror}", field=str(path)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise StoreError(f"cannot write: {exc.strerror}", field=str(path)) from None
