"""The limiter seam of :func:`optiflow.llm.completion.complete`: every model call whose model
matches a configured route (:mod:`optiflow.core.rate_limits`) waits here for the route's requests per
minute, tokens per minute and concurrency, and tells the route what the provider answered.

One algorithm, two backends (:class:`LimiterBackend`): :class:`LocalLimiterBackend` in this
process (the embedded default), and the Redis backend
(:class:`optiflow.distributed.ratelimit.RedisLimiterBackend`) that every worker of a fleet
shares, built by the worker runtime and installed here with :func:`install`. This layer never
imports the distributed one.

The algorithm, per route (the Redis backend runs it in Lua, atomically, on Redis's clock):

- **Rates: GCRA with reservations.** Requests and tokens each have a theoretical arrival time
  (TAT); the bucket holds ``burst_s`` seconds of the rate. A call *reserves* the earliest time
  ``t`` that conforms to both buckets (a call larger than the token bucket waits for a full
  bucket, then goes into debt) and both TATs advance; the caller sleeps until ``t``. Waiting
  callers therefore queue in order instead of polling, and one round trip admits a call.
- **Concurrency: leases.** At its time the call takes a lease (an entry with an expiry of the
  call's timeout plus :data:`LEASE_MARGIN_S`), so a killed worker's slot frees itself; a full
  route is polled every :data:`POLL_S` at most.
- **Reconciliation.** The reservation charges an estimate (tiktoken's prompt count, plus
  ``max_tokens`` or the route's recent mean completion); the release charges or refunds the
  difference to the usage the provider reported (a 429 refunds all of it: nothing was served).
- **Push-back.** A 429 pauses the whole route for its ``Retry-After`` (else
  :data:`DEFAULT_PAUSE_S`): reservations made before it are void (their callers reserve again
  after the pause) and the buckets restart empty at the pause's end. A 429 on a call that was
  admitted after the previous 429's pause ended means the rate itself is too high: the route's
  rate is halved (down to :data:`MIN_FACTOR`). Successes then raise it linearly (additive
  increase), from half to the full configured rate in ``recover_s`` seconds.
  ``x-ratelimit-limit-*`` below the configured rate lowers it to the provider's; ``remaining 0``
  with a long reset (:data:`HINT_MIN_PAUSE_S`) pauses the route until the reset.

Waiting is not an error: the caller sleeps in slices of at most :data:`SLICE_S` and calls the
wait hook (:func:`while_waiting`) every :data:`BEAT_EVERY_S`, so a job whose calls wait keeps its
progress beat. Only a wait longer than ``max_wait_s`` gives up (a transient error).
"""

from __future__ import annotations

import email.utils
import logging
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import Field

from optiflow.core.base import Frozen
from optiflow.core.model import ModelConfig
from optiflow.core.rate_limits import ModelLimits, RouteLimit

log = logging.getLogger(__name__)

LEASE_MARGIN_S = 30.0
"""A concurrency lease lasts the call's timeout plus this; a killed worker's slot frees by itself."""
POLL_S = 0.05
"""Longest sleep between two looks at a route whose concurrency is full."""
SLICE_S = 1.0
"""Longest single sleep while waiting (the rate may change meanwhile: a pause, a halving)."""
BEAT_EVERY_S = 5.0
"""How often a waiting call runs the wait hook (the evaluate task beats its job's progress)."""
DEFAULT_PAUSE_S = 1.0
"""The pause after a 429 that says no ``Retry-After``."""
MIN_FACTOR = 1 / 64
"""The lowest fraction of the configured rate that 429 storms halve a route down to."""
HINT_MIN_PAUSE_S = 5.0
"""``x-ratelimit-remaining-* = 0`` pauses the route only when its reset is at least this far (and
more than twice the route's own spacing of requests): shorter resets are our own bucket's job, and
the hint is already one call's latency old when it arrives."""
STATE_TTL_S = 24 * 3600
"""A route's shared state (rate factor, TATs) is kept this long after its last call."""

Status = Literal["ok", "rate_limited", "error"]


class Ticket(Frozen):
    """A reservation: the call may go at ``at`` (backend clock) unless the route's ``epoch``
    changed meanwhile (a pause voids every reservation made before it)."""

    epoch: int
    at: float


