"""Per-job scratch state that evaluations share: the eval cache and the job's signals.

Eval cache: an evaluation is a pure function of (model config, rendered prompt, sample, check,
run index) as far as optiflow is concerned, so its compact result is cached under a hash of
those, scoped to the job. A greedy step equal to an evaluated set, a redelivered task and a
re-run step then cost no model call.

Signals: a candidate that regressed once is marked so its remaining evaluations are skipped
(fail-fast); a cancelled or finished job is marked so all of its pending evaluations are skipped.
A mark skips a *model call*, never an answer already made: :meth:`JobScratch.lookup` returns a
cached result before it reads the regression mark. A step launched again after a crash (its
first chord lost with a killed worker, see ``optiflow.distributed.recovery``) then gets back the
evaluation whose failure set the mark; were the mark read first, every evaluation of that
candidate would come back ``skipped``, the step's results would hold no failure, and the gate
would see a candidate with no run at all and ask for another round, skipped again by the mark,
until the job's step bound.

Progress: the running step's evaluations done / total and the time of the last one (``beat``):
what ``optiflow watch`` draws, and the heartbeat by which recovery finds a stalled job.

Spend: a job with a budget (:class:`~optiflow.core.budget.JobBudget`) keeps its cost, tokens,
calls skipped for the budget and calls charged past it in four counters, added to atomically
(``INCRBYFLOAT`` / ``INCRBY``) by every worker. An evaluation skips its model call once the spend
has reached the budget (skip reason ``budget_exhausted``), then charges what its calls cost.
A check and an add are not one atomic step: calls that passed the check while the job still had
budget finish and are charged, so a job overspends by at most its calls in flight.

An evaluate task touches this state twice, and each touch is ONE round trip on Redis:
:meth:`JobScratch.lookup` before the model call (signals, cache and spend together) and
:meth:`JobScratch.record` after it (cache entry, regression mark and charge together). On this
machine the separate round trips cost about as much as the model call itself.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Literal, Protocol

from optiflow.core.base import Frozen
from optiflow.core.budget import BUDGET_EXHAUSTED, Charge, JobBudget, Spend
from optiflow.core.evaluation import EvalResult
from optiflow.stores import keys

if TYPE_CHECKING:
    import redis

Skip = Literal["cancelled", "regressed", "budget_exhausted"] | None
CACHE_TTL_S = 7 * 24 * 3600
SIGNAL_TTL_S = 2 * 24 * 3600
SPEND_TTL_S = 7 * 24 * 3600
SPEND_COUNTERS = ("usd", "tokens", "skipped", "over")


class Progress(Frozen):
    """The running step's evaluations; ``beat`` is the epoch time of the last one (or of the
    step's launch)."""

    step: int = 0
    total: int = 0
    done: int = 0
    beat: float = 0.0


