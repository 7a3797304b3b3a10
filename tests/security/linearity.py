"""Measuring how a reader's time grows with its text (the text-safety test's harness).

For one reader and one family the text doubles from :attr:`Scale.start` characters until one call
takes :attr:`Scale.enough` seconds or the text reaches :attr:`Scale.top`. The verdict compares the
last size with the size ``8x`` smaller:

- **growth**: ``t(n) / t(n / 8)`` must stay under ``8 x`` :data:`SLACK` (a quadratic reader shows
  ``64x``; linear and ``n log n`` ones ``8-10x``). A growth over the bound is measured again (best
  of three) before it counts, so one descheduled call on a loaded machine does not fail the test;
- **budget**: the time per megabyte between the two sizes (what a megabyte more costs: a call's
  fixed cost does not count) must stay within :func:`budget_per_mb`: one second on an idle
  machine, scaled by a trivial linear scan timed now (a loaded machine slows both alike), times
  the reader's own ``budget`` factor where its docstring gives one.

Ratios, not absolute seconds, decide superlinearity: the machine's load cancels out. Times are the
calling thread's CPU time (``time.thread_time``), with the garbage collector off during a call: a
machine shared with other work descheduls a thread for milliseconds at a time, which wall-clock
times at these sizes would count.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.security.text_corpus import Family, repeat
from tests.security.text_readers import Reader

MB = 1 << 20
SLACK = 3.0
"""How much faster than linear a reader's time may grow before it fails (``8x`` size: ``24x``; a
quadratic reader shows ``64x``). Linear readers measured here grow up to about ``18x`` at these
sizes: a text that outgrows a CPU cache costs more per character."""
SCANS_PER_MB = 40
"""The per-megabyte budget in trivial linear scans of a megabyte (about 25 ms each on an idle core
of this machine: one second)."""


HARD_STOP_S = 0.25
"""A call this slow ends the ladder at once: the per-megabyte budget judges it (a quadratic reader
can take minutes a few sizes further)."""


@dataclass(frozen=True)
class Scale:
    start: int = 1024
    top: int = 256 * 1024
    enough: float = 0.008
    """Seconds one call must take for its growth to be judged (smaller times are noise)."""
    slack: float = SLACK
    """How much faster than linear the time may grow at this scale (see :data:`SLACK`)."""
    budget: float = 1.0
    """The per-megabyte budget at this scale, in multiples of the common one: a few kilobytes more
    cost a noisier per-megabyte figure than a megabyte more."""


QUICK = Scale(start=2048, enough=0.004, budget=3.0)
"""The suite's scale for each family: seconds for the whole registry. Its per-megabyte figure is
read from texts of a few to a few hundred kilobytes, where a call's per-sentence and per-call costs
weigh more than on the megabyte composite (:data:`DEEP`, which holds the tighter budget): the
slowest readers measure 2.2-2.6 s per MB here on a quiet machine, and under load two of them
crossed twice the budget (2.65 and 2.72 s against 2.5) while their growth stayed linear."""
DEEP = Scale(start=16 * 1024, top=MB, enough=0.04, slack=2.0, budget=1.5)
"""The suite's scale for each reader's composite of all its families (one long text): past the
caches' sizes a linear reader grows about 8x for 8x its text, so the growth bound is tighter."""
THOROUGH = Scale(start=4096, top=MB, enough=0.1)
"""``make bench-text-safety``: every family of every reader up to a megabyte."""


