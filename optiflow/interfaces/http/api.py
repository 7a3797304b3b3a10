"""What the HTTP handlers do, as plain blocking functions (they run on the API's thread pool).

Parsing and checking of what a request carries lives here too: a job document is parsed, checked
for depth and for strings the databases cannot store, validated (:func:`optiflow.jobfile.
load_job_data`, the validation job files go through), checked against the model policy and the
job limits, and only then submitted, so a refused document writes nothing.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from optiflow.core.kinds import KINDS
from optiflow.core.policy import ModelPolicy, PolicyError
from optiflow.core.records import RUN_FINISHED, Event
from optiflow.errors import (
    ConfigError,
    ConflictError,
    JobError,
    ModelProviderError,
    NotFoundError,
    OptiflowError,
    StoreError,
    ValidationError,
)
from optiflow.files import MAX_DEPTH  # one depth limit for every document
from optiflow.interfaces.client import RUNS_ELSEWHERE
from optiflow.interfaces.http.guard import Slots

if TYPE_CHECKING:
    from optiflow.interfaces.client import Client
    from optiflow.persistence.jobs import JobRecord, JobSummary

SOURCE = "body"  # errors in a submitted job document are named "body: <field>" by the validation
MAX_LIMIT = 1000
MEASURE_SCAN = 1000  # measure jobs read to find one prompt and tag's history (newest first)
EVENT_BATCH = 500
MAX_SEQ = 2**31 - 1  # an event seq is an INTEGER column (PostgreSQL: 32 bits)
JOB_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")  # what a job id can be (ours are uuid4 hex)
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")  # a prompt's ns or key, a tag


class UnavailableError(StoreError):
    """A service the API depends on (Redis, the database, the broker) does not answer."""

    code = "service_unavailable"


# The HTTP status of a refusal: the first family it belongs to; any other optiflow error is
# refused input. Through the API a JobError that is not a conflict is a job that could not be
# enqueued (the broker is down): the service is unavailable, the request was fine.
_STATUS: tuple[tuple[type[OptiflowError], int], ...] = (
    (ConflictError, 409),
    (JobError, 503),
    (NotFoundError, 404),
    (ValidationError, 400),
    (StoreError, 503),
    (ModelProviderError, 502),
    (ConfigError, 500),
)


def http_status(exc: OptiflowError) -> int:
    if isinstance(exc, PolicyError):
        return 403  # the document is well formed; the server does not allow what it asks for
    return next((status for family, status in _STATUS if isinstance(exc, family)), 400)


def error_body(exc: OptiflowError) -> dict[str, Any]:
    """The JSON refusal. Fields of a job document are named relative to the body ("check.type",
    not "body: check.type"): the client knows what it sent."""
    field = exc.field.removeprefix(f"{SOURCE}: ") if exc.field else None
    return error_json(exc.code, exc.message, field)


def error_json(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "field": field, "message": message}}


def job_summary(rec: JobRecord | JobSummary) -> dict[str, Any]:
    """A job as the list shows it: no spec, no checkpoint, no result (those can be large); its
    ``outcome`` in a few words once it finished with a report (stored when it ended)."""
    from optiflow.core.outcome import outcome_of
    from optiflow.persistence.jobs import JobSummary

    return {
        "id": rec.id,
        "kind": rec.kind,
        "name": rec.name,
        "status": rec.status,
        "step_index": rec.step_index,
        "error": rec.error,
        "created_at": rec.created_at.isoformat(),
        "updated_at": rec.updated_at.isoformat(),
        "outcome": rec.outcome if isinstance(rec, JobSummary) else outcome_of(rec.result),
    }


# -- parsing what a request carries ---------------------------------------------------------------
def parse_job_document(body: bytes) -> dict[str, Any]:
    """The JSON object of a job document; refused (400, ``body``) when it is not JSON, not an
    object, nested deeper than :data:`MAX_DEPTH`, or holds a string no database can store."""

    def no_constant(name: str) -> Any:
        raise ValidationError(f"not JSON: {name} is not a number JSON allows", field=SOURCE)

    try:
        data = json.loads(body, parse_constant=no_constant)
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, or an int of > 4300 digits
        raise ValidationError(f"not JSON: {exc}", field=SOURCE) from None
    except RecursionError:
        raise ValidationError(f"nested deeper than {MAX_DEPTH} levels", field=SOURCE) from None
    if not isinstance(data, dict):
        raise ValidationError(
            "expected a JSON object (kind, prompt, dataset, check, model, ...)", field=SOURCE
        )
    check_json_values(data)
    return data


def check_json_values(data: Any) -> None:
    """Walk ``data`` without recursion: its depth, and every string and key (a NUL character or a
    lone surrogate is refused: PostgreSQL cannot store the first, UTF-8 cannot encode the second)."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValidationError(f"nested deeper than {MAX_DEPTH} levels", field=SOURCE)
        if isinstance(value, str):
            _check_text(value, path)
        elif isinstance(value, float) and not math.isfinite(value):
            raise ValidationError(f"{value} is not a finite number", field=path or SOURCE)
        elif isinstance(value, dict):
            for key, item in value.items():
                _check_text(key, path)
                stack.append((item, f"{path}.{key}" if path else key, depth + 1))
        elif isinstance(value, list):
            stack.extend((item, f"{path}.{i}" if path else str(i), depth + 1) for i, item in enumerate(value))