def cache_key(payload: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


class JobScratch(Protocol):
    def lookup(
        self,
        job_id: str,
        experiment_id: str,
        key: str,
        budget: JobBudget | None = None,
        *,
        probe_step: int | None = None,
    ) -> tuple[Skip, EvalResult | None]:
        """``cancelled`` for a cancelled (or ended) job; else the cached result, if any (whatever
        marks came since: a mark stops model calls, not answers already made); else why the
        evaluation should not call the model: ``regressed`` (its experiment's fail-fast mark), or
        ``budget_exhausted`` when the job's spend has reached ``budget``. The lookup of one of
        step ``probe_step``'s probes marks the step's probes begun, unless one already did."""
        ...

    def record(
        self,
        job_id: str,
        experiment_id: str,
        key: str,
        result: EvalResult | None,
        regressed: bool,
        *,
        charge: Charge | None = None,
        budget: JobBudget | None = None,
        probe_step: int | None = None,
    ) -> None:
        """Count one evaluation done, cache ``result`` (when given), mark the experiment
        regressed (when ``regressed``), add ``charge`` to the job's spend (a charge that ends
        at or past ``budget`` counts as an over call) and, for an evaluation of step
        ``probe_step``'s probe, count it answered."""
        ...

    def probes(self, job_id: str, experiment_id: str, step: int) -> tuple[int, bool, float | None]:
        """Step ``step``'s probe evaluations answered so far, whether an evaluation of
        ``experiment_id`` need not wait for them (its experiment regressed, or the job was
        cancelled or ended), and when the first of them began (epoch seconds; None before)."""
        ...

    def charge(self, job_id: str, charge: Charge, budget: JobBudget | None = None) -> Spend:
        """Add ``charge`` to the job's spend, atomically; the spend after it."""
        ...

    def spend(self, job_id: str) -> Spend:
        """The job's spend so far (zero for a job nothing charged)."""
        ...

    def start_step(self, job_id: str, step: int, total: int) -> None:
        """A step of ``total`` evaluations was launched: progress restarts at 0."""
        ...

    def progress(self, job_id: str) -> Progress | None: ...

    def beat(self, job_id: str) -> None:
        """The running step is alive though no evaluation finished (its calls wait for a rate
        limit): move its ``beat`` to now. Nothing happens for a job with no running step."""
        ...

    def try_lock(self, name: str, ttl_s: float) -> bool:
        """Take the named lock for ``ttl_s`` seconds unless someone holds it."""
        ...

    def cancel(self, job_id: str) -> None:
        """Every pending evaluation of the job is skipped from now on."""
        ...

    def cancelled(self, job_id: str) -> bool: ...

    def clear(self, job_id: str) -> None:
        """Forget the job: its signals, cached results and spend."""
        ...


# Only a step that exists gets its beat moved (HSET alone would create a progress hash).
_BEAT = """
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], 'beat', ARGV[1]) end
return 0
"""


# What ``record`` writes, plus a charge to the job's spend, atomically: one command. (Four more
# commands in record's pipeline cost about 200 µs of client time per evaluation; the script
# about 30.) A spending charge that ends at or past the budget is counted as an over call.
# KEYS: spend usd, tokens, skipped, over; progress; cache entry; regressed mark; probe counter.
# ARGV: cost, tokens, skipped, max cost (-1: none), max tokens (-1: none), spend ttl,
#       done (1: count an evaluation done, with its cache entry and regression mark), beat,
#       cached result ('' none), cache ttl, regressed (0/1), signal ttl, probe (0/1).
_RECORD = """
local cost, tokens, skipped = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local max_cost, max_tokens, ttl = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
if cost > 0 or tokens > 0 then
  local usd = tonumber(redis.call('INCRBYFLOAT', KEYS[1], ARGV[1]))
  local used = redis.call('INCRBY', KEYS[2], tokens)
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[2], ttl)
  if (max_cost >= 0 and usd >= max_cost) or (max_tokens >= 0 and used >= max_tokens) then
    redis.call('INCR', KEYS[4])
    redis.call('EXPIRE', KEYS[4], ttl)
  end
end
if skipped > 0 then
  redis.call('INCRBY', KEYS[3], skipped)
  redis.call('EXPIRE', KEYS[3], ttl)
end
if ARGV[7] == '1' then
  if ARGV[9] ~= '' then redis.call('SET', KEYS[6], ARGV[9], 'EX', ARGV[10]) end
  if ARGV[11] == '1' then redis.call('SET', KEYS[7], '1', 'EX', ARGV[12]) end
  if ARGV[13] == '1' then
    redis.call('INCR', KEYS[8])
    redis.call('EXPIRE', KEYS[8], ARGV[12])
  end
  redis.call('HINCRBY', KEYS[5], 'done', 1)
  redis.call('HSET', KEYS[5], 'beat', ARGV[8])
end
return 0
"""


class RedisJobScratch:
    def __init__(self, client: redis.Redis[Any], prefix: str, cache_ttl_s: int = CACHE_TTL_S) -> None:
        self.client, self.prefix, self.cache_ttl_s = client, prefix, cache_ttl_s
        self._beat = client.register_script(_BEAT)
        self._record = client.register_script(_RECORD)

    def lookup(
        self,
        job_id: str,
        experiment_id: str,
        key: str,
        budget: JobBudget | None = None,
        *,
        probe_step: int | None = None,
    ) -> tuple[Skip, EvalResult | None]:
        names = [
            keys.cancelled(self.prefix, job_id),
            keys.regressed(self.prefix, job_id, experiment_id),
            keys.eval_cache(self.prefix, job_id, key),
        ]
        if budget is not None:
            names += [keys.spend(self.prefix, job_id, "usd"), keys.spend(self.prefix, job_id, "tokens")]
        if probe_step is None:
            found = self.client.mget(names)
        else:  # the same round trip marks the probes begun
            pipe = self.client.pipeline(transaction=False)
            pipe.mget(names)
            began = keys.probing(self.prefix, job_id, probe_step)
            pipe.set(began, repr(time.time()), nx=True, ex=SIGNAL_TTL_S)
            found = pipe.execute()[0]
        cancelled, regressed, cached, *spent = found
        if cancelled is not None:
            return "cancelled", None
        if cached is not None:
            return None, EvalResult.model_validate_json(cached)
        if regressed is not None:
            return "regressed", None
        if budget is not None and budget.exhausted_by(float(spent[0] or 0), int(spent[1] or 0)):
            return BUDGET_EXHAUSTED, None
        return None, None

    def record(
        self,
        job_id: str,
        experiment_id: str,
        key: str,
        result: EvalResult | None,
        regressed: bool,
        *,
        charge: Charge | None = None,
        budget: JobBudget | None = None,
        probe_step: int | None = None,
    ) -> None:
        if charge is not None:  # the same writes and the charge, in one script
            self._charge(
                job_id,
                charge,
                budget,
                done=True,
                key=key,
                result=result,
                experiment_id=experiment_id,
                regressed=regressed,
                probe_step=probe_step,
            )
            return
        pipe = self.client.pipeline(transaction=False)
        if result is not None:
            pipe.set(
                keys.eval_cache(self.prefix, job_id, key),
                result.compact().model_dump_json(),
                ex=self.cache_ttl_s,
            )
        if regressed:
            pipe.set(keys.regressed(self.prefix, job_id, experiment_id), b"1", ex=SIGNAL_TTL_S)
        if probe_step is not None:
            probed = keys.probed(self.prefix, job_id, probe_step)
            pipe.incr(probed)
            pipe.expire(probed, SIGNAL_TTL_S)
        progress = keys.progress(self.prefix, job_id)
        pipe.hincrby(progress, "done", 1)
        pipe.hset(progress, "beat", repr(time.time()))
        pipe.execute()

    def probes(self, job_id: str, experiment_id: str, step: int) -> tuple[int, bool, float | None]:
        probed, regressed, cancelled, began = self.client.mget(
            [
                keys.probed(self.prefix, job_id, step),
                keys.regressed(self.prefix, job_id, experiment_id),
                keys.cancelled(self.prefix, job_id),
                keys.probing(self.prefix, job_id, step),
            ]
        )
        stop = regressed is not None or cancelled is not None
        return int(probed or 0), stop, None if began is None else float(began)

    def charge(self, job_id: str, charge: Charge, budget: JobBudget | None = None) -> Spend:
        self._charge(job_id, charge, budget)
        return self.spend(job_id)

    def _charge(
        self,
        job_id: str,
        charge: Charge,
        budget: JobBudget | None,
        *,
        done: bool = False,
        key: str = "",
        result: EvalResult | None = None,
        experiment_id: str = "",
        regressed: bool = False,
        probe_step: int | None = None,
    ) -> None:
        """The :data:`_RECORD` script: the charge, and (``done``) what :meth:`record` writes."""
        self._record(
            keys=[
                *(keys.spend(self.prefix, job_id, name) for name in SPEND_COUNTERS),
                keys.progress(self.prefix, job_id),
                keys.eval_cache(self.prefix, job_id, key),
                keys.regressed(self.prefix, job_id, experiment_id),
                keys.probed(self.prefix, job_id, probe_step or 0),
            ],
            args=[
                repr(charge.cost_usd),
                charge.tokens,
                charge.skipped,
                -1 if budget is None or budget.max_cost_usd is None else repr(budget.max_cost_usd),
                -1 if budget is None or budget.max_tokens is None else budget.max_tokens,
                SPEND_TTL_S,
                int(done),
                repr(time.time()),
                "" if result is None else result.compact().model_dump_json(),
                self.cache_ttl_s,
                int(regressed),
                SIGNAL_TTL_S,
                int(probe_step is not None),
            ],
        )

    def spend(self, job_id: str) -> Spend:
        usd, tokens, skipped, over = self.client.mget(
            [keys.spend(self.prefix, job_id, name) for name in SPEND_COUNTERS]
        )
        return Spend(
            cost_usd=float(usd or 0),
            tokens=int(tokens or 0),
            skipped=int(skipped or 0),
            over_calls=int(over or 0),
        )

    def start_step(self, job_id: str, step: int, total: int) -> None:
        progress = keys.progress(self.prefix, job_id)
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(progress, mapping={"step": step, "total": total, "done": 0, "beat": repr(time.time())})
        pipe.expire(progress, SIGNAL_TTL_S)
        pipe.execute()

    def progress(self, job_id: str) -> Progress | None:
        raw = self.client.hgetall(keys.progress(self.prefix, job_id))
        if not raw:
            return None
        return Progress.model_validate({k.decode(): v.decode() for k, v in raw.items()})

    def beat(self, job_id: str) -> None:
        self._beat(keys=[keys.progress(self.prefix, job_id)], args=[repr(time.time())])

    def try_lock(self, name: str, ttl_s: float) -> bool:
        return bool(self.client.set(keys.lock(self.prefix, name), b"1", nx=True, px=int(ttl_s * 1000)))

    def cancel(self, job_id: str) -> None:
        self.client.set(keys.cancelled(self.prefix, job_id), b"1", ex=SIGNAL_TTL_S)

    def cancelled(self, job_id: str) -> bool:
        return bool(self.client.exists(keys.cancelled(self.prefix, job_id)))

    def clear(self, job_id: str) -> None:
        found = [keys.cancelled(self.prefix, job_id)]
        found.append(keys.progress(self.prefix, job_id))
        found += [keys.spend(self.prefix, job_id, name) for name in SPEND_COUNTERS]
        for pattern in (
            keys.regressed(self.prefix, job_id, "*"),
            keys.probed(self.prefix, job_id, "*"),
            keys.probing(self.prefix, job_id, "*"),
            keys.eval_cache(self.prefix, job_id, "*"),
        ):
            found += self.client.scan_iter(match=pattern, count=1000)
        for i in range(0, len(found), 500):
            self.client.delete(*found[i : i + 500])


class MemoryJobScratch:
    """In-process scratch for the embedded mode (one process runs the client and the worker)."""

    def __init__(self, max_entries: int = 200_000) -> None:
        self._cache: OrderedDict[tuple[str, str], EvalResult] = OrderedDict()
        self._cancelled: set[str] = set()
        self._regressed: set[tuple[str, str]] = set()
        self._probed: dict[tuple[str, int], int] = {}
        self._probing: dict[tuple[str, int], float] = {}
        self._progress: dict[str, Progress] = {}
        self._spend: dict[str, Spend] = {}
        self._locks: dict[str, float] = {}
        self._lock = threading.Lock()
        self.max_entries = max_entries

    def lookup(
        self,
        job_id: str,
        experiment_id: str,
        key: str,
        budget: JobBudget | None = None,
        *,
        probe_step: int | None = None,
    ) -> tuple[Skip, EvalResult | None]:
        with self._lock:
            if probe_step is not None:
                self._probing.setdefault((job_id, probe_step), time.time())
            if job_id in self._cancelled:
                return "cancelled", None
            cached = self._cache.get((job_id, key))
            if cached is not None:
                return None, cached
            if (job_id, experiment_id) in self._regressed:
                return "regressed", None
            spent = self._spend.get(job_id, Spend())
            if budget is not None and budget.exhausted_by(spent.cost_usd, spent.tokens):
                return BUDGET_EXHAUSTED, None
            return None, None

    def record(
        self,
        job_id: str,
        experiment_id: str,
        key: str,
        result: EvalResult | None,
        regressed: bool,
        *,
        charge: Charge | None = None,
        budget: JobBudget | None = None,
        probe_step: int | None = None,
    ) -> None:
        if charge is not None:
            self.charge(job_id, charge, budget)
        with self._lock:
            if probe_step is not None:
                self._probed[(job_id, probe_step)] = self._probed.get((job_id, probe_step), 0) + 1
            if result is not None:
                self._cache[(job_id, key)] = result.compact()
                while len(self._cache) > self.max_entries:
                    self._cache.popitem(last=False)
            if regressed:
                self._regressed.add((job_id, experiment_id))
            p = self._progress.get(job_id, Progress())
            self._progress[job_id] = p.model_copy(update={"done": p.done + 1, "beat": time.time()})

    def probes(self, job_id: str, experiment_id: str, step: int) -> tuple[int, bool, float | None]:
        with self._lock:
            stop = job_id in self._cancelled or (job_id, experiment_id) in self._regressed
            return self._probed.get((job_id, step), 0), stop, self._probing.get((job_id, step))

    def charge(self, job_id: str, charge: Charge, budget: JobBudget | None = None) -> Spend:
        with self._lock:
            s = self._spend.get(job_id, Spend())
            cost, tokens = s.cost_usd + charge.cost_usd, s.tokens + charge.tokens
            over = budget is not None and charge.spends and budget.exhausted_by(cost, tokens)
            s = Spend(
                cost_usd=cost,
                tokens=tokens,
                skipped=s.skipped + charge.skipped,
                over_calls=s.over_calls + over,
            )
            self._spend[job_id] = s
            return s

    def spend(self, job_id: str) -> Spend:
        with self._lock:
            return self._spend.get(job_id, Spend())

    def start_step(self, job_id: str, step: int, total: int) -> None:
        with self._lock:
            self._progress[job_id] = Progress(step=step, total=total, done=0, beat=time.time())

    def progress(self, job_id: str) -> Progress | None:
        with self._lock:
            return self._progress.get(job_id)

    def beat(self, job_id: str) -> None:
        with self._lock:
            p = self._progress.get(job_id)
            if p is not None:
                self._progress[job_id] = p.model_copy(update={"beat": time.time()})

    def try_lock(self, name: str, ttl_s: float) -> bool:
        now = time.monotonic()
        with self._lock:
            if self._locks.get(name, 0.0) > now:
                return False
            self._locks[name] = now + ttl_s
            return True

    def cancel(self, job_id: str) -> None:
        with self._lock:
            self._cancelled.add(job_id)

    def cancelled(self, job_id: str) -> bool:
        with self._lock:
            return job_id in self._cancelled

    def clear(self, job_id: str) -> None:
        with self._lock:
            self._cancelled.discard(job_id)
            self._regressed = {x for x in self._regressed if x[0] != job_id}
            self._probed = {k: v for k, v in self._probed.items() if k[0] != job_id}
            self._probing = {k: v for k, v in self._probing.items() if k[0] != job_id}
            self._progress.pop(job_id, None)
            self._spend.pop(job_id, None)
            for k in [k for k in self._cache if k[0] == job_id]:
                del self._cache[k]
