"""Per-process resources of a worker (or of the embedded client): store, jobs, job scratch.

Built lazily from :class:`~optiflow.settings.Settings`. Job specs are immutable after submission,
and temporary tags are written once before their step, so both are memoized per process: an
evaluate task costs one signal check, one cache lookup and the model call.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from optiflow.core.compress import CompressSpec
from optiflow.core.dataset import Sample
from optiflow.core.history import Event
from optiflow.core.jobs import Workflow, parse_spec, workflow_for
from optiflow.core.measure import MeasureSpec
from optiflow.core.optimize.spec import OptimizeSpec
from optiflow.core.overrides import PromptOverrides
from optiflow.distributed.scratch import JobScratch, MemoryJobScratch, RedisJobScratch
from optiflow.errors import ConfigError
from optiflow.persistence import JobRepository
from optiflow.settings import Settings

if TYPE_CHECKING:
    import redis

    from optiflow.stores.base import OverridesStore


log = logging.getLogger(__name__)
JobSpec = CompressSpec | OptimizeSpec | MeasureSpec


class _LRU:
    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[Any, Any] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: Any, make: Any) -> Any:
        with self.lock:
            if key in self.data:
                self.data.move_to_end(key)
                return self.data[key]
        value = make()
        with self.lock:
            self.data[key] = value
            while len(self.data) > self.size:
                self.data.popitem(last=False)
        return value


class Runtime:
    def __init__(self, settings: Settings, *, embedded: bool) -> None:
        self.settings = settings
        self.embedded = embedded
        self._specs = _LRU(64)
        self._samples = _LRU(64)
        self._tags = _LRU(1024)

    @cached_property
    def redis(self) -> redis.Redis[Any]:
        import redis as redis_lib

        if not self.settings.redis_url:
            raise ConfigError("distributed mode needs OPTIFLOW_REDIS_URL", field="OPTIFLOW_REDIS_URL")
        return redis_lib.Redis.from_url(self.settings.redis_url, health_check_interval=30)

    @cached_property
    def store(self) -> OverridesStore:
        from optiflow.stores import open_store

        return open_store(self.settings)

    @cached_property
    def jobs(self) -> JobRepository:
        if not self.settings.database_url:
            self.settings.home.mkdir(parents=True, exist_ok=True)
        return JobRepository(self.settings.effective_database_url)

    @cached_property
    def scratch(self) -> JobScratch:
        if self.embedded:
            return MemoryJobScratch()
        return RedisJobScratch(self.redis, self.settings.key_prefix)

    def publish(self, job_id: str, events: Sequence[Event]) -> None:
        """Publish committed events on Redis pub/sub (distributed mode). Best effort: the events
        table is the record; a consumer that missed a message reads it from there."""
        if self.embedded or not events:
            return
        from optiflow.stores import keys

        channel = keys.events_channel(self.settings.key_prefix, job_id)
        try:
            pipe = self.redis.pipeline(transaction=False)
            for event in events:
                pipe.publish(channel, event.model_dump_json())
            pipe.execute()
        except Exception as exc:
            log.warning("job %s: events not published: %s", job_id, exc)

    # -- memoized per process -------------------------------------------------------------------
    def spec(self, job_id: str) -> JobSpec:
        def load() -> JobSpec:
            return parse_spec(self.jobs.get(job_id).spec)

        spec: JobSpec = self._specs.get(job_id, load)
        return spec

    def workflow(self, job_id: str) -> Workflow:
        return workflow_for(self.spec(job_id), job_id)

    def sample(self, job_id: str, sample_id: str) -> Sample:
        by_id: dict[str, Sample] = self._samples.get(
            job_id, lambda: {s.id: s for s in self.spec(job_id).dataset.samples}
        )
        return by_id[sample_id]

    def overrides(self, ns: str, key: str, tag: str) -> PromptOverrides | None:
        """A temporary tag's content; memoized because it is written once before its step."""
        value: PromptOverrides | None = self._tags.get(
            (ns, key, tag), lambda: self.store.resolve(ns, key, tag)
        )
        return value
