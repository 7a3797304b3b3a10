"""Memo caches keyed by a digest and capped by bytes.

A cache keyed by the text it was computed from keeps that text alive: ``lru_cache(4096)`` over
prompts of a few megabytes held gigabytes (issue 20: 16 jobs with 5 MB filler sections took an
eval worker from 323 MB to 843 MB). :class:`DigestCache` keys by a 16-byte BLAKE2b digest of the
text instead, and evicts the least recently used entries once the values' estimated sizes pass
``max_bytes`` (or their number passes ``max_entries``). Thread-safe; a value is computed outside
the lock (two threads may compute the same value once each, which is harmless for pure functions).
"""

from __future__ import annotations

import hashlib
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Generic, TypeVar

V = TypeVar("V")


def digest(*parts: str) -> bytes:
    """A 16-byte digest of ``parts`` (their lengths included, so ("ab", "c") != ("a", "bc"))."""
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.digest()


def approx_size(value: Any) -> int:
    """A cheap estimate of what ``value`` holds in memory: strings by their length, containers
    and dataclass-like objects (``__slots__`` or ``__dict__``) by their items, one level at a time
    without recursion."""
    total = 0
    stack: list[Any] = [value]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, str | bytes):
            total += sys.getsizeof(item)
            continue
        total += 64
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
        elif hasattr(item, "__slots__"):
            stack.extend(getattr(item, name, None) for name in _slots(type(item)))
        elif hasattr(item, "__dict__"):
            stack.extend(vars(item).values())
    return total


def _slots(cls: type) -> Iterable[str]:
    for klass in cls.__mro__:
        slots = getattr(klass, "__slots__", ())
        yield from (slots,) if isinstance(slots, str) else slots


class DigestCache(Generic[V]):
    """An LRU memo of at most ``max_entries`` values and about ``max_bytes`` of them."""

    def __init__(self, max_bytes: int, max_entries: int = 4096) -> None:
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self._data: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], V], size: Callable[[V], int] = approx_size) -> V:
        with self._lock:
            hit = self._data.get(key)
            if hit is not None:
                self._data.move_to_end(key)
                return hit[0]
        value = make()
        cost = size(value)
        if cost > self.max_bytes:
            return value  # larger than the whole cache: not kept
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._data[key] = (value, cost)
            self._bytes += cost
            while self._data and (self._bytes > self.max_bytes or len(self._data) > self.max_entries):
                _, (_, freed) = self._data.popitem(last=False)
                self._bytes -= freed
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._bytes = 0

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._data)


__all__ = ["DigestCache", "approx_size", "digest"]
