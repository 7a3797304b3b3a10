"""The tornado handlers: JSON responses and refusals, the event stream, the page, the probes.

Every blocking call runs on the API's thread pool, never on the IOLoop: one slow query must not
stall every open event stream. A job document's body is read in chunks against the size limit
(413 before it is held whole when its Content-Length says it is too large) and parsed on the pool.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Callable, Mapping
from http.client import responses
from importlib import resources
from types import TracebackType
from typing import Any, TypeVar

import tornado.iostream
import tornado.web
from tornado.ioloop import IOLoop

from optiflow.core.records import Event
from optiflow.errors import OptiflowError
from optiflow.interfaces.http.api import (
    Api,
    Poll,
    error_body,
    error_json,
    http_status,
    parse_limit,
    parse_seq,
)
from optiflow.interfaces.http.guard import Guard, Refused

log = logging.getLogger("optiflow.interfaces.http")
T = TypeVar("T")

PAGE_TITLE = "optiflow jobs"
LIVE_PROGRESS = "live_progress"  # the SSE event (without id) for the running step's counter
READY_TIMEOUT_S = 2.0
_HTTP_CODES = {
    400: "validation_error",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "body_too_large",
}


PAGE_FILES = {
    "index.html": "text/html; charset=utf-8",
    "page.css": "text/css; charset=utf-8",
    "page.js": "text/javascript; charset=utf-8",
}
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
"""The page's Content-Security-Policy: its own script and style files only (no inline script or
style element, no other origin), requests to this server only."""


@functools.cache
def page_file(name: str) -> bytes:
    """A file of the page: package data (``optiflow/interfaces/page/``), read once."""
    return (resources.files("optiflow.interfaces") / "page" / name).read_bytes()


def page_html() -> bytes:
    return page_file("index.html")


def sse_event(event: Event) -> str:
    """One stored event in the SSE wire format; its ``seq`` is the id a client resumes from."""
    data = json.dumps(event.model_dump(mode="json"), separators=(",", ":"))
    return f"id: {event.seq}\nevent: {event.type}\ndata: {data}\n\n"


def sse_live(progress: Mapping[str, Any]) -> str:
    """The running step's counter. No ``id``: it is not stored, so it must not move the point a
    reconnecting client resumes from."""
    return f"event: {LIVE_PROGRESS}\ndata: {json.dumps(dict(progress), separators=(',', ':'))}\n\n"


class BaseHandler(tornado.web.RequestHandler):
    """JSON responses and JSON refusals; the guard's checks; blocking work on the API's pool.

    ``check_host``: the Host allowlist applies (all but the health probes); ``needs_token``: the
    bearer token applies (every /api route)."""

    api: Api
    guard: Guard
    check_host = True
    needs_token = False

    def initialize(self, api: Api, guard: Guard) -> None:
        self.api = api
        self.guard = guard

    def prepare(self) -> None:
        if self.check_host:
            self.guard.check_host(self.request)
        if self.needs_token:
            self.guard.check_token(self.request)
        if self.request.method not in ("GET", "HEAD", "OPTIONS"):
            self.guard.check_origin(self.request)

    async def blocking(self, fn: Callable[..., T], *args: Any) -> T:
        return await IOLoop.current().run_in_executor(self.api.executor, fn, *args)

    def send_json(self, value: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(value, separators=(",", ":")))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, Refused):
            status, body = exc.status, error_body(exc)
            if status == 401:
                self.set_header("WWW-Authenticate", 'Bearer realm="optiflow"')
        elif isinstance(exc, OptiflowError):
            status, body = http_status(exc), error_body(exc)
        elif isinstance(exc, MemoryError):  # not a bare 500: say what ran out, and that it is this request
            status, body = (
                503,
                error_json(
                    "out_of_memory",
                    "the server ran out of memory handling this request; a smaller document may go through",
                ),
            )
        elif status_code >= 500:  # a bug or an outage: the details are in the server's log
            status, body = status_code, error_json("internal_error", "internal server error")
        else:
            message = exc.log_message if isinstance(exc, tornado.web.HTTPError) and exc.log_message else None
            reason = responses.get(status_code, "error")
            status, body = (
                status_code,
                error_json(_HTTP_CODES.get(status_code, "http_error"), message or reason),
            )
        self.clear_header("Content-Disposition")
        self.send_json(body, status)

    def log_exception(
        self, typ: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        """A refusal is an answer, not a server error: one line, no traceback."""
        if isinstance(value, OptiflowError):
            log.info("%s %s -> error[%s] %s", self.request.method, self.request.path[:200], value.code, value)
            return
        super().log_exception(typ, value, tb)


class ApiHandler(BaseHandler):
    needs_token = True


@tornado.web.stream_request_body
class JobsHandler(ApiHandler):
    """``GET`` lists jobs; ``POST`` submits a job document, read in chunks against the limit."""

    _chunks: list[bytes]
    _size = 0
    _too_large = False
    _body_read = False
    _slot = False

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        if not self._body_read:  # refused before the body was read: the server closes; say so
            self.set_header("Connection", "close")
        super().write_error(status_code, **kwargs)

    def prepare(self) -> None:
        self._chunks = []
        super().prepare()
        if self.request.method != "POST":
            return
        raw = self.request.headers.get("Content-Length")
        if raw is not None:
            try:
                length = int(raw)
            except ValueError:
                raise Refused(
                    "not a number", code="validation_error", status=400, field="Content-Length"
                ) from None
            if length > self.api.max_body_bytes:
                raise self._body_too_large(length)
        self.api.bodies.take()  # 503 when as many bodies as allowed are being read already
        self._slot = True

    def _release(self) -> None:
        if self._slot:
            self._slot = False
            self.api.bodies.give()

    def on_finish(self) -> None:
        self._release()

    def on_connection_close(self) -> None:
        self._release()
        super().on_connection_close()

    def data_received(self, chunk: bytes) -> None:
        if self._too_large:
            return
        self._size += len(chunk)
        if self._size > self.api.max_body_bytes:
            self._too_large, self._chunks = True, []  # keep reading to the end, holding nothing
        else:
            self._chunks.append(chunk)

    def _body_too_large(self, size: int | None) -> Refused:
        limit = self.api.max_body_bytes
        what = f"{size} bytes" if size is not None else "more"
        return Refused(
            f"the body is {what}, above the limit of {limit} bytes (OPTIFLOW_MAX_BODY_BYTES)",
            code="body_too_large",
            status=413,
            field="body",
        )

    async def get(self) -> None:
        self._body_read = True
        limit = parse_limit(self.get_query_argument("limit", "100"))
        status, kind = self.get_query_argument("status", ""), self.get_query_argument("kind", "")
        self.send_json({"jobs": await self.blocking(self.api.list_jobs, status, kind, limit)})

    async def post(self) -> None:
        self._body_read = True
        if self._too_large:
            raise self._body_too_large(self._size)
        body, self._chunks = b"".join(self._chunks), []
        job_id = await self.blocking(self.api.submit_body, body)  # parsed off the event loop
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
    """The job's events as Server-Sent Events, from ``Last-Event-ID`` (a reconnecting client) or
    ``?after=N``, following new ones until ``run_finished``.

    Polling the events table (every ``poll_s``) gives each stored event once and in order, with
    nothing to lose between a reconnect and a subscription; a comment line every ``keepalive_s``
    of silence keeps proxies from closing an idle stream. A job with nothing left to send answers
    204, which tells an EventSource to stop reconnecting. When Redis or the database stops
    answering mid-stream, an ``unavailable`` event says so and the stream ends (a reconnect is
    answered 503 until they are back)."""

    closed = False
    _slot = False

    def on_connection_close(self) -> None:
        self.closed = True
        self._release()

    def on_finish(self) -> None:
        self._release()

    def _release(self) -> None:
        if self._slot:
            self._slot = False
            self.api.streams.give()

    async def _poll(self, job_id: str, after: int) -> Poll:
        return await IOLoop.current().run_in_executor(self.api.stream_executor, self.api.poll, job_id, after)

    async def get(self, job_id: str) -> None:
        after = self._resume_point()
        self.api.streams.take()  # 503 when as many streams as allowed are open
        self._slot = True
        poll = await self._poll(job_id, after)  # 4xx/503 before any byte
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
            try:
                poll = await self._poll(job_id, poll.after)
            except OptiflowError as exc:
                data = json.dumps(error_body(exc), separators=(",", ":"))
                self.write(f"event: unavailable\ndata: {data}\n\n")
                return

    def _resume_point(self) -> int:
        header = self.request.headers.get("Last-Event-ID")
        if header:
            return parse_seq(header, "Last-Event-ID")
        return parse_seq(self.get_query_argument("after", "0"), "after")


class OpenApiHandler(ApiHandler):
    def get(self) -> None:
        from optiflow.interfaces.http.openapi import openapi_document

        self.send_json(openapi_document(token_required=self.guard.token is not None))


class JobPromptHandler(ApiHandler):
    async def get(self, job_id: str) -> None:
        self.send_json(await self.blocking(self.api.prompt, job_id))


class JobTrialsHandler(ApiHandler):
    async def get(self, job_id: str) -> None:
        self.send_json(await self.blocking(self.api.trials, job_id))


class MeasuresHandler(ApiHandler):
    async def get(self) -> None:
        ns, key = self.get_query_argument("ns", ""), self.get_query_argument("key", "")
        tag = self.get_query_argument("tag", "stable")
        limit = parse_limit(self.get_query_argument("limit", "100"))
        self.send_json(await self.blocking(self.api.measures, ns, key, tag, limit))


class LimitsHandler(ApiHandler):
    async def get(self) -> None:
        self.send_json(await self.blocking(self.api.limits))


class PageHandler(BaseHandler):
    """The page (``/``, ``/jobs/ID``: the page's script selects that job) and its two files
    (``/page/page.css``, ``/page/page.js``). It holds no data: it asks for the token (when the
    API needs one) and reads everything through /api."""

    def get(self, name: str | None = None) -> None:
        file = name if name in PAGE_FILES and name != "index.html" else "index.html"
        self.set_header("Content-Type", PAGE_FILES[file])
        self.set_header("Content-Security-Policy", PAGE_CSP)
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Referrer-Policy", "no-referrer")
        self.set_header("Cache-Control", "no-cache")
        self.finish(page_file(file))


class PageJobHandler(PageHandler):
    def get(self, name: str | None = None) -> None:
        super().get(None)


class ReadyHandler(BaseHandler):
    """Readiness: the database and (distributed) Redis answer within :data:`READY_TIMEOUT_S`; 503
    naming what is down. Open like /healthz; it says which part is down, not why (the log does)."""

    check_host = False

    async def get(self) -> None:
        checks = self.api.readiness_checks()
        results = await asyncio.gather(*(self._probe(name, fn) for name, fn in checks.items()))
        status = dict(zip(checks, results, strict=True))
        down = [name for name, state in status.items() if state != "ok"]
        self.send_json({"ok": not down, "checks": status, "down": down}, 503 if down else 200)

    async def _probe(self, name: str, fn: Callable[[], None]) -> str:
        try:
            await asyncio.wait_for(self.blocking(fn), READY_TIMEOUT_S)
        except TimeoutError:
            log.warning("readiness: %s did not answer within %.0f s", name, READY_TIMEOUT_S)
            return "timeout"
        except Exception as exc:
            log.warning("readiness: %s is down: %s", name, exc)
            return "down"
        return "ok"


class HealthHandler(ReadyHandler):
    """Liveness: the process answers; cheap, open, it touches nothing. ``?ready=1`` is /readyz."""

    async def get(self) -> None:
        if self.get_query_argument("ready", "") not in ("", "0", "false"):
            await super().get()
        else:
            self.send_json({"ok": True})


class MissingHandler(BaseHandler):
    def prepare(self) -> None:
        self.needs_token = self.request.path.startswith("/api/")
        super().prepare()
        raise tornado.web.HTTPError(404, log_message=f"no route {self.request.path[:200]}")