class Lease(Frozen):
    """An admitted call: its concurrency lease ``id``, when it was admitted (backend clock) and
    the tokens its reservation charged."""

    route: str
    id: str
    admitted_at: float
    tokens: int = 0


class Admission(Frozen):
    """``lease`` when the call may go now; else sleep ``wait_s`` and ask again with ``ticket``."""

    lease: Lease | None = None
    wait_s: float = 0.0
    ticket: Ticket | None = None


class Outcome(Frozen):
    """What the provider said about one admitted call."""

    status: Status = "ok"
    tokens_used: int | None = Field(default=None, ge=0, description="None: unknown, keep the estimate")
    retry_after_s: float | None = Field(default=None, ge=0)
    pause_s: float = Field(default=0.0, ge=0, description="pause the route (remaining 0, long reset)")
    provider_rpm: float | None = Field(default=None, gt=0)
    provider_tpm: float | None = Field(default=None, gt=0)


class RouteStatus(Frozen):
    """A route's configuration and live state, JSON-ready (the page, ``optiflow worker``)."""

    name: str
    model: str
    api_base: str | None = None
    rpm: float | None = None
    tpm: float | None = None
    concurrency: int | None = None
    burst_s: float = 0.1
    factor: float = 1.0
    effective_rpm: float | None = None
    effective_tpm: float | None = None
    paused_s: float = 0.0
    in_flight: int = 0
    backlog_s: float = 0.0
    shared: bool = False


class LimiterBackend(Protocol):
    """Where a route's buckets, leases and push-back state live (one process, or Redis)."""

    shared: bool
    """True when every worker of the fleet shares this backend's state."""

    def acquire(self, route: RouteLimit, *, tokens: int, lease_s: float, ticket: Ticket | None) -> Admission:
        """Admit a call now (a lease), or reserve its turn and say how long to wait."""
        ...

    def release(self, route: RouteLimit, lease: Lease, outcome: Outcome) -> None:
        """End the call: free its lease, reconcile its tokens, apply the provider's push-back."""
        ...

    def status(self, route: RouteLimit) -> RouteStatus: ...

    def clear(self, route: RouteLimit) -> None:
        """Forget the route's state (rates back to configured, no pause, no leases)."""
        ...


class LimiterTimeout(Exception):
    """A call waited ``max_wait_s`` for its route and gave up."""

    def __init__(self, message: str, waited_s: float) -> None:
        super().__init__(message)
        self.waited_s = waited_s


# -- the algorithm, in Python (the Redis backend's Lua mirrors it) ---------------------------------
def _per_s(rate_per_min: float | None, provider: float | None, factor: float) -> float:
    if not rate_per_min:
        return 0.0
    rate = min(rate_per_min, provider) if provider else rate_per_min
    return rate * factor / 60.0


