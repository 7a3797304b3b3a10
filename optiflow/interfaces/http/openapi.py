"""The API's OpenAPI 3.1 document (``GET /api/openapi.json``).

The job document's schema is generated from the pydantic specs (:data:`optiflow.core.kinds.JobSpec`)
and adjusted to what an HTTP body carries: ``prompt`` inline or ``NS/KEY`` of a stored prompt,
``dataset`` an inline list of samples, the compress ``strategy`` optional (the job's model
compresses by default). Every route lists its parameters, its bodies and its refusals, which all
share one error shape.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from pydantic import TypeAdapter

REF = "#/components/schemas/{model}"
NS_KEY = r"^[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+$"

_ERRORS = {
    "400": "refused input: the field it names is wrong (code validation_error, limit_exceeded, ...)",
    "401": "no token, or a wrong one (code unauthorized); only when the server has OPTIFLOW_API_TOKEN",
    "403": "a Host the server does not answer to, a write from another origin, or a job document "
    "outside the model policy (host_not_allowed, forbidden, policy_violation)",
    "404": "no such job, prompt or route (not_found)",
    "409": "the job is not in a state that allows this (job_conflict)",
    "413": "the body is larger than OPTIFLOW_MAX_BODY_BYTES (body_too_large)",
    "503": "Redis, the broker or the database does not answer (redis_unavailable, ...), or the server is at "
    "a limit (busy: OPTIFLOW_HTTP_MAX_BODIES, OPTIFLOW_HTTP_MAX_STREAMS; out_of_memory)",
}


def _error(status: str) -> dict[str, Any]:
    return {
        "description": _ERRORS[status],
        "content": {"application/json": {"schema": {"$ref": REF.format(model="Error")}}},
    }


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": REF.format(model=name)}


JOB_ID = {
    "name": "job_id",
    "in": "path",
    "required": True,
    "description": "the id POST /api/jobs returned",
    "schema": {"type": "string", "minLength": 1},
}


def _responses(ok: dict[str, Any], *errors: str) -> dict[str, Any]:
    return {**ok, **{status: _error(status) for status in ("401", "403", *errors)}}


def _job_document_schemas() -> dict[str, Any]:
    """The specs' JSON schemas (``$defs`` as components), adjusted to a job document."""
    from optiflow.core.kinds import JobSpec

    schema = TypeAdapter(JobSpec).json_schema(ref_template=REF, mode="validation")
    defs: dict[str, Any] = schema.pop("$defs")
    prompt = {
        "anyOf": [
            _ref("Prompt"),
            {"type": "string", "pattern": NS_KEY, "description": "NS/KEY of a prompt pushed to the store"},
        ]
    }
    dataset = {
        "type": "array",
        "minItems": 1,
        "items": _ref("Sample"),
        "description": "the samples, inline (ids unique)",
    }
    for name in ("CompressSpec", "OptimizeSpec", "MeasureSpec"):
        spec = defs[name]
        spec["properties"]["prompt"] = copy.deepcopy(prompt)
        spec["properties"]["dataset"] = copy.deepcopy(dataset)
        required = ["kind", "prompt", "dataset", "check", "model"]
        if name == "OptimizeSpec":
            required.append("optimizer")
        spec["required"] = required
        spec.pop("title", None)
    defs["CompressSpec"]["properties"]["strategy"]["description"] = (
        "default: {type: llm, model: <the job's model>}"
    )
    defs["JobDocument"] = {
        "description": "A job document: the fields of a job file, with the prompt and the samples inline.",
        "oneOf": [_ref("CompressSpec"), _ref("OptimizeSpec"), _ref("MeasureSpec")],
        "discriminator": {
            "propertyName": "kind",
            "mapping": {
                k: REF.format(model=f"{k.capitalize()}Spec") for k in ("compress", "optimize", "measure")
            },
        },
    }
    return defs


