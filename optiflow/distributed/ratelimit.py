"""The fleet-wide limiter: :class:`RedisLimiterBackend`, and building / installing a limiter from
settings for a worker (or the embedded client, with the in-process backend).

The Lua scripts are :class:`optiflow.llm.limiter.RouteState`'s methods, run atomically in Redis
on Redis's clock (``TIME``), so every worker of every host sees one bucket per route and clock
skew between hosts does not matter. Per route, two keys sharing the Redis Cluster hash tag
``{name}``: a hash with the TATs, the epoch, the pause and the rate factor, and a sorted set of
concurrency leases (member = lease id, score = expiry). Both expire a day after the last call.

:func:`spend` is the shared primitive for budgets: an atomic "add this much unless it passes the
cap" on one counter (a later job budget charges its tokens or dollars with it).
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from optiflow.core.rate_limits import ModelLimits, RouteLimit
from optiflow.llm.limiter import (
    DEFAULT_PAUSE_S,
    MIN_FACTOR,
    POLL_S,
    STATE_TTL_S,
    Admission,
    Lease,
    Limiter,
    LocalLimiterBackend,
    Outcome,
    RouteStatus,
    Ticket,
    route_status,
)

if TYPE_CHECKING:
    import redis

    from optiflow.settings import Settings

log = logging.getLogger(__name__)

# Shared prologue: the clock, the state, the effective rates (per second).
_PROLOGUE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local s = redis.call('HMGET', KEYS[1], 'rtat', 'ttat', 'epoch', 'pause_until', 'factor',
  'prov_rpm', 'prov_tpm', 'last_adjust', 'last_decrease', 'calm_after')
local rtat = tonumber(s[1]) or 0
local ttat = tonumber(s[2]) or 0
local epoch = tonumber(s[3]) or 0
local pause_until = tonumber(s[4]) or 0
local factor = tonumber(s[5]) or 1
local prov_rpm = tonumber(s[6])
local prov_tpm = tonumber(s[7])
local last_adjust = tonumber(s[8]) or 0
local last_decrease = tonumber(s[9]) or 0
local calm_after = tonumber(s[10])
local function f(x) return string.format('%.6f', x) end
local function per_s(rate, prov)
  if rate <= 0 then return 0 end
  if prov and prov < rate then rate = prov end
  return rate * factor / 60
end
"""

# KEYS: state, leases. ARGV: rpm, tpm, concurrency (0 = none), burst_s, tokens, lease id,
# lease seconds, ticket epoch (-1 = none), ticket time, ttl, poll seconds.
# Returns {admitted 0/1, wait seconds, ticket epoch (-1 = none), ticket time, now}.
_ACQUIRE = (
    _PROLOGUE
    + """
local rpm, tpm, conc = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local burst_s, tokens = tonumber(ARGV[4]), tonumber(ARGV[5])
local lease_id, lease_s = ARGV[6], tonumber(ARGV[7])
local tk_epoch, tk_at = tonumber(ARGV[8]), tonumber(ARGV[9])
local ttl, poll = tonumber(ARGV[10]), tonumber(ARGV[11])
if pause_until > now then
  return {0, f(pause_until - now), -1, '0', f(now)}
end
if tk_epoch ~= epoch then
  local at = now
  local rr, tr = per_s(rpm, prov_rpm), per_s(tpm, prov_tpm)
  if rr > 0 then
    local br = math.max(1, rr * burst_s)
    at = math.max(at, rtat - (br - 1) / rr)
  end
  if tr > 0 and tokens > 0 then
    local bt = math.max(1, tr * burst_s)
    at = math.max(at, ttat - (bt - math.min(tokens, bt)) / tr)
  end
  if rr > 0 then rtat = math.max(rtat, at) + 1 / rr end
  if tr > 0 and tokens > 0 then ttat = math.max(ttat, at) + tokens / tr end
  redis.call('HSET', KEYS[1], 'rtat', f(rtat), 'ttat', f(ttat), 'epoch', epoch)
  redis.call('EXPIRE', KEYS[1], ttl)
  tk_epoch, tk_at = epoch, at
end
if tk_at > now then
  return {0, f(tk_at - now), tk_epoch, f(tk_at), f(now)}
end
if conc > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  if redis.call('ZCARD', KEYS[2]) >= conc then
    local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    return {0, f(math.min(poll, tonumber(first[2]) - now)), tk_epoch, f(tk_at), f(now)}
  end
  redis.call('ZADD', KEYS[2], now + lease_s, lease_id)
  redis.call('EXPIRE', KEYS[2], ttl)
end
return {1, '0', tk_epoch, f(tk_at), f(now)}
"""
)