@dataclass
class RouteState:
    """One route's state; every method takes ``now`` (seconds, the backend's clock)."""

    rtat: float = 0.0
    ttat: float = 0.0
    epoch: int = 0
    pause_until: float = 0.0
    factor: float = 1.0
    last_adjust: float = 0.0
    last_decrease: float = 0.0
    calm_after: float | None = None
    provider_rpm: float | None = None
    provider_tpm: float | None = None
    leases: dict[str, float] = field(default_factory=dict)

    def rates(self, route: RouteLimit) -> tuple[float, float]:
        return (
            _per_s(route.rpm, self.provider_rpm, self.factor),
            _per_s(route.tpm, self.provider_tpm, self.factor),
        )

    def acquire(
        self, now: float, route: RouteLimit, tokens: int, lease_id: str, lease_s: float, ticket: Ticket | None
    ) -> Admission:
        if self.pause_until > now:
            return Admission(wait_s=self.pause_until - now)
        if ticket is None or ticket.epoch != self.epoch:
            at = now
            rr, tr = self.rates(route)
            if rr > 0:
                br = max(1.0, rr * route.burst_s)
                at = max(at, self.rtat - (br - 1) / rr)
            if tr > 0 and tokens > 0:
                bt = max(1.0, tr * route.burst_s)
                at = max(at, self.ttat - (bt - min(tokens, bt)) / tr)
            if rr > 0:
                self.rtat = max(self.rtat, at) + 1 / rr
            if tr > 0 and tokens > 0:
                self.ttat = max(self.ttat, at) + tokens / tr
            ticket = Ticket(epoch=self.epoch, at=at)
        if ticket.at > now:
            return Admission(wait_s=ticket.at - now, ticket=ticket)
        if route.concurrency is not None:
            self.leases = {k: v for k, v in self.leases.items() if v > now}
            if len(self.leases) >= route.concurrency:
                return Admission(wait_s=min(POLL_S, min(self.leases.values()) - now), ticket=ticket)
            self.leases[lease_id] = now + lease_s
        return Admission(lease=Lease(route=route.name, id=lease_id, admitted_at=now, tokens=tokens))

    def release(self, now: float, route: RouteLimit, lease: Lease, outcome: Outcome) -> None:
        self.leases.pop(lease.id, None)
        self.provider_rpm = outcome.provider_rpm if _lower(outcome.provider_rpm, route.rpm) else None
        self.provider_tpm = outcome.provider_tpm if _lower(outcome.provider_tpm, route.tpm) else None
        tr = self.rates(route)[1]
        used = 0 if outcome.status == "rate_limited" else outcome.tokens_used
        if used is not None and tr > 0 and lease.tokens != used:
            self.ttat += (used - lease.tokens) / tr
        if outcome.status == "ok" and self.factor < 1 and lease.admitted_at >= self.last_decrease:
            self.factor = min(1.0, self.factor + (now - self.last_adjust) / (2 * route.recover_s))
            self.last_adjust = now
        pause = outcome.pause_s
        if outcome.status == "rate_limited":
            if self.calm_after is not None and lease.admitted_at >= self.calm_after:
                self.factor = max(MIN_FACTOR, self.factor / 2)
                self.last_decrease = self.last_adjust = now
            pause = outcome.retry_after_s if outcome.retry_after_s is not None else DEFAULT_PAUSE_S
        if pause > 0:
            self.pause(now, route, pause, rate_limited=outcome.status == "rate_limited")

    def pause(self, now: float, route: RouteLimit, seconds: float, *, rate_limited: bool) -> None:
        end = max(self.pause_until, now + seconds)
        self.pause_until = end
        self.epoch += 1
        rr, tr = self.rates(route)
        if rr > 0:
            self.rtat = end + (max(1.0, rr * route.burst_s) - 1) / rr
        if tr > 0:
            self.ttat = end + (max(1.0, tr * route.burst_s) - 1) / tr
        if rate_limited:
            self.calm_after = end

    def status(self, now: float, route: RouteLimit, *, shared: bool) -> RouteStatus:
        rr = self.rates(route)[0]
        backlog = 0.0
        if rr > 0:
            backlog = max(backlog, self.rtat - (max(1.0, rr * route.burst_s) - 1) / rr - now)
        return route_status(
            route,
            factor=self.factor,
            provider_rpm=self.provider_rpm,
            provider_tpm=self.provider_tpm,
            paused_s=max(0.0, self.pause_until - now),
            in_flight=sum(1 for v in self.leases.values() if v > now),
            backlog_s=max(0.0, backlog),
            shared=shared,
        )


def _lower(provider: float | None, configured: float | None) -> bool:
    return provider is not None and configured is not None and provider < configured


def route_status(
    route: RouteLimit,
    *,
    factor: float = 1.0,
    provider_rpm: float | None = None,
    provider_tpm: float | None = None,
    paused_s: float = 0.0,
    in_flight: int = 0,
    backlog_s: float = 0.0,
    shared: bool = False,
) -> RouteStatus:
    def effective(rate: float | None, provider: float | None) -> float | None:
        return None if rate is None else (min(rate, provider) if provider else rate) * factor

    return RouteStatus(
        name=route.name,
        model=route.model,
        api_base=route.api_base,
        rpm=route.rpm,
        tpm=route.tpm,
        concurrency=route.concurrency,
        burst_s=route.burst_s,
        factor=factor,
        effective_rpm=effective(route.rpm, provider_rpm),
        effective_tpm=effective(route.tpm, provider_tpm),
        paused_s=paused_s,
        in_flight=in_flight,
        backlog_s=backlog_s,
        shared=shared,
    )


