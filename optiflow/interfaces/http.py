"""optiflow's HTTP interface on tornado: a JSON API, Server-Sent Events, and one page.

    GET  /                          the page: recent jobs; a job's live progress and report
    GET  /jobs/{id}                 the same page with that job selected
    GET  /healthz                   {"ok": true}
    GET  /api/jobs?status=&kind=&limit=     recent jobs, newest first
    POST /api/jobs                  a job document (JSON) -> 201 {"id": ...}
    GET  /api/jobs/{id}             the job, its live progress, its result once finished
    POST /api/jobs/{id}/cancel      200 when it ended, 202 when it ends at its current step
    GET  /api/jobs/{id}/events      SSE: the job's stored events in seq order, until run_finished

A job document has the fields of a job file, but no file is ever read for an HTTP body:
``prompt`` is inline or ``NS/KEY`` of a stored prompt, ``dataset`` an inline list of samples
(:func:`optiflow.jobfile.load_job_data`, the validation job files go through).

Refusals are JSON ``{"error": {"code", "field", "message"}}`` with the stable codes of
:mod:`optiflow.errors` (what the CLI prints as ``error[code]: field: message``).

Every blocking call (database, Redis, enqueueing) runs on a thread pool, never on the IOLoop: one
slow query must not stall every open event stream. The API has no authentication; it listens on
127.0.0.1 by default, and writes that a browser sends from another origin are refused, so a web
page elsewhere cannot submit or cancel jobs through a visitor's browser.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.client import responses
from importlib import resources
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import tornado.httpserver
import tornado.httputil
import tornado.iostream
import tornado.netutil
import tornado.web
from tornado.ioloop import IOLoop

from optiflow.core.kinds import KINDS
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
from optiflow.interfaces.client import RUNS_ELSEWHERE

if TYPE_CHECKING:
    from optiflow.interfaces.client import Client
    from optiflow.persistence.jobs import JobRecord

log = logging.getLogger(__name__)
T = TypeVar("T")

SOURCE = "body"  # errors in a submitted job document are named "body: <field>" by the validation
PAGE_TITLE = "optiflow jobs"


@functools.cache
def page_html() -> bytes:
    """The page: package data (``optiflow/interfaces/page/index.html``), read once."""
    return (resources.files("optiflow.interfaces") / "page" / "index.html").read_bytes()


LIVE_PROGRESS = "live_progress"  # the SSE event (without id) for the running step's counter
MAX_LIMIT = 1000
EVENT_BATCH = 500

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
_HTTP_CODES = {400: "validation_error", 403: "forbidden", 404: "not_found", 405: "method_not_allowed"}


def http_status(exc: OptiflowError) -> int:
    return next((status for family, status in _STATUS if isinstance(exc, family)), 400)


def error_body(exc: OptiflowError) -> dict[str, Any]:
    """The JSON refusal. Fields of a job document are named relative to the body ("check.type",
    not "body: check.type"): the client knows what it sent."""
    field = exc.field.removeprefix(f"{SOURCE}: ") if exc.field else None
    return {"error": {"code": exc.code, "field": field, "message": exc.message}}


def job_summary(rec: JobRecord) -> dict[str, Any]:
    """A job as the list shows it: no spec, no checkpoint, no result (those can be large)."""
    return {
        "id": rec.id,
        "kind": rec.kind,
        "name": rec.name,
        "status": rec.status,
        "step_index": rec.step_index,
        "error": rec.error,
        "created_at": rec.created_at.isoformat(),
        "updated_at": rec.updated_at.isoformat(),
    }


def sse_event(event: Event) -> str:
    """One stored event in the SSE wire format; its ``seq`` is the id a client resumes from."""
    data = json.dumps(event.model_dump(mode="json"), separators=(",", ":"))
    return f"id: {event.seq}\nevent: {event.type}\ndata: {data}\n\n"


def sse_live(progress: Mapping[str, Any]) -> str:
    """The running step's counter. No ``id``: it is not stored, so it must not move the point a
    reconnecting client resumes from."""
    return f"event: {LIVE_PROGRESS}\ndata: {json.dumps(dict(progress), separators=(',', ':'))}\n\n"


def parse_job_document(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValidationError(f"not JSON: {exc}", field=SOURCE) from None
    if not isinstance(data, dict):
        raise ValidationError(
            "expected a JSON object (kind, prompt, dataset, check, model, ...)", field=SOURCE
        )
    return data


def parse_limit(raw: str) -> int:
    try:
        limit = int(raw)
    except ValueError:
        raise ValidationError(f"expected an integer, got {raw!r}", field="limit") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise ValidationError(f"must be between 1 and {MAX_LIMIT}, got {limit}", field="limit")
    return limit


def parse_seq(raw: str, field: str) -> int:
    try:
        seq = int(raw)
    except ValueError:
        raise ValidationError(f"expected an event seq (an integer), got {raw!r}", field=field) from None
    if seq < 0:
        raise ValidationError(f"must be 0 or more, got {seq}", field=field)
    return seq


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
    and a lock so concurrent submissions start the embedded worker once. The methods block;
    handlers run them on the pool."""

    def __init__(self, client: Client, *, poll_s: float, keepalive_s: float, threads: int) -> None:
        self.client = client
        self.poll_s = poll_s
        self.keepalive_s = keepalive_s
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="optiflow-http")
        self._submit_lock = threading.Lock()  # the embedded worker must be started once

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)

    def list_jobs(self, status: str, kind: str, limit: int) -> list[dict[str, Any]]:
        if kind and kind not in KINDS:
            raise ValidationError(f"unknown job kind {kind!r} (known: {', '.join(KINDS)})", field="kind")
        statuses = [s.strip() for s in status.split(",") if s.strip()]
        records = self.client.runtime.jobs.list(statuses or None, limit, kind=kind or None)
        return [job_summary(rec) for rec in records]

    def submit(self, data: Mapping[str, Any]) -> str:
        """Validate the whole document, then submit: a refused document writes nothing."""
        from optiflow.jobfile import load_job_data

        spec = load_job_data(data, source=SOURCE, store=self.client.runtime.store)
        with self._submit_lock:
            return self.client.submit(spec).id

    def job(self, job_id: str) -> dict[str, Any]:
        rec = self.client.runtime.jobs.get(job_id)
        return {**job_summary(rec), "progress": self._progress(rec), "result": rec.result}

    def cancel(self, job_id: str) -> dict[str, Any]:
        """Cancel an unfinished job; a finished one is a conflict. An embedded server can stop a
        running job only if it runs it: the cancel signal lives in the worker's process."""
        job = self.client.job(job_id)
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
        rec = jobs.get(job_id)
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