def _check_text(text: str, path: str) -> None:
    if "\x00" in text:
        raise ValidationError("a NUL character (\\u0000) is not allowed", field=path or SOURCE)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError("a lone surrogate is not text", field=path or SOURCE) from None


def parse_limit(raw: str) -> int:
    try:
        limit = int(raw)
    except ValueError:
        raise ValidationError(f"expected an integer, got {raw[:40]!r}", field="limit") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise ValidationError(f"must be between 1 and {MAX_LIMIT}, got {limit}", field="limit")
    return limit


def parse_seq(raw: str, field: str) -> int:
    try:
        seq = int(raw)
    except ValueError:
        raise ValidationError(f"expected an event seq (an integer), got {raw[:40]!r}", field=field) from None
    if not 0 <= seq <= MAX_SEQ:
        raise ValidationError(f"must be between 0 and {MAX_SEQ}, got {raw[:40]}", field=field)
    return seq


def check_job_id(job_id: str) -> str:
    """A job id that cannot exist (too long, a NUL or another byte no id has) is an unknown job,
    answered without asking the database (which may refuse to compare it)."""
    if not JOB_ID.match(job_id):
        raise NotFoundError(f"no job {job_id[:80]!r}", field="job")
    return job_id


# -- outages --------------------------------------------------------------------------------------
@contextmanager
def outages_as_unavailable() -> Iterator[None]:
    """Redis, the broker or the database not answering is a 503 naming which, never a 500."""
    import kombu.exceptions
    import redis.exceptions
    import sqlalchemy.exc

    try:
        yield
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        raise UnavailableError(
            "Redis does not answer; try again later", field="redis", code="redis_unavailable"
        ) from exc
    except StoreError as exc:  # the Redis store wraps the outage (its message names the address)
        if not isinstance(exc.__cause__, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError):
            raise
        raise UnavailableError(
            "Redis does not answer; try again later", field="redis", code="redis_unavailable"
        ) from exc
    except kombu.exceptions.OperationalError as exc:
        raise UnavailableError(
            "the broker does not answer; try again later", field="broker", code="broker_unavailable"
        ) from exc
    except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError) as exc:
        raise UnavailableError(
            "the database does not answer; try again later", field="database", code="database_unavailable"
        ) from exc


@dataclass(frozen=True)
class Poll:
    """One look at a job's event stream: the events after ``after`` (at most a batch), where the
    stream stands now, whether it is complete, and the running step's live counter."""

    events: list[Event]
    after: int
    done: bool
    progress: dict[str, int] | None