EXAMPLE_DOCUMENT: dict[str, Any] = {
    "kind": "compress",
    "name": "refunds",
    "prompt": {
        "ns": "demo",
        "key": "refunds",
        "sections": [
            {
                "path": "rules",
                "body": "You are a helpful assistant for an online shop, and you always answer politely. "
                "When a customer asks about refunds, reply with code RFD-201. "
                "Thank the customer for their patience and wish them a pleasant day.",
            }
        ],
    },
    "dataset": [
        {"id": "r1", "input": "How long does my refund take?", "expected": "RFD-201"},
        {"id": "r2", "input": "Where is the refund for my chairs?", "expected": "RFD-201"},
    ],
    "check": {"type": "contains"},
    "model": {"model": "optiflow/sim"},
    "strategy": {"type": "rule"},
    "eval_runs": 1,
    "min_section_tokens": 10,
}
"""A compress job on the simulated model: what a document looks like (and a request that works)."""

_JOB_SUMMARY = {
    "type": "object",
    "required": ["id", "kind", "name", "status", "step_index", "error", "created_at", "updated_at"],
    "properties": {
        "id": {"type": "string"},
        "kind": {"type": "string", "enum": ["compress", "optimize", "measure"]},
        "name": {"type": "string"},
        "status": {"type": "string", "enum": ["queued", "running", "completed", "failed", "cancelled"]},
        "step_index": {"type": "integer"},
        "error": {"type": ["string", "null"]},
        "created_at": {"type": "string", "format": "date-time"},
        "updated_at": {"type": "string", "format": "date-time"},
        "outcome": {
            "description": "what the finished job found, in a few words; bad: its report fails its caller",
            "type": ["object", "null"],
            "required": ["text", "bad"],
            "properties": {
                "text": {"type": "string"},
                "bad": {"type": "boolean"},
                "badge": {"type": "string", "description": "what a bad one shows: below floor, drift shown"},
            },
        },
    },
}

_NUMBER_OR_NULL = {"type": ["number", "null"]}
_STRINGS = {"type": "array", "items": {"type": "string"}}
_CHANGE = {
    "type": "object",
    "description": "a section rendered differently from the baseline",
    "required": ["path", "body", "tokens", "original_tokens"],
    "properties": {
        "path": {"type": "string"},
        "body": {"type": "string"},
        "tokens": {"type": "integer"},
        "original_tokens": {"type": ["integer", "null"]},
    },
}
_TRIAL = {
    "type": "object",
    "required": ["candidate_id", "name", "step_index", "status", "score", "summary", "parents", "changes"],
    "properties": {
        "candidate_id": {"type": "string", "description": "the id within the job (c3, baseline, 1a2b3c4d)"},
        "name": {"type": "string"},
        "step_index": {"type": "integer"},
        "status": {"type": "string"},
        "score": _NUMBER_OR_NULL,
        "summary": {
            "type": ["object", "null"],
            "description": "TrialSummary: total, passed, pass_rate, cost, latency",
        },
        "parents": _STRINGS,
        "rationale": {"type": ["string", "null"]},
        "error": {"type": ["string", "null"]},
        "changes": {"type": "array", "items": {"$ref": "#/components/schemas/SectionChange"}},
        "model_params": {"type": "object"},
        "extra": {"type": "object"},
        "created_at": {"type": ["string", "null"]},
        "updated_at": {"type": ["string", "null"]},
    },
}
_RUNNING = {
    "type": "object",
    "required": ["candidate_id", "name", "step_index", "evaluations", "changes"],
    "properties": {
        "candidate_id": {"type": "string"},
        "name": {"type": "string"},
        "step_index": {"type": "integer"},
        "status": {"const": "running"},
        "evaluations": {"type": "integer"},
        "changes": {"type": "array", "items": {"$ref": "#/components/schemas/SectionChange"}},
    },
}
_STEP = {
    "type": "object",
    "required": ["index", "name", "state", "candidates", "evaluations", "started_at", "ended_at", "seconds"],
    "properties": {
        "index": {"type": "integer"},
        "name": {"type": "string", "description": "baseline, candidates, combined, greedy-N, ..."},
        "state": {"type": "string", "enum": ["done", "running"]},
        "candidates": {"type": "integer"},
        "evaluations": {
            "type": "integer",
            "description": "done (a finished step); planned (the running one)",
        },
        "proposals": {"type": "integer"},
        "started_at": {"type": ["string", "null"]},
        "ended_at": {"type": ["string", "null"]},
        "seconds": _NUMBER_OR_NULL,
    },
}
_REJECTION = {
    "type": "object",
    "required": ["step_index", "reason_code", "message"],
    "properties": {
        "step_index": {"type": "integer"},
        "iteration": {"type": ["integer", "null"]},
        "reason_code": {"type": "string"},
        "message": {"type": "string"},
        "parents": _STRINGS,
        "rationale": {"type": ["string", "null"]},
        "duplicate_of": {"type": ["string", "null"]},
        "config_hash": {"type": ["string", "null"]},
    },
}
_MEASURE_POINT = {
    "type": "object",
    "required": ["job_id", "measured_at", "pass_rate", "lower", "upper"],
    "properties": {
        "job_id": {"type": "string"},
        "name": {"type": "string"},
        "status": {"type": "string"},
        "measured_at": {"type": ["string", "null"]},
        "pass_rate": _NUMBER_OR_NULL,
        "lower": _NUMBER_OR_NULL,
        "upper": _NUMBER_OR_NULL,
        "evaluations": {"type": ["integer", "null"]},
        "errors": {"type": ["integer", "null"]},
        "latency_p50": _NUMBER_OR_NULL,
        "latency_p95": _NUMBER_OR_NULL,
        "model": {"type": ["string", "null"]},
        "mean_tokens": _NUMBER_OR_NULL,
        "prompt_hash": {
            "type": ["string", "null"],
            "description": "the measured prompt's short hash: it differs after the prompt changed",
        },
        "drift": {
            "type": ["object", "null"],
            "description": "the comparison with the drift reference: status reference / compared / off, "
            "tonight's change against the reference with its 95% interval, whether a drop is shown",
            "properties": {
                "status": {"type": "string"},
                "reference_id": {"type": ["string", "null"]},
                "night": {"type": ["integer", "null"]},
                "estimate": _NUMBER_OR_NULL,
                "low": _NUMBER_OR_NULL,
                "high": _NUMBER_OR_NULL,
                "shown": {"type": ["string", "null"]},
                "first_shown": {"type": ["integer", "null"]},
                "drop_shown": {"type": "boolean"},
                "headline": {"type": "string"},
            },
        },
    },
}

