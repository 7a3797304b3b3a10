"""optiflow's HTTP interface on tornado: a JSON API, Server-Sent Events, and one page.

    GET  /                          the page: recent jobs; a job's live progress and report
    GET  /jobs/{id}                 the same page with that job selected
    GET  /healthz                   liveness: {"ok": true} (open, cheap)
    GET  /readyz                    readiness: the database and Redis answer (503 naming what is down)
    GET  /api/openapi.json          the OpenAPI 3 document of this API
    GET  /api/jobs?status=&kind=&limit=     recent jobs, newest first
    POST /api/jobs                  a job document (JSON) -> 201 {"id": ...}
    GET  /api/jobs/{id}             the job, its live progress, its result once finished
    POST /api/jobs/{id}/cancel      200 when it ended, 202 when it ends at its current step
    GET  /api/jobs/{id}/events      SSE: the job's stored events in seq order, until run_finished

A job document has the fields of a job file, but no file is ever read for an HTTP body:
``prompt`` is inline or ``NS/KEY`` of a stored prompt, ``dataset`` an inline list of samples
(:func:`optiflow.jobfile.load_job_data`, the validation job files go through). It is untrusted:
the model policy (:mod:`optiflow.core.policy`) decides which models, endpoints and params it may
use, and the job limits (:mod:`optiflow.core.limits`) how much work it may ask for.

Refusals are JSON ``{"error": {"code", "field", "message"}}`` with the stable codes of
:mod:`optiflow.errors` (what the CLI prints as ``error[code]: field: message``).

Who may call: :mod:`optiflow.interfaces.http.guard` (Host allowlist, bearer token, same origin).
Modules: ``app`` (make_app, serve), ``handlers`` (tornado), ``api`` (the blocking operations and
request parsing), ``guard``, ``openapi``.
"""

from optiflow.interfaces.http.api import SOURCE, Api, Poll, error_body, http_status, parse_job_document
from optiflow.interfaces.http.app import (
    HttpConfig,
    check_exposure,
    load_model_policy,
    make_app,
    make_server,
    serve,
)
from optiflow.interfaces.http.guard import Guard
from optiflow.interfaces.http.handlers import LIVE_PROGRESS, PAGE_TITLE, page_html, sse_event, sse_live

__all__ = [
    "LIVE_PROGRESS",
    "PAGE_TITLE",
    "SOURCE",
    "Api",
    "Guard",
    "HttpConfig",
    "Poll",
    "check_exposure",
    "error_body",
    "http_status",
    "load_model_policy",
    "make_app",
    "make_server",
    "page_html",
    "parse_job_document",
    "serve",
    "sse_event",
    "sse_live",
]
