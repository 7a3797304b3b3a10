"""Per-job scratch state that evaluations share: the eval cache and the job's signals.

Eval cache: an evaluation is a pure function of (model config, rendered prompt, sample, check,
run index) as far as optiflow is concerned, so its compact result is cached under a hash of
those, scoped to the job. A greedy step equal to an evaluated set, a redelivered task and a
re-run step then cost no model call.

Signals: a candidate that regressed once is marked so its remaining evaluations are skipped
(fail-fast); a cancelled or finished job is marked so all of its pending evaluations are skipped.

Progress: the running step's evaluations done / total and the time of the last one (``beat``):
what ``optiflow watch`` draws, and the heartbeat by which recovery finds a stalled job.

An evaluate task touches this state twice, and each touch is ONE round trip on Redis:
:meth:`JobScratch.lookup` before the model call (signals and cache together) and
:meth:`JobScratch.record` after it (cache entry and regression mark together). On this machine
the separate round trips cost about as much as the model call itself.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Literal, Protocol

from optiflow.core.base import Frozen
from optiflow.core.evaluation import EvalResult
from optiflow.stores import keys

if TYPE_CHECKING:
    import redis

Skip = Literal["cancelled", "regressed"] | None
CACHE_TTL_S = 7 * 24 * 3600
SIGNAL_TTL_S = 2 * 24 * 3600


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
    def lookup(self, job_id: str, experiment_id: str, key: str) -> tuple[Skip, EvalResult | None]:
        """Why an evaluation should not call the model (cancelled, regressed), else its cached
        result if any."""
        ...

    def record(
        self, job_id: str, experiment_id: str, key: str, result: EvalResult | None, regressed: bool
    ) -> None:
        """Count one evaluation done, cache ``result`` (when given) and mark the experiment
        regressed (when ``regressed``)."""
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
        """Forget the job's signals and cached results (a resumed job starts clean)."""
        ...


# Only a step that exists gets its beat moved (HSET alone would create a progress hash).
_BEAT = """
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], 'beat', ARGV[1]) end
return 0
"""


class RedisJobScratch:
    def __init__(self, client: redis.Redis[Any], prefix: str, cache_ttl_s: int = CACHE_TTL_S) -> None:
        self.client, self.prefix, self.cache_ttl_s = client, prefix, cache_ttl_s
        self._beat = client.register_script(_BEAT)

    def lookup(self, job_id: str, experiment_id: str, key: str) -> tuple[Skip, EvalResult | None]:
        cancelled, regressed, cached = self.client.mget(
            keys.cancelled(self.prefix, job_id),
            keys.regressed(self.prefix, job_id, experiment_id),
            keys.eval_cache(self.prefix, job_id, key),
        )
        if cancelled is not None:
            return "cancelled", None
        if regressed is not None:
            return "regressed", None
        return None, None if cached is None else EvalResult.model_validate_json(cached)

    def record(
        self, job_id: str, experiment_id: str, key: str, result: EvalResult | None, regressed: bool
    ) -> None:
        pipe = self.client.pipeline(transaction=False)
        if result is not None:
            pipe.set(
                keys.eval_cache(self.prefix, job_id, key),
                result.compact().model_dump_json(),
                ex=self.cache_ttl_s,
            )
        if regressed:
            pipe.set(keys.regressed(self.prefix, job_id, experiment_id), b"1", ex=SIGNAL_TTL_S)
        progress = keys.progress(self.prefix, job_id)
        pipe.hincrby(progress, "done", 1)
        pipe.hset(progress, "beat", repr(time.time()))
        pipe.execute()

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
        for pattern in (keys.regressed(self.prefix, job_id, "*"), keys.eval_cache(self.prefix, job_id, "*")):
            found += self.client.scan_iter(match=pattern, count=1000)
        for i in range(0, len(found), 500):
            self.client.delete(*found[i : i + 500])


class MemoryJobScratch:
    """In-process scratch for the embedded mode (one process runs the client and the worker)."""

    def __init__(self, max_entries: int = 200_000) -> None:
        self._cache: OrderedDict[tuple[str, str], EvalResult] = OrderedDict()
        self._cancelled: set[str] = set()
        self._regressed: set[tuple[str, str]] = set()
        self._progress: dict[str, Progress] = {}
        self._locks: dict[str, float] = {}
        self._lock = threading.Lock()
        self.max_entries = max_entries

    def lookup(self, job_id: str, experiment_id: str, key: str) -> tuple[Skip, EvalResult | None]:
        with self._lock:
            if job_id in self._cancelled:
                return "cancelled", None
            if (job_id, experiment_id) in self._regressed:
                return "regressed", None
            return None, self._cache.get((job_id, key))

    def record(
        self, job_id: str, experiment_id: str, key: str, result: EvalResult | None, regressed: bool
    ) -> None:
        with self._lock:
            if result is not None:
                self._cache[(job_id, key)] = result.compact()
                while len(self._cache) > self.max_entries:
                    self._cache.popitem(last=False)
            if regressed:
                self._regressed.add((job_id, experiment_id))
            p = self._progress.get(job_id, Progress())
            self._progress[job_id] = p.model_copy(update={"done": p.done + 1, "beat": time.time()})

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
            self._progress.pop(job_id, None)
            for k in [k for k in self._cache if k[0] == job_id]:
                del self._cache[k]