_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "field", "message"],
                "properties": {
                    "code": {"type": "string", "description": "stable, e.g. validation_error"},
                    "field": {"type": ["string", "null"], "description": "the input it names"},
                    "message": {"type": "string"},
                },
            }
        },
    },
    "JobSummary": _JOB_SUMMARY,
    "Job": {
        "allOf": [
            _ref("JobSummary"),
            {
                "type": "object",
                "required": ["progress", "result"],
                "properties": {
                    "progress": {
                        "description": "the running step's evaluations (null when none runs)",
                        "anyOf": [
                            {
                                "type": "object",
                                "properties": {
                                    "step": {"type": "integer"},
                                    "done": {"type": "integer"},
                                    "total": {"type": "integer"},
                                },
                            },
                            {"type": "null"},
                        ],
                    },
                    "result": {
                        "description": "the OptimizeResult once finished",
                        "type": ["object", "null"],
                    },
                },
            },
        ]
    },
    "SectionChange": _CHANGE,
    "JobPrompt": {
        "type": "object",
        "required": ["job_id", "kind", "ns", "key", "tag", "model", "sections"],
        "properties": {
            "job_id": {"type": "string"},
            "kind": {"type": "string"},
            "ns": {"type": "string"},
            "key": {"type": "string"},
            "tag": {"type": "string", "description": "the baseline tag (measure: the tag measured)"},
            "model": {"type": "string"},
            "settings": {"type": "object", "description": "min_section_tokens, eval_runs, gate, runs, ..."},
            "sections": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["path", "body", "frozen", "tokens", "overridden"],
                    "properties": {
                        "path": {"type": "string"},
                        "body": {"type": "string", "description": "as the baseline renders it"},
                        "frozen": {"type": "boolean"},
                        "tokens": {"type": "integer", "description": "for the job's model"},
                        "overridden": {"type": "boolean", "description": "the baseline tag overrides it"},
                    },
                },
            },
        },
    },
    "JobTrials": {
        "type": "object",
        "required": ["job_id", "status", "trials", "rejections", "running", "steps"],
        "properties": {
            "job_id": {"type": "string"},
            "status": {"type": "string"},
            "trials": {"type": "array", "items": _TRIAL},
            "rejections": {"type": "array", "items": _REJECTION},
            "running": {"type": "array", "items": _RUNNING, "description": "the running step's candidates"},
            "steps": {"type": "array", "items": _STEP, "description": "the step timeline"},
        },
    },
    "MeasureHistory": {
        "type": "object",
        "required": ["ns", "key", "tag", "points"],
        "properties": {
            "ns": {"type": "string"},
            "key": {"type": "string"},
            "tag": {"type": "string"},
            "points": {"type": "array", "items": _MEASURE_POINT, "description": "oldest first"},
        },
    },
    "Limits": {
        "type": "object",
        "required": ["configured", "shared", "routes"],
        "properties": {
            "configured": {"type": "boolean", "description": "OPTIFLOW_MODEL_LIMITS names routes"},
            "shared": {"type": "boolean", "description": "the state is the fleet's (Redis)"},
            "routes": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["name", "model"],
                    "properties": {
                        "name": {"type": "string"},
                        "model": {"type": "string"},
                        "api_base": {"type": ["string", "null"]},
                        "rpm": _NUMBER_OR_NULL,
                        "tpm": _NUMBER_OR_NULL,
                        "concurrency": {"type": ["integer", "null"]},
                        "factor": {"type": "number"},
                        "effective_rpm": _NUMBER_OR_NULL,
                        "effective_tpm": _NUMBER_OR_NULL,
                        "paused_s": {"type": "number"},
                        "in_flight": {"type": "integer"},
                        "backlog_s": {"type": "number"},
                        "shared": {"type": "boolean"},
                    },
                },
            },
        },
    },
    "Probe": {
        "type": "object",
        "required": ["ok"],
        "properties": {
            "ok": {"type": "boolean"},
            "checks": {"type": "object", "additionalProperties": {"type": "string"}},
            "down": {"type": "array", "items": {"type": "string"}},
        },
    },
}


