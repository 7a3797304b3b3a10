"""What the model calls made inside a block cost: :func:`metered`.

Every :func:`optiflow.llm.completion.complete` reports its answer's cost and tokens to the meters
open in its context (a ContextVar: one per thread, so each eval thread meters its own task). The
evaluate task meters an evaluation (the answer and an ``llm_judge`` check's calls), the propose
and rewrite tasks their call, and charge it to the job's budget.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from optiflow.core.budget import Charge


@dataclass
class Meter:
    """The calls' cost (USD, as litellm prices them), tokens (prompt + completion) and count."""

    cost_usd: float = 0.0
    tokens: int = 0
    calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, cost_usd: float, tokens: int) -> None:
        with self._lock:
            self.cost_usd += cost_usd
            self.tokens += tokens
            self.calls += 1

    @property
    def charge(self) -> Charge:
        return Charge(cost_usd=self.cost_usd, tokens=self.tokens)


_meters: ContextVar[tuple[Meter, ...]] = ContextVar("optiflow_meters", default=())


@contextmanager
def metered() -> Iterator[Meter]:
    """A meter of every model call this context makes while the block runs (nested blocks
    each count their own calls and those of the blocks inside them)."""
    meter = Meter()
    token = _meters.set((*_meters.get(), meter))
    try:
        yield meter
    finally:
        _meters.reset(token)


def report(cost_usd: float, tokens: int) -> None:
    """A model call answered (or failed): add it to the open meters."""
    for meter in _meters.get():
        meter.add(cost_usd, tokens)


__all__ = ["Meter", "metered", "report"]