# KEYS: state, leases. ARGV: rpm, tpm, burst_s, recover_s, lease id, admitted at, tokens charged,
# status (ok / rate_limited / error), tokens used (-1 = unknown), retry after (-1 = none),
# pause seconds, provider rpm (-1), provider tpm (-1), ttl, default pause, min factor.
_RELEASE = (
    _PROLOGUE
    + """
local rpm, tpm = tonumber(ARGV[1]), tonumber(ARGV[2])
local burst_s, recover_s = tonumber(ARGV[3]), tonumber(ARGV[4])
local lease_id, admitted_at, charged = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local status, used, retry_after = ARGV[8], tonumber(ARGV[9]), tonumber(ARGV[10])
local pause, p_rpm, p_tpm = tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13])
local ttl, default_pause, min_factor = tonumber(ARGV[14]), tonumber(ARGV[15]), tonumber(ARGV[16])
redis.call('ZREM', KEYS[2], lease_id)
if p_rpm > 0 and rpm > 0 and p_rpm < rpm then prov_rpm = p_rpm else prov_rpm = nil end
if p_tpm > 0 and tpm > 0 and p_tpm < tpm then prov_tpm = p_tpm else prov_tpm = nil end
local rr, tr = per_s(rpm, prov_rpm), per_s(tpm, prov_tpm)
if status == 'rate_limited' then used = 0 end
if used >= 0 and tr > 0 and used ~= charged then ttat = ttat + (used - charged) / tr end
if status == 'ok' and factor < 1 and admitted_at >= last_decrease then
  factor = math.min(1, factor + (now - last_adjust) / (2 * recover_s))
  last_adjust = now
end
if status == 'rate_limited' then
  if calm_after and admitted_at >= calm_after then
    factor = math.max(min_factor, factor / 2)
    last_decrease, last_adjust = now, now
  end
  if retry_after >= 0 then pause = retry_after else pause = default_pause end
end
if pause > 0 then
  local e = math.max(pause_until, now + pause)
  pause_until = e
  epoch = epoch + 1
  rr, tr = per_s(rpm, prov_rpm), per_s(tpm, prov_tpm)
  if rr > 0 then rtat = e + (math.max(1, rr * burst_s) - 1) / rr end
  if tr > 0 then ttat = e + (math.max(1, tr * burst_s) - 1) / tr end
  if status == 'rate_limited' then calm_after = e end
end
redis.call('HSET', KEYS[1], 'rtat', f(rtat), 'ttat', f(ttat), 'epoch', epoch, 'pause_until', f(pause_until),
  'factor', f(factor), 'last_adjust', f(last_adjust), 'last_decrease', f(last_decrease))
if calm_after then redis.call('HSET', KEYS[1], 'calm_after', f(calm_after)) end
for name, value in pairs({prov_rpm = prov_rpm or false, prov_tpm = prov_tpm or false}) do
  if value then redis.call('HSET', KEYS[1], name, f(value)) else redis.call('HDEL', KEYS[1], name) end
end
redis.call('EXPIRE', KEYS[1], ttl)
return f(now)
"""
)

# KEYS: state, leases. ARGV: rpm, tpm, burst_s.
# Returns {factor, provider rpm (-1), provider tpm (-1), paused seconds, in flight, backlog seconds}.
_STATUS = (
    _PROLOGUE
    + """
local rpm, tpm, burst_s = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local rr = per_s(rpm, prov_rpm)
local backlog = 0
if rr > 0 then backlog = math.max(0, rtat - (math.max(1, rr * burst_s) - 1) / rr - now) end
local in_flight = redis.call('ZCOUNT', KEYS[2], '(' .. f(now), '+inf')
local paused = math.max(0, pause_until - now)
return {f(factor), f(prov_rpm or -1), f(prov_tpm or -1), f(paused), in_flight, f(backlog)}
"""
)

# KEYS: counter. ARGV: amount, cap (negative = none), ttl seconds (0 = keep).
# Returns {spent 0/1, total after (or as it stands when refused)}.
_SPEND = """
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local amount, cap, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if cap >= 0 and amount > 0 and cur + amount > cap then
  return {0, string.format('%.6f', cur)}
end
local new = redis.call('INCRBYFLOAT', KEYS[1], amount)
if ttl > 0 then redis.call('EXPIRE', KEYS[1], ttl) end
return {1, new}
"""


def route_keys(prefix: str, route: str) -> tuple[str, str]:
    """The route's state hash and lease set (one Redis Cluster slot: the ``{route}`` hash tag)."""
    scope = f"{prefix}:limit:{{{route}}}"
    return f"{scope}:state", f"{scope}:leases"