@functools.cache
def openapi_document(token_required: bool = False) -> dict[str, Any]:
    """The document; ``token_required``: every /api operation needs the bearer token."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("optiflow")
    except PackageNotFoundError:  # a checkout on PYTHONPATH, not installed
        release = "0"
    api_security: list[dict[str, list[str]]] = [{"bearerAuth": []}] if token_required else [{}]
    limit = {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}
    seq = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
    paths: dict[str, Any] = {**_probe_paths(), **_job_paths(limit), **_more_paths(limit, seq)}
    for path, item in paths.items():
        if path.startswith("/api/"):
            for operation in item.values():
                operation["security"] = api_security
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "optiflow",
            "version": release,
            "description": "Submit, follow and cancel prompt-optimization jobs. Errors are "
            '{"error": {"code", "field", "message"}} with stable codes.',
        },
        "paths": paths,
        "components": {
            "schemas": {**_SCHEMAS, **_job_document_schemas()},
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
        },
    }


def _json_ok(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"200": _json(schema, description)}


def _probe_paths() -> dict[str, Any]:
    """The open probes and this document."""
    return {
        "/healthz": {
            "get": {
                "summary": "liveness (open; ?ready=1 is /readyz)",
                "security": [{}],
                "parameters": [{"name": "ready", "in": "query", "schema": {"type": "string"}}],
                "responses": {"200": _json(_ref("Probe"), "alive"), "503": _json(_ref("Probe"), "not ready")},
            }
        },
        "/readyz": {
            "get": {
                "summary": "readiness: the database and Redis answer (open)",
                "security": [{}],
                "responses": {
                    "200": _json(_ref("Probe"), "ready"),
                    "503": _json(_ref("Probe"), "a part is down; `down` names it"),
                },
            }
        },
        "/api/openapi.json": {
            "get": {
                "summary": "this document",
                "responses": _responses(_json_ok("the OpenAPI document", {"type": "object"})),
            }
        },
    }


def _job_paths(limit: dict[str, Any]) -> dict[str, Any]:
    """Listing, submitting and reading jobs."""
    return {
        "/api/jobs": {
            "get": {
                "summary": "recent jobs, newest first",
                "parameters": [
                    {
                        "name": "status",
                        "in": "query",
                        "description": "one status or several, comma-separated",
                        "schema": {"type": "string"},
                    },
                    {"name": "kind", "in": "query", "schema": {"type": "string"}},
                    limit,
                ],
                "responses": _responses(
                    _json_ok(
                        "the jobs",
                        {
                            "type": "object",
                            "required": ["jobs"],
                            "properties": {"jobs": {"type": "array", "items": _ref("JobSummary")}},
                        },
                    ),
                    "400",
                    "503",
                ),
            },
            "post": {
                "summary": "submit a job document; nothing is written when it is refused",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": _ref("JobDocument"), "example": EXAMPLE_DOCUMENT}
                    },
                },
                "responses": _responses(
                    {
                        "201": {
                            "description": "queued",
                            "headers": {"Location": {"schema": {"type": "string"}}},
                            "content": {
                                "application/json": {
                                    "schema": {
                                        "type": "object",
                                        "required": ["id", "status"],
                                        "properties": {
                                            "id": {"type": "string"},
                                            "status": {"const": "queued"},
                                        },
                                    }
                                }
                            },
                        }
                    },
                    "400",
                    "404",
                    "413",
                    "503",
                ),
            },
        },
        "/api/jobs/{job_id}": {
            "get": {
                "summary": "the job, its live progress, its result once finished",
                "parameters": [JOB_ID],
                "responses": _responses(_json_ok("the job", _ref("Job")), "404", "503"),
            }
        },
        "/api/jobs/{job_id}/prompt": {
            "get": {
                "summary": "the job's prompt as its baseline renders it (the original side of a diff)",
                "parameters": [JOB_ID],
                "responses": _responses(_json_ok("the prompt", _ref("JobPrompt")), "404", "503"),
            }
        },
        "/api/jobs/{job_id}/trials": {
            "get": {
                "summary": "the job's trials, rejections, running candidates and step timeline",
                "parameters": [JOB_ID],
                "responses": _responses(_json_ok("the trials", _ref("JobTrials")), "404", "503"),
            }
        },
    }


def _more_paths(limit: dict[str, Any], seq: dict[str, Any]) -> dict[str, Any]:
    """A prompt's measures, the model limits, cancelling a job and its event stream."""
    return {
        "/api/measures": {
            "get": {
                "summary": "the measure jobs of one prompt and tag, oldest first (a nightly cron's history)",
                "parameters": [
                    {"name": "ns", "in": "query", "required": True, "schema": {"type": "string"}},
                    {"name": "key", "in": "query", "required": True, "schema": {"type": "string"}},
                    {
                        "name": "tag",
                        "in": "query",
                        "description": "default stable",
                        "schema": {"type": "string"},
                    },
                    limit,
                ],
                "responses": _responses(_json_ok("the history", _ref("MeasureHistory")), "400", "503"),
            }
        },
        "/api/limits": {
            "get": {
                "summary": "each model route's rate limits and live state (OPTIFLOW_MODEL_LIMITS)",
                "responses": _responses(_json_ok("the routes", _ref("Limits")), "503"),
            }
        },
        "/api/jobs/{job_id}/cancel": {
            "post": {
                "summary": "cancel an unfinished job",
                "parameters": [JOB_ID],
                "responses": _responses(
                    {
                        "200": _json(_ref("JobSummary"), "ended (cancelled)"),
                        "202": _json(_ref("JobSummary"), "ends at its current step"),
                    },
                    "404",
                    "409",
                    "503",
                ),
            }
        },
        "/api/jobs/{job_id}/events": {
            "get": {
                "summary": "Server-Sent Events: the job's stored events in seq order until run_finished",
                "parameters": [
                    JOB_ID,
                    {"name": "after", "in": "query", "description": "resume after this seq", "schema": seq},
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "description": "resume after this seq (wins over ?after)",
                        "schema": seq,
                    },
                ],
                "responses": _responses(
                    {
                        "200": {
                            "description": "the stream (id: seq, event: type, data: the event as JSON)",
                            "content": {"text/event-stream": {"schema": {"type": "string"}}},
                        },
                        "204": {"description": "nothing is left to send"},
                    },
                    "400",
                    "404",
                    "503",
                ),
            }
        },
    }