class ApiHandler(tornado.web.RequestHandler):
    """JSON responses and JSON refusals; blocking work on the API's pool."""

    api: Api

    def initialize(self, api: Api) -> None:
        self.api = api

    def prepare(self) -> None:
        if self.request.method not in ("GET", "HEAD", "OPTIONS"):
            check_same_origin(self.request)

    async def blocking(self, fn: Callable[..., T], *args: Any) -> T:
        return await IOLoop.current().run_in_executor(self.api.executor, fn, *args)

    def send_json(self, value: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(json.dumps(value, separators=(",", ":")))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, OptiflowError):
            status, body = http_status(exc), error_body(exc)
        elif status_code >= 500:  # a bug or an outage: the details are in the server's log
            status, body = status_code, _error("internal_error", "internal server error")
        else:
            message = exc.log_message if isinstance(exc, tornado.web.HTTPError) and exc.log_message else None
            reason = responses.get(status_code, "error")
            status, body = status_code, _error(_HTTP_CODES.get(status_code, "http_error"), message or reason)
        self.send_json(body, status)

    def log_exception(
        self, typ: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        """A refusal is an answer, not a server error: one line, no traceback."""
        if isinstance(value, OptiflowError):
            log.info("%s %s -> error[%s] %s", self.request.method, self.request.uri, value.code, value)
            return
        super().log_exception(typ, value, tb)


def _error(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "field": field, "message": message}}


def check_same_origin(request: tornado.httputil.HTTPServerRequest) -> None:
    """Browsers name the page a write comes from in ``Origin``; one from another site is refused.
    Clients that send no Origin (curl, scripts) are not browsers acting for someone else."""
    origin = request.headers.get("Origin")
    if origin and urlsplit(origin).netloc != request.host:
        raise tornado.web.HTTPError(403, log_message=f"cross-origin request from {origin} refused")


class JobsHandler(ApiHandler):
    async def get(self) -> None:
        limit = parse_limit(self.get_query_argument("limit", "100"))
        status, kind = self.get_query_argument("status", ""), self.get_query_argument("kind", "")
        self.send_json({"jobs": await self.blocking(self.api.list_jobs, status, kind, limit)})

    async def post(self) -> None:
        data = parse_job_document(self.request.body)
        job_id = await self.blocking(self.api.submit, data)
        self.set_header("Location", f"/api/jobs/{job_id}")
        self.send_json({"id": job_id, "status": "queued"}, 201)


class JobHandler(ApiHandler):
    async def get(self, job_id: str) -> None:
        self.send_json(await self.blocking(self.api.job, job_id))