class LocalLimiterBackend:
    """Every route's state in this process (the embedded default: one process runs every call)."""

    shared = False

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._routes: dict[str, RouteState] = {}
        self._lock = threading.Lock()

    def _state(self, route: RouteLimit) -> RouteState:
        return self._routes.setdefault(route.name, RouteState())

    def acquire(self, route: RouteLimit, *, tokens: int, lease_s: float, ticket: Ticket | None) -> Admission:
        with self._lock:
            now = self._clock()
            return self._state(route).acquire(now, route, tokens, uuid.uuid4().hex, lease_s, ticket)

    def release(self, route: RouteLimit, lease: Lease, outcome: Outcome) -> None:
        with self._lock:
            self._state(route).release(self._clock(), route, lease, outcome)

    def status(self, route: RouteLimit) -> RouteStatus:
        with self._lock:
            return self._state(route).status(self._clock(), route, shared=False)

    def clear(self, route: RouteLimit) -> None:
        with self._lock:
            self._routes.pop(route.name, None)


# -- the front: what complete() calls ---------------------------------------------------------------
_on_wait: ContextVar[Callable[[], object] | None] = ContextVar("optiflow_limiter_on_wait", default=None)


@contextmanager
def while_waiting(hook: Callable[[], object]) -> Iterator[None]:
    """Run ``hook`` every :data:`BEAT_EVERY_S` while a call in this context waits for its route
    (the evaluate task beats its job's progress, so recovery never takes a wait for a stall)."""
    token = _on_wait.set(hook)
    try:
        yield
    finally:
        _on_wait.reset(token)