class RedisLimiterBackend:
    """Every route's state in Redis, shared by every worker of the fleet."""

    shared = True

    def __init__(self, client: redis.Redis[Any], prefix: str) -> None:
        self.client, self.prefix = client, prefix
        self._acquire = client.register_script(_ACQUIRE)
        self._release = client.register_script(_RELEASE)
        self._status = client.register_script(_STATUS)

    def acquire(self, route: RouteLimit, *, tokens: int, lease_s: float, ticket: Ticket | None) -> Admission:
        lease_id = uuid.uuid4().hex
        admitted, wait, epoch, at, now = self._acquire(
            keys=route_keys(self.prefix, route.name),
            args=[
                route.rpm or 0,
                route.tpm or 0,
                route.concurrency or 0,
                route.burst_s,
                tokens,
                lease_id,
                lease_s,
                -1 if ticket is None else ticket.epoch,
                0 if ticket is None else repr(ticket.at),
                STATE_TTL_S,
                POLL_S,
            ],
        )
        if int(admitted):
            return Admission(
                lease=Lease(route=route.name, id=lease_id, admitted_at=float(now), tokens=tokens)
            )
        kept = None if int(epoch) < 0 else Ticket(epoch=int(epoch), at=float(at))
        return Admission(wait_s=float(wait), ticket=kept)

    def release(self, route: RouteLimit, lease: Lease, outcome: Outcome) -> None:
        self._release(
            keys=route_keys(self.prefix, route.name),
            args=[
                route.rpm or 0,
                route.tpm or 0,
                route.burst_s,
                route.recover_s,
                lease.id,
                repr(lease.admitted_at),
                lease.tokens,
                outcome.status,
                -1 if outcome.tokens_used is None else outcome.tokens_used,
                -1 if outcome.retry_after_s is None else outcome.retry_after_s,
                outcome.pause_s,
                outcome.provider_rpm or -1,
                outcome.provider_tpm or -1,
                STATE_TTL_S,
                DEFAULT_PAUSE_S,
                MIN_FACTOR,
            ],
        )

    def status(self, route: RouteLimit) -> RouteStatus:
        factor, p_rpm, p_tpm, paused, in_flight, backlog = self._status(
            keys=route_keys(self.prefix, route.name), args=[route.rpm or 0, route.tpm or 0, route.burst_s]
        )
        return route_status(
            route,
            factor=float(factor),
            provider_rpm=float(p_rpm) if float(p_rpm) > 0 else None,
            provider_tpm=float(p_tpm) if float(p_tpm) > 0 else None,
            paused_s=float(paused),
            in_flight=int(in_flight),
            backlog_s=float(backlog),
            shared=True,
        )

    def clear(self, route: RouteLimit) -> None:
        self.client.delete(*route_keys(self.prefix, route.name))


def spend(
    client: redis.Redis[Any], key: str, amount: float, cap: float | None, ttl_s: int = 0
) -> tuple[bool, float]:
    """Add ``amount`` to the counter at ``key`` unless that takes it past ``cap`` (None: no cap),
    atomically across the fleet: (spent, the total after, or as it stands when refused). A
    negative amount (a refund) is always applied."""
    script = client.register_script(_SPEND)
    ok, total = script(keys=[key], args=[amount, -1 if cap is None else cap, ttl_s])
    return bool(int(ok)), float(total)


# -- from settings ------------------------------------------------------------------------------------
def build_limiter(settings: Settings, *, embedded: bool, limits: ModelLimits | None = None) -> Limiter | None:
    """The limiter for these settings: None without routes; the in-process backend when
    embedded; else the Redis backend on ``OPTIFLOW_REDIS_URL`` under the key prefix."""
    limits = settings.limits() if limits is None else limits
    if not limits:
        return None
    if embedded or not settings.redis_url:
        return Limiter(limits, LocalLimiterBackend(), max_wait_s=settings.limit_max_wait_s)
    import redis as redis_lib

    client = redis_lib.Redis.from_url(settings.redis_url, health_check_interval=30)
    return Limiter(
        limits, RedisLimiterBackend(client, settings.key_prefix), max_wait_s=settings.limit_max_wait_s
    )


def startup_lines(settings: Settings, *, embedded: bool = False) -> list[str]:
    """What a worker says about its limits when it starts (one line per route)."""
    limits = settings.limits()
    if not limits:
        return [
            "model limits: none (set OPTIFLOW_MODEL_LIMITS to share requests / tokens per minute and "
            "concurrency per model across the fleet)"
        ]
    where = "in this process" if embedded or not settings.redis_url else "shared by the fleet in Redis"
    lines = [f"model limits ({where}, max wait {settings.limit_max_wait_s:g} s):"]
    lines += [f"  {route.describe()}" for route in limits.routes]
    return lines


def describe(settings: Settings, limiter: Limiter | None = None) -> list[dict[str, Any]]:
    """Every configured route with its live state (Redis when distributed), as JSON: what the
    page shows. Without a reachable Redis, the configuration alone."""
    limits = settings.limits()
    if limiter is None:
        limiter = build_limiter(settings, embedded=not settings.distributed, limits=limits)
    if limiter is None:
        return []
    out = []
    for route in limits.routes:
        try:
            state = limiter.backend.status(route)
        except Exception as exc:  # Redis down: the configuration is still worth showing
            log.warning("limits of %s: live state unavailable: %s", route.name, exc)
            state = route_status(route, shared=limiter.backend.shared)
        out.append(state.model_dump(mode="json"))
    return out


__all__ = [
    "RedisLimiterBackend",
    "build_limiter",
    "describe",
    "route_keys",
    "spend",
    "startup_lines",
]