class CancelHandler(ApiHandler):
    async def post(self, job_id: str) -> None:
        job = await self.blocking(self.api.cancel, job_id)
        self.send_json(job, 200 if job["status"] == "cancelled" else 202)


class EventsHandler(ApiHandler):
    """The job's events as Server-Sent Events, from ``Last-Event-ID`` (a reconnecting
    EventSource) or ``?after=N``, following new ones until ``run_finished``.

    Polling the events table (every ``poll_s``) gives each stored event once and in order, with
    nothing to lose between a reconnect and a subscription; a comment line every ``keepalive_s``
    of silence keeps proxies from closing an idle stream. A job with nothing left to send answers
    204, which tells an EventSource to stop reconnecting."""

    closed = False

    def on_connection_close(self) -> None:
        self.closed = True

    async def get(self, job_id: str) -> None:
        poll = await self.blocking(self.api.poll, job_id, self._resume_point())  # 404 before any byte
        if poll.done and not poll.events:
            self.set_status(204)
            self.finish()
            return
        self.set_header("Content-Type", "text/event-stream; charset=utf-8")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")  # nginx: do not buffer the stream
        try:
            await self._follow(job_id, poll)
        except tornado.iostream.StreamClosedError:
            return  # the client went away
        self.finish()

    async def _follow(self, job_id: str, poll: Poll) -> None:
        quiet_since, live = time.monotonic(), None
        first = True
        while True:
            chunks = [sse_event(e) for e in poll.events]
            if poll.progress is not None and poll.progress != live:
                live = poll.progress
                chunks.append(sse_live(live))
            if not chunks and time.monotonic() - quiet_since >= self.api.keepalive_s:
                chunks.append(": keep-alive\n\n")
            if chunks or first:  # the first flush sends the headers: the client sees it is open
                quiet_since, first = time.monotonic(), False
                self.write("".join(chunks))
                await self.flush()
            if poll.done or self.closed:
                return
            await asyncio.sleep(self.api.poll_s)
            poll = await self.blocking(self.api.poll, job_id, poll.after)

    def _resume_point(self) -> int:
        header = self.request.headers.get("Last-Event-ID")
        if header:
            return parse_seq(header, "Last-Event-ID")
        return parse_seq(self.get_query_argument("after", "0"), "after")


class PageHandler(ApiHandler):
    def get(self, job_id: str | None = None) -> None:
        """The page; with a job id the page's script selects that job."""
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header(
            "Content-Security-Policy",
            "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'",
        )
        self.finish(page_html())


class HealthHandler(ApiHandler):
    def get(self) -> None:
        self.send_json({"ok": True})


class MissingHandler(ApiHandler):
    def prepare(self) -> None:
        raise tornado.web.HTTPError(404, log_message=f"no route {self.request.path}")


def make_app(
    client: Client, *, poll_s: float = 0.25, keepalive_s: float = 15.0, threads: int = 16
) -> tornado.web.Application:
    """The application for ``client``; ``app.settings["optiflow_api"].close()`` stops its pool."""
    api = Api(client, poll_s=poll_s, keepalive_s=keepalive_s, threads=threads)
    args = {"api": api}
    job = r"/api/jobs/([^/]+)"
    return tornado.web.Application(
        [
            (r"/", PageHandler, args),
            (r"/jobs/([^/]+)", PageHandler, args),
            (r"/healthz", HealthHandler, args),
            (r"/api/jobs", JobsHandler, args),
            (job, JobHandler, args),
            (job + "/cancel", CancelHandler, args),
            (job + "/events", EventsHandler, args),
        ],
        default_handler_class=MissingHandler,
        default_handler_args=args,
        optiflow_api=api,
    )


def serve(
    client: Client,
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve until SIGINT or SIGTERM (call from the main thread), then close open streams and
    return; closing ``client`` is the caller's. ``on_ready`` gets the URL once it listens (port 0
    picks a free port)."""
    asyncio.run(_serve(client, host, port, on_ready))


async def _serve(client: Client, host: str, port: int, on_ready: Callable[[str], None] | None) -> None:
    app = make_app(client)
    sockets = tornado.netutil.bind_sockets(port, address=host)
    server = tornado.httpserver.HTTPServer(app)
    server.add_sockets(sockets)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        if on_ready is not None:
            on_ready(_url(sockets[0].getsockname()))
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        server.stop()
        try:  # event streams notice the closed connection at their next poll
            await asyncio.wait_for(server.close_all_connections(), timeout=5)
        except TimeoutError:
            log.warning("some connections did not close within 5 s")
        app.settings["optiflow_api"].close()


def _url(address: tuple[Any, ...]) -> str:
    host, port = str(address[0]), int(address[1])
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
