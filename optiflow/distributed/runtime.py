"""Per-process resources of a worker (or of the embedded client): store, jobs, job scratch.

Built lazily from :class:`~optiflow.settings.Settings`. Job specs are immutable after submission,
and temporary tags are written once before their step, so both are memoized per process: an
evaluate task costs one signal check, one cache lookup and the model call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from optiflow.core.dataset import Sample
from optiflow.core.kinds import AnySpec, parse_spec, workflow_for
from optiflow.core.memo import DigestCache, approx_size
from optiflow.core.overrides import PromptOverrides
from optiflow.core.records import Event
from optiflow.core.workflow import Workflow
from optiflow.distributed.scratch import JobScratch, MemoryJobScratch, RedisJobScratch
from optiflow.errors import ConfigError
from optiflow.persistence import JobRepository
from optiflow.settings import Settings

if TYPE_CHECKING:
    import redis

    from optiflow.llm.limiter import Limiter
    from optiflow.stores.base import OverridesStore


log = logging.getLogger(__name__)


SPEC_CACHE_BYTES = 64 * 1024 * 1024
"""About what a process keeps of its jobs' specs (and the samples and workflows derived from them):
a job's spec can be megabytes, so the memo is capped by their size, not only by their number."""


class Listener(Protocol):
    def wait(self, timeout: float) -> None: ...


class _LocalEvents:
    """Embedded mode: events published in this process wake its listeners."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.generation = 0

    def notify(self) -> None:
        with self.cond:
            self.generation += 1
            self.cond.notify_all()

    def listener(self) -> Listener:
        events = self
        seen = self.generation

        class _Local:
            def wait(self, timeout: float) -> None:
                nonlocal seen
                with events.cond:
                    if events.generation == seen:
                        events.cond.wait(timeout)
                    seen = events.generation

        return _Local()


class _RedisListener:
    """Distributed mode: the job's events channel. Subscribed before the first read of the job's
    row, so a run_finished published after that read is not missed; if Redis is unreachable it
    degrades to a sleep (the caller reads the row again after it)."""

    def __init__(self, rt: Runtime, job_id: str) -> None:
        from optiflow.stores import keys

        self.pubsub: Any = None
        try:
            pubsub = rt.redis.pubsub(ignore_subscribe_messages=True)
            pubsub.subscribe(keys.events_channel(rt.settings.key_prefix, job_id))
            self.pubsub = pubsub
        except Exception as exc:
            log.warning("job %s: events not followed (%s); polling the database", job_id, exc)

    def wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if self.pubsub is None:
                time.sleep(left)
                return
            try:
                message = self.pubsub.get_message(timeout=left)
            except Exception as exc:
                log.warning("events channel lost (%s); polling the database", exc)
                self.close()
                continue
            if message is not None and b'"run_finished"' in message.get("data", b""):
                return

    def close(self) -> None:
        if self.pubsub is not None:
            with suppress(Exception):
                self.pubsub.close()
            self.pubsub = None


class Runtime:
    def __init__(self, settings: Settings, *, embedded: bool) -> None:
        self.settings = settings
        self.embedded = embedded
        # keyed by job id; each costs about its stored spec's size (see spec())
        self._specs: DigestCache[Any] = DigestCache(SPEC_CACHE_BYTES, max_entries=64)
        self._samples: DigestCache[Any] = DigestCache(SPEC_CACHE_BYTES, max_entries=64)
        self._workflows: DigestCache[Any] = DigestCache(SPEC_CACHE_BYTES, max_entries=64)
        self._spec_bytes: dict[str, int] = {}
        self._tags: DigestCache[Any] = DigestCache(SPEC_CACHE_BYTES, max_entries=1024)

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
            self.settings.ensure_home()
        return JobRepository(self.settings.effective_database_url)

    @cached_property
    def limiter(self) -> Limiter | None:
        """The model routes' limiter every model call of this runtime's tasks passes (None: no
        limits configured): in this process when embedded, shared in Redis by the fleet."""
        from optiflow.distributed.ratelimit import build_limiter

        return build_limiter(self.settings, embedded=self.embedded)

    @cached_property
    def scratch(self) -> JobScratch:
        if self.embedded:
            return MemoryJobScratch()
        return RedisJobScratch(self.redis, self.settings.key_prefix)

    def publish(self, job_id: str, events: Sequence[Event]) -> None:
        """Publish committed events: on Redis pub/sub (distributed mode), to this process's
        listeners (embedded). Best effort: the events table is the record; a consumer that missed
        a message reads it from there."""
        if not events:
            return
        if self.embedded:
            self._local_events.notify()
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

    @contextmanager
    def listen(self, job_id: str) -> Iterator[Listener]:
        """Wake-ups for a job's published events while the block runs: ``wait(timeout)``
        returns when the job's ``run_finished`` is published, or after ``timeout`` seconds. A
        hint only (a message can be lost); the job's row says whether it ended."""
        if self.embedded:
            yield self._local_events.listener()
            return
        listener = _RedisListener(self, job_id)
        try:
            yield listener
        finally:
            listener.close()

    @cached_property
    def _local_events(self) -> _LocalEvents:
        return _LocalEvents()

    # -- memoized per process -------------------------------------------------------------------
    def _cost(self, job_id: str) -> Callable[[Any], int]:
        return lambda _value: self._spec_bytes.get(job_id, 1024)

    def spec(self, job_id: str) -> AnySpec:
        def load() -> AnySpec:
            raw = self.jobs.get(job_id).spec
            spec = parse_spec(raw)
            self._spec_bytes[job_id] = approx_size(raw)
            while len(self._spec_bytes) > 1024:  # sizes of jobs long gone
                self._spec_bytes.pop(next(iter(self._spec_bytes)))
            return spec

        spec: AnySpec = self._specs.get(job_id, load, self._cost(job_id))
        return spec

    def workflow(self, job_id: str) -> Workflow[Any]:
        """A workflow holds only its job's immutable spec (and what it derives from it, such as
        the dataset's word weights for probes): one per job and process."""
        wf: Workflow[Any] = self._workflows.get(
            job_id, lambda: workflow_for(self.spec(job_id), job_id), self._cost(job_id)
        )
        return wf

    def sample(self, job_id: str, sample_id: str) -> Sample:
        by_id: dict[str, Sample] = self._samples.get(
            job_id, lambda: {s.id: s for s in self.spec(job_id).dataset.samples}, self._cost(job_id)
        )
        return by_id[sample_id]

    def overrides(self, ns: str, key: str, tag: str) -> PromptOverrides | None:
        """A temporary tag's content; memoized because it is written once before its step."""
        value: PromptOverrides | None = self._tags.get(
            (ns, key, tag), lambda: self.store.resolve(ns, key, tag)
        )
        return value
