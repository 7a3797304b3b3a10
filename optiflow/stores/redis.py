"""Store in Redis: what workers and the production application share. Keys: :mod:`.keys`.

A write is one MULTI/EXEC (the tag's JSON, the tag index, and the appended version together),
guarded by WATCH on the tag and its version list: when another client changed either in between,
the transaction is recomputed from the new state, so two applies racing on one tag never lose a
version and two merges never lose a section. A guarded write (``apply``, ``rollback``) WATCHes the
prompt's key too: a push between its compare and its EXEC makes it compare again with the pushed
prompt; a prompt it registers is SET in the same MULTI/EXEC.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis

from optiflow.core.overrides import PromptOverrides, Version
from optiflow.core.prompt import Prompt
from optiflow.errors import StoreError
from optiflow.stores import keys
from optiflow.stores._common import Change, State, StoreBase, Write

_MAX_ATTEMPTS = 200


class RedisOverridesStore(StoreBase):
    """A Redis client (or a URL to open one) and the prefix of every key written.

    A client passed in stays the caller's; one opened from a URL is closed by :meth:`close`.
    """

    def __init__(self, client: redis.Redis[Any] | str, *, prefix: str = "optiflow") -> None:
        self._owned = isinstance(client, str)
        self._client = redis.Redis.from_url(client) if isinstance(client, str) else client
        self.prefix = prefix

    def _put_prompt(self, prompt: Prompt) -> None:
        self._client.set(keys.prompt(self.prefix, prompt.ns, prompt.key), prompt.model_dump_json())

    def _get_prompt(self, ns: str, key: str) -> Prompt | None:
        raw = self._client.get(keys.prompt(self.prefix, ns, key))
        return None if raw is None else Prompt.model_validate_json(raw)

    def _resolve(self, ns: str, key: str, tag: str) -> PromptOverrides | None:
        raw = self._client.get(keys.overrides(self.prefix, ns, key, tag))
        return None if raw is None else PromptOverrides.model_validate_json(raw)

    def _delete(self, ns: str, key: str, tag: str) -> bool:
        with self._client.pipeline(transaction=True) as pipe:
            pipe.delete(keys.overrides(self.prefix, ns, key, tag))
            pipe.srem(keys.tags(self.prefix, ns, key), tag)
            removed, _ = pipe.execute()
        return bool(removed)

    def _list_tags(self, ns: str, key: str) -> list[str]:
        members = self._client.smembers(keys.tags(self.prefix, ns, key))
        return [t if isinstance(t, str) else t.decode() for t in members]

    def _history(self, ns: str, key: str, tag: str) -> list[Version]:
        raws = self._client.lrange(keys.versions(self.prefix, ns, key, tag), 0, -1)
        return [Version.model_validate_json(raw) for raw in raws]

    def _transact(self, ns: str, key: str, tag: str, change: Change, *, guard_prompt: bool = False) -> Write:
        okey = keys.overrides(self.prefix, ns, key, tag)
        vkey = keys.versions(self.prefix, ns, key, tag)
        pkey = keys.prompt(self.prefix, ns, key)
        with self._client.pipeline() as pipe:
            for _ in range(_MAX_ATTEMPTS):
                try:
                    pipe.watch(okey, vkey, *((pkey,) if guard_prompt else ()))
                    # Read after WATCH: any change from here on makes EXEC fail and we recompute.
                    raw, raw_head = self._client.get(okey), self._client.lindex(vkey, -1)
                    write = change(
                        State(
                            None if raw is None else PromptOverrides.model_validate_json(raw),
                            None if raw_head is None else Version.model_validate_json(raw_head),
                            self._get_prompt(ns, key) if guard_prompt else None,
                        )
                    )
                    if write.empty:
                        pipe.unwatch()
                        return write
                    pipe.multi()
                    if write.prompt is not None:
                        pipe.set(pkey, write.prompt.model_dump_json())
                    if write.content is not None:
                        pipe.set(okey, write.content.model_dump_json())
                        pipe.sadd(keys.tags(self.prefix, ns, key), tag)
                    if write.versions:
                        pipe.rpush(vkey, *(v.model_dump_json() for v in write.versions))
                    pipe.execute()
                    return write
                except redis.WatchError:
                    continue
        raise StoreError(
            f"{ns}/{key} tag {tag!r}: gave up after {_MAX_ATTEMPTS} conflicting writes", field="tag"
        )

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except redis.RedisError as exc:
            raise StoreError(f"Redis: {exc}", field="redis_url") from exc

    def close(self) -> None:
        if self._owned:
            self._client.close()