@dataclass
class Measured:
    reader: str
    family: str
    sizes: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    error: str | None = None
    growth: float = 0.0
    bound: float = 0.0
    per_mb: float = 0.0
    budget: float = 0.0

    @property
    def failure(self) -> str | None:
        if self.error is not None:
            return self.error
        if self.growth > self.bound:
            return f"time grows {self.growth:.0f}x for {self._factor()}x the text (bound {self.bound:.0f}x)"
        if self.per_mb > self.budget:
            return f"{self.per_mb:.2f} s per MB, over the budget of {self.budget:.2f} s"
        return None

    def _factor(self) -> int:
        return self.sizes[-1] // self._base_size() if self.sizes else 0

    def _base_size(self) -> int:
        top = self.sizes[-1]
        return max(s for s in self.sizes if s <= max(self.sizes[0], top // 8))

    def line(self) -> str:
        top = self.sizes[-1] if self.sizes else 0
        t = self.times[-1] if self.times else 0.0
        verdict = self.failure or "ok"
        return f"{self.reader} | {self.family} | {top // 1024} KB in {t * 1000:.1f} ms | {verdict}"


def scan_seconds_per_mb() -> float:
    """A trivial linear scan of a megabyte, best of three: the machine's speed right now."""
    text = "a b " * (MB // 4)
    best = math.inf
    for _ in range(3):
        t0 = time.thread_time()
        sum(1 for ch in text if ch == " ")
        best = min(best, time.thread_time() - t0)
    return best


def budget_per_mb(scan: float) -> float:
    return max(1.0, SCANS_PER_MB * scan)


def _call(reader: Reader, arg: object) -> tuple[float, str | None]:
    reader.setup()
    t0 = time.thread_time()
    try:
        reader.read(arg)
    except reader.raises:
        pass
    except RecursionError:
        return time.thread_time() - t0, "RecursionError (a recursive reader: nesting reaches the stack)"
    except Exception as exc:  # anything but a clear refusal is a failure
        return time.thread_time() - t0, f"{type(exc).__name__}: {str(exc)[:160]}"
    return time.thread_time() - t0, None


def measure(reader: Reader, family: Family, scale: Scale, scan: float) -> Measured:
    """One reader on one family (see the module); the garbage collector is off meanwhile, as in
    ``timeit``: a collection of the test process's heap is not the reader's time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _measure(reader, family, scale, scan)
    finally:
        if enabled:
            gc.enable()


def _measure(reader: Reader, family: Family, scale: Scale, scan: float) -> Measured:
    """The text doubles until a call takes ``scale.enough`` and the text is 8x the first one (or
    ``scale.top``, or a call takes :data:`HARD_STOP_S`). The growth is judged only when a call took
    ``scale.enough``: a reader faster than that up to ``scale.top`` is fast whatever its growth (a quadratic one would
    take at most ``enough x (n / top)^2`` at ``n``), and below it a step in the cost of memory (a
    large allocation's fresh pages) can look like growth."""
    out = Measured(reader.name, family.name, budget=budget_per_mb(scan) * reader.budget * scale.budget)
    prepared: dict[int, object] = {}

    def arg(n: int) -> object:
        if n not in prepared:
            prepared[n] = reader.prepare(family.text(n))
        return prepared[n]

    def best(n: int) -> float:
        return min(_call(reader, arg(n))[0] for _ in range(3))

    _call(reader, reader.prepare("a warm-up. Is it? ${a}; [1]"))  # one-time costs (an encoder's load)
    n = scale.start
    while True:
        elapsed, error = _call(reader, arg(n))
        out.sizes.append(n)
        out.times.append(elapsed)
        if error is not None:
            out.error = f"{error} (at {n // 1024} KB)"
            return out
        spanned = n >= 8 * scale.start  # the growth is judged over 8x the text at least
        if n >= scale.top or elapsed >= HARD_STOP_S or (elapsed >= scale.enough and spanned):
            break
        n *= 2
    top, base = out.sizes[-1], out._base_size()
    t_top, t_base = out.times[-1], out.times[out.sizes.index(base)]
    judged = t_top >= scale.enough and top > base
    out.bound = (top / base) * scale.slack if judged else math.inf
    out.growth = t_top / max(t_base, 1e-6) if judged else 0.0
    if out.growth > out.bound:  # confirm on the best of three before it counts
        t_top, t_base = best(top), best(base)
        out.times[-1] = t_top
        out.growth = t_top / max(t_base, 1e-6)
    out.per_mb = _per_mb(top, base, t_top, t_base)
    if out.per_mb > out.budget:
        t_top, t_base = best(top), best(base)
        out.times[-1] = t_top
        out.per_mb = _per_mb(top, base, t_top, t_base)
    return out


def _per_mb(top: int, base: int, t_top: float, t_base: float) -> float:
    if top > base:
        return max(0.0, t_top - t_base) * MB / (top - base)
    return t_top * MB / top


def families_for(
    reader: Reader, generic: tuple[Family, ...], derive: Callable[..., list[Family]]
) -> list[Family]:
    """The generic families (lone surrogates only for a reader that can get them), the reader's own
    corpus, and the families derived from its patterns."""
    fams = [f for f in generic if reader.surrogates or not f.surrogates]
    own = [Family(f"own {unit[:30]!r}", repeat(unit)) for unit in reader.corpus]
    return fams + own + derive(reader.derive)


__all__ = [
    "QUICK",
    "THOROUGH",
    "Measured",
    "Scale",
    "budget_per_mb",
    "families_for",
    "measure",
    "scan_seconds_per_mb",
]