class Limiter:
    """The configured routes and the backend that holds their state."""

    def __init__(
        self,
        limits: ModelLimits,
        backend: LimiterBackend,
        *,
        max_wait_s: float = 1800.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.limits = limits
        self.backend = backend
        self.max_wait_s = max_wait_s
        self._sleep = sleep
        self._completion: dict[str, float] = {}

    def route_for(self, config: ModelConfig) -> RouteLimit | None:
        return self.limits.route_for(config.model, config.api_base)

    def admit(self, route: RouteLimit, tokens: int, *, lease_s: float) -> tuple[Lease, float]:
        """Wait for the route (in bounded slices, running the wait hook); the lease and the
        seconds waited. :class:`LimiterTimeout` after ``max_wait_s``."""
        started = last_beat = time.monotonic()
        ticket: Ticket | None = None
        while True:
            adm = self.backend.acquire(route, tokens=tokens, lease_s=lease_s, ticket=ticket)
            now = time.monotonic()
            if adm.lease is not None:
                return adm.lease, now - started
            ticket = adm.ticket
            if now - started >= self.max_wait_s:
                raise LimiterTimeout(
                    f"waited {now - started:.0f}s for the rate limit of model route {route.name!r} "
                    f"(OPTIFLOW_LIMIT_MAX_WAIT_S={self.max_wait_s:g})",
                    now - started,
                )
            hook = _on_wait.get()
            if hook is not None and now - last_beat >= BEAT_EVERY_S:
                last_beat = now
                try:
                    hook()
                except Exception as exc:  # a missed beat is no reason to fail the call
                    log.warning("limiter wait hook failed: %s", exc)
            self._sleep(max(0.001, min(adm.wait_s, SLICE_S, self.max_wait_s - (now - started))))

    def finish(
        self, route: RouteLimit, lease: Lease, outcome: Outcome, *, completion_tokens: int | None = None
    ) -> None:
        """Release the call's lease with what the provider said. ``completion_tokens`` feeds a
        running mean: the estimate of a call that sets no ``max_tokens``."""
        if outcome.pause_s > 0 and outcome.pause_s < max(HINT_MIN_PAUSE_S, 2 * 60 / (route.rpm or math.inf)):
            outcome = outcome.model_copy(update={"pause_s": 0.0})  # our own bucket spaces calls that far
        if completion_tokens is not None:
            prev = self._completion.get(route.name)
            self._completion[route.name] = (
                float(completion_tokens) if prev is None else 0.8 * prev + 0.2 * completion_tokens
            )
        self.backend.release(route, lease, outcome)

    def estimate_tokens(
        self, route: RouteLimit, config: ModelConfig, messages: Sequence[Mapping[str, Any]]
    ) -> int:
        """Prompt tokens (tiktoken, as the provider counts them: content + 3 per message + 3)
        plus ``max_tokens`` when the call sets it, else the route's recent mean completion."""
        if route.tpm is None:
            return 0
        from optiflow.llm.tokens import count_tokens

        prompt = 3 + sum(count_tokens(_content(m), config.model) + 3 for m in messages)
        max_tokens = config.params.get("max_tokens")
        if isinstance(max_tokens, int) and max_tokens > 0:
            return prompt + max_tokens
        return prompt + round(self._completion.get(route.name, 0.0))

    def status(self) -> list[RouteStatus]:
        return [self.backend.status(route) for route in self.limits.routes]


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


# -- what the provider said: Retry-After and x-ratelimit-* -----------------------------------------
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_duration(text: str) -> float | None:
    """``"1s"``, ``"6m0s"``, ``"20ms"``, ``"1.5"`` (seconds) -> seconds; None when unreadable."""
    text = text.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text.replace(" ", ""):
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


def normalize_headers(headers: Any) -> dict[str, str]:
    """Lower-case names, litellm's ``llm_provider-`` prefix removed."""
    if headers is None:
        return {}
    try:
        items = list(headers.items())
    except AttributeError:
        return {}
    out: dict[str, str] = {}
    for key, value in items:
        name = str(key).lower().removeprefix("llm_provider-")
        out.setdefault(name, str(value))
    return out


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    if "retry-after-ms" in headers:
        try:
            return max(0.0, float(headers["retry-after-ms"]) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def outcome_from_headers(
    status: Status, headers: Mapping[str, str], tokens_used: int | None = None
) -> Outcome:
    """The :class:`Outcome` of a call from the provider's response headers."""

    def number(name: str) -> float | None:
        raw = headers.get(name)
        try:
            value = float(raw) if raw is not None else None
        except ValueError:
            return None
        return value if value is not None and value > 0 else None

    pause = 0.0
    for kind in ("requests", "tokens"):
        remaining = headers.get(f"x-ratelimit-remaining-{kind}")
        reset = parse_duration(headers.get(f"x-ratelimit-reset-{kind}", ""))
        if remaining is not None and remaining.strip() in ("0", "0.0") and reset is not None:
            pause = max(pause, reset)
    return Outcome(
        status=status,
        tokens_used=tokens_used,
        retry_after_s=retry_after_s(headers) if status == "rate_limited" else None,
        pause_s=pause if pause >= HINT_MIN_PAUSE_S and status == "ok" else 0.0,
        provider_rpm=number("x-ratelimit-limit-requests"),
        provider_tpm=number("x-ratelimit-limit-tokens"),
    )


# -- the limiter in effect ------------------------------------------------------------------------
_in_effect: ContextVar[Limiter | None] = ContextVar("optiflow_limiter", default=None)


@contextmanager
def limited_by(limiter: Limiter | None) -> Iterator[None]:
    """Every :func:`~optiflow.llm.completion.complete` this context makes while the block runs
    passes ``limiter`` (None: no limits). The owner of the limiter (a worker's or the embedded
    client's runtime, the ``eval`` command) opens it around each task; no process-wide state."""
    token = _in_effect.set(limiter)
    try:
        yield
    finally:
        _in_effect.reset(token)


def installed() -> Limiter | None:
    """The limiter the calls of this context pass (see :func:`limited_by`)."""
    return _in_effect.get()


__all__ = [
    "BEAT_EVERY_S",
    "DEFAULT_PAUSE_S",
    "LEASE_MARGIN_S",
    "MIN_FACTOR",
    "Admission",
    "Lease",
    "Limiter",
    "LimiterBackend",
    "LimiterTimeout",
    "LocalLimiterBackend",
    "Outcome",
    "RouteState",
    "RouteStatus",
    "Ticket",
    "installed",
    "limited_by",
    "normalize_headers",
    "outcome_from_headers",
    "parse_duration",
    "retry_after_s",
    "route_status",
    "while_waiting",
]
