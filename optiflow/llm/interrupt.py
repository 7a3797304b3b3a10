"""Sleeps that notice a cancelled job.

An evaluate task runs its model call inside :func:`stop_when` with a check that says whether its
job was cancelled (or ended); the simulated model's latency sleeps through :func:`sleep`, which
wakes every :data:`POLL_S` to ask, and raises :class:`Interrupted` once the answer is yes. So a
cancel frees the eval threads a long simulated latency holds, instead of leaving them asleep
until the latency is over (the issue-20 run slept 8 threads for a day). The check is carried in
a context variable: ``asyncio.to_thread`` (litellm's async path) copies it along.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

POLL_S = 0.5
"""How often a sleeping call asks whether its job was cancelled."""

_check: ContextVar[Callable[[], bool] | None] = ContextVar("optiflow_stop_check", default=None)


class Interrupted(Exception):
    """The job the sleeping call belongs to was cancelled."""


@contextmanager
def stop_when(check: Callable[[], bool]) -> Iterator[None]:
    """Sleeps in this context (:func:`sleep`) end early, raising :class:`Interrupted`, once
    ``check()`` is true. A check that fails counts as not cancelled."""
    token = _check.set(check)
    try:
        yield
    finally:
        _check.reset(token)


def _stopped(check: Callable[[], bool]) -> bool:
    try:
        return bool(check())
    except Exception:
        return False


def sleep(seconds: float) -> None:
    """``time.sleep(seconds)``, in slices of :data:`POLL_S` that ask the context's check."""
    check = _check.get()
    if check is None:
        time.sleep(seconds)
        return
    end = time.monotonic() + seconds
    while True:
        if _stopped(check):
            raise Interrupted("the job was cancelled")
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(POLL_S, left))


__all__ = ["POLL_S", "Interrupted", "sleep", "stop_when"]
