"""The eval cache and per-job signals (fail-fast, cancel), with a Redis and an in-process backend.

Eval cache: an evaluation is a pure function of (model config, rendered prompt, sample, check,
run index) as far as optiflow is concerned, so its compact result is cached under a hash of
those, scoped to the job by default. A greedy step equal to an evaluated set, a redelivered task
and a re-run step then cost no model call.

Signals: a candidate that regressed once is marked so its remaining evaluations are skipped
(fail-fast); a cancelled job is marked so all of its pending evaluations are skipped.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Literal, Protocol

from optiflow.core.evaluation import EvalResult
from optiflow.stores import keys

if TYPE_CHECKING:
    import redis

Skip = Literal["cancelled", "regressed"] | None
CACHE_TTL_S = 7 * 24 * 3600
SIGNAL_TTL_S = 2 * 24 * 3600


def cache_key(payload: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


class EvalCache(Protocol):
    def get(self, scope: str, key: str) -> EvalResult | None: ...

    def put(self, scope: str, key: str, result: EvalResult) -> None: ...

    def clear(self, scope: str) -> None: ...


class JobSignals(Protocol):
    def skip_reason(self, job_id: str, experiment_id: str) -> Skip:
        """Why an evaluation of this experiment should not call the model, if at all."""
        ...

    def mark_regressed(self, job_id: str, experiment_id: str) -> None: ...

    def cancel(self, job_id: str) -> None: ...

    def cancelled(self, job_id: str) -> bool: ...

    def clear(self, job_id: str) -> None: ...


# -- Redis ---------------------------------------------------------------------------------------
class RedisEvalCache:
    def __init__(self, client: redis.Redis[Any], prefix: str, ttl_s: int = CACHE_TTL_S) -> None:
        self.client, self.prefix, self.ttl_s = client, prefix, ttl_s

    def get(self, scope: str, key: str) -> EvalResult | None:
        raw = self.client.get(keys.eval_cache(self.prefix, scope, key))
        return None if raw is None else EvalResult.model_validate_json(raw)

    def put(self, scope: str, key: str, result: EvalResult) -> None:
        self.client.set(
            keys.eval_cache(self.prefix, scope, key), result.compact().model_dump_json(), ex=self.ttl_s
        )

    def clear(self, scope: str) -> None:
        batch = list(self.client.scan_iter(match=keys.eval_cache(self.prefix, scope, "*"), count=1000))
        for i in range(0, len(batch), 500):
            self.client.delete(*batch[i : i + 500])


class RedisJobSignals:
    def __init__(self, client: redis.Redis[Any], prefix: str) -> None:
        self.client, self.prefix = client, prefix

    def skip_reason(self, job_id: str, experiment_id: str) -> Skip:
        cancelled, regressed = self.client.mget(
            keys.cancelled(self.prefix, job_id), keys.regressed(self.prefix, job_id, experiment_id)
        )
        if cancelled is not None:
            return "cancelled"
        return "regressed" if regressed is not None else None

    def mark_regressed(self, job_id: str, experiment_id: str) -> None:
        self.client.set(keys.regressed(self.prefix, job_id, experiment_id), b"1", ex=SIGNAL_TTL_S)

    def cancel(self, job_id: str) -> None:
        self.client.set(keys.cancelled(self.prefix, job_id), b"1", ex=SIGNAL_TTL_S)

    def cancelled(self, job_id: str) -> bool:
        return bool(self.client.exists(keys.cancelled(self.prefix, job_id)))

    def clear(self, job_id: str) -> None:
        flags = list(self.client.scan_iter(match=keys.regressed(self.prefix, job_id, "*"), count=1000))
        self.client.delete(keys.cancelled(self.prefix, job_id), *flags)


# -- in-process (embedded mode) ------------------------------------------------------------------
class MemoryEvalCache:
    def __init__(self, max_entries: int = 200_000) -> None:
        self._data: OrderedDict[tuple[str, str], EvalResult] = OrderedDict()
        self._lock = threading.Lock()
        self.max_entries = max_entries

    def get(self, scope: str, key: str) -> EvalResult | None:
        with self._lock:
            return self._data.get((scope, key))

    def put(self, scope: str, key: str, result: EvalResult) -> None:
        with self._lock:
            self._data[(scope, key)] = result.compact()
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def clear(self, scope: str) -> None:
        with self._lock:
            for k in [k for k in self._data if k[0] == scope]:
                del self._data[k]


class MemoryJobSignals:
    def __init__(self) -> None:
        self._cancelled: set[str] = set()
        self._regressed: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def skip_reason(self, job_id: str, experiment_id: str) -> Skip:
        with self._lock:
            if job_id in self._cancelled:
                return "cancelled"
            return "regressed" if (job_id, experiment_id) in self._regressed else None

    def mark_regressed(self, job_id: str, experiment_id: str) -> None:
        with self._lock:
            self._regressed.add((job_id, experiment_id))

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