class Api:
    """What every handler shares: the client, the pool blocking calls run on, the stream timings,
    the model policy and job limits documents are checked against, and a lock so concurrent
    submissions start the embedded worker once. The methods block; handlers run them on the pool."""

    def __init__(
        self,
        client: Client,
        *,
        policy: ModelPolicy,
        max_body_bytes: int,
        poll_s: float,
        keepalive_s: float,
        threads: int,
        max_bodies: int = 8,
        max_streams: int = 200,
    ) -> None:
        self.client = client
        self.policy = policy
        self.max_body_bytes = max_body_bytes
        self.poll_s = poll_s
        self.keepalive_s = keepalive_s
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="optiflow-http")
        # Event streams poll on a pool of their own: however many are open, their polls queue among
        # themselves, never ahead of a job's GET (600 streams took a GET from 0.05 to 1 s; issue 27).
        self.stream_executor = ThreadPoolExecutor(
            max_workers=max(2, threads // 4), thread_name_prefix="optiflow-sse"
        )
        self.bodies = Slots(max_bodies, "job documents being read", "OPTIFLOW_HTTP_MAX_BODIES")
        self.streams = Slots(max_streams, "event streams open", "OPTIFLOW_HTTP_MAX_STREAMS")
        self._submit_lock = threading.Lock()  # the embedded worker must be started once
        # Parsing a large body takes a few times its size in memory: two at a time at most.
        self._parsing = threading.BoundedSemaphore(2)
        self._probe: Any = None  # the readiness probe's Redis client, made on first use

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.stream_executor.shutdown(wait=False, cancel_futures=True)

    def list_jobs(self, status: str, kind: str, limit: int) -> list[dict[str, Any]]:
        if kind and kind not in KINDS:
            raise ValidationError(f"unknown job kind {kind[:40]!r} (known: {', '.join(KINDS)})", field="kind")
        statuses = [s.strip() for s in status.split(",") if s.strip()]
        with outages_as_unavailable():
            records = self.client.runtime.jobs.summaries(statuses or None, limit, kind=kind or None)
        return [job_summary(rec) for rec in records]

    def submit_body(self, body: bytes) -> str:
        """Parse, validate, check against the policy and the limits, then submit: a refused
        document writes nothing."""
        with self._parsing:
            data = parse_job_document(body)
            return self.submit(data)

    def submit(self, data: Mapping[str, Any]) -> str:
        from optiflow.jobfile import load_job_data

        with outages_as_unavailable():
            spec = load_job_data(data, source=SOURCE, store=self.client.runtime.store)
        self.policy.check(spec)  # the document; submit checks it again with the baseline tag's params
        with self._submit_lock, outages_as_unavailable():
            return self.client.submit(spec, policy=self.policy).id

    def job(self, job_id: str) -> dict[str, Any]:
        with outages_as_unavailable():
            rec = self.client.runtime.jobs.get(check_job_id(job_id))
            return {**job_summary(rec), "progress": self._progress(rec), "result": rec.result}

    def prompt(self, job_id: str) -> dict[str, Any]:
        """The job's prompt as its baseline renders it (the original side of the page's diffs)."""
        from optiflow.interfaces.http.views import prompt_view

        with outages_as_unavailable():
            rec = self.client.runtime.jobs.get(check_job_id(job_id))
        return prompt_view(rec)

    def trials(self, job_id: str) -> dict[str, Any]:
        """The job's trials and rejections, the candidates of its running step, its step timeline."""
        from optiflow.interfaces.http.views import steps_view, trials_view

        jobs = self.client.runtime.jobs
        with outages_as_unavailable():
            rec = jobs.get(check_job_id(job_id))
            trials, rejections, events = jobs.trials(job_id), jobs.rejections(job_id), jobs.events(job_id)
        return {
            **trials_view(rec, trials, rejections),
            "status": rec.status,
            "steps": steps_view(rec, events),
        }

    def measures(self, ns: str, key: str, tag: str, limit: int) -> dict[str, Any]:
        """The measure jobs of one prompt and tag that left a report, oldest first (at most
        ``limit``, the newest ones): what a nightly cron has measured."""
        from optiflow.interfaces.http.views import measure_matches, measure_point

        for name, value in (("ns", ns), ("key", key), ("tag", tag)):
            if not value:
                raise ValidationError("required (the prompt's ns and key, and the tag measured)", field=name)
            if len(value) > 200 or not _NAME.match(value):
                raise ValidationError(f"not a name: {value[:40]!r}", field=name)
        with outages_as_unavailable():
            records = self.client.runtime.jobs.list(None, MEASURE_SCAN, kind="measure")
        points = [p for rec in records if measure_matches(rec, ns, key, tag) and (p := measure_point(rec))]
        return {"ns": ns, "key": key, "tag": tag, "points": points[:limit][::-1]}

    def limits(self) -> dict[str, Any]:
        """Each model route's configured limits and live state (``optiflow.distributed.ratelimit.
        describe``); ``routes`` is empty when ``OPTIFLOW_MODEL_LIMITS`` configures none."""
        from optiflow.distributed.ratelimit import describe

        settings = self.client.settings
        if not settings.limits():
            return {"configured": False, "shared": False, "routes": []}
        limiter = self.client.runtime.limiter  # the one the jobs' model calls pass
        routes = describe(settings, limiter)
        return {"configured": True, "shared": bool(limiter and limiter.backend.shared), "routes": routes}

    def cancel(self, job_id: str) -> dict[str, Any]:
        """Cancel an unfinished job; a finished one is a conflict. An embedded server can stop a
        running job only if it runs it: the cancel signal lives in the worker's process."""
        with outages_as_unavailable():
            job = self.client.job(check_job_id(job_id))
            rec = job.record()
            if rec.finished:
                raise ConflictError(f"job {job_id} already {rec.status}: nothing to cancel", field="job")
            if job.runs_elsewhere(rec.status):
                raise ConflictError(f"job {job_id} {RUNS_ELSEWHERE}", field="job")
            job.cancel()
            return job_summary(job.record())

    def poll(self, job_id: str, after: int) -> Poll:
        """The job's status is read before its events: ``run_finished`` is committed together with
        the final status, so a job seen finished has every event it will ever have stored."""
        jobs = self.client.runtime.jobs
        with outages_as_unavailable():
            rec = jobs.get(check_job_id(job_id))
            events = jobs.events(job_id, after_seq=after, limit=EVENT_BATCH)
            ended = any(e.type == RUN_FINISHED for e in events)
            done = ended or (rec.finished and len(events) < EVENT_BATCH)
            last = events[-1].seq if events else after
            return Poll(events, last, done, None if done else self._progress(rec))

    def _progress(self, rec: JobRecord) -> dict[str, int] | None:
        if rec.finished:
            return None
        live = self.client.runtime.scratch.progress(rec.id)
        return None if live is None else {"step": live.step, "done": live.done, "total": live.total}

    # -- readiness ------------------------------------------------------------------------------
    def check_database(self) -> None:
        import sqlalchemy as sa

        with self.client.runtime.jobs.engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))

    def check_redis(self) -> None:
        self._redis_probe().ping()

    def _redis_probe(self) -> Any:
        """A Redis client of its own with short timeouts: a probe must not wait like a worker."""
        if self._probe is None:
            import redis

            url = self.client.settings.redis_url
            assert url is not None
            self._probe = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
        return self._probe

    def readiness_checks(self) -> dict[str, Any]:
        """What /readyz checks: the database always; Redis when distributed (embedded, the broker
        and results live in this process)."""
        checks: dict[str, Any] = {"database": self.check_database}
        if not self.client.runtime.embedded and self.client.settings.redis_url:
            checks["redis"] = self.check_redis
        return checks
