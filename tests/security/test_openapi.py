"""The OpenAPI document (``/api/openapi.json``) and schemathesis against the live server.

The document is a valid OpenAPI 3.1 description of every route; schemathesis generates requests
from it (valid and invalid bodies, parameters and headers) against the real server with an
embedded worker, and no answer may be a 5xx, or a status, content type or body the document does
not declare. Derandomized with a fixed number of examples, so a run is reproducible and takes
well under a minute.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.security.conftest import AUTH, TOKEN, Serve
from tests.support.http import Server

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def live(serve: Serve) -> Iterator[Server]:
    with serve(api_token=TOKEN) as server:
        yield server


# Reproducible and bounded: a fixed seed, deterministic generation, no example database. The job
# document's schema is large, so its coverage phase (thousands of boundary cases) is left out;
# its fuzzing phase runs more examples instead, valid and invalid.
CONFIG = {
    "seed": 1212,
    "generation": {"max-examples": 20, "deterministic": True, "database": "none"},
    "operations": [
        {
            "include-path": "/api/jobs",
            "include-method": "POST",
            "phases": {"coverage": {"enabled": False}},
            "generation": {"max-examples": 40},
        }
    ],
}


@pytest.fixture(scope="module")
def api_schema(live: Server) -> Any:
    config = SchemathesisConfig.from_dict(CONFIG)
    return schemathesis.openapi.from_url(f"{live.url}/api/openapi.json", config=config, headers=AUTH)


def test_the_document_describes_every_route_and_the_job_document(live: Server) -> None:
    from openapi_spec_validator import validate

    doc = httpx.get(f"{live.url}/api/openapi.json", headers=AUTH).json()
    validate(doc)
    assert set(doc["paths"]) == {
        "/healthz",
        "/readyz",
        "/api/openapi.json",
        "/api/jobs",
        "/api/jobs/{job_id}",
        "/api/jobs/{job_id}/cancel",
        "/api/jobs/{job_id}/events",
        "/api/jobs/{job_id}/prompt",
        "/api/jobs/{job_id}/trials",
        "/api/measures",
        "/api/limits",
    }
    post = doc["paths"]["/api/jobs"]["post"]
    assert {"201", "400", "401", "403", "413", "503"} <= set(post["responses"])
    assert post["security"] == [{"bearerAuth": []}]
    schemas = doc["components"]["schemas"]
    assert {"CompressSpec", "OptimizeSpec", "MeasureSpec", "ModelConfig", "Error"} <= set(schemas)
    assert schemas["CompressSpec"]["required"] == ["kind", "prompt", "dataset", "check", "model"]
    assert {"$ref": "#/components/schemas/Prompt"} in schemas["MeasureSpec"]["properties"]["prompt"]["anyOf"]
    example = post["requestBody"]["content"]["application/json"]["example"]
    created = httpx.post(f"{live.url}/api/jobs", json=example, headers=AUTH)
    assert created.status_code == 201, created.text  # the documented example is a working request


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck))
def test_no_request_the_document_allows_or_forbids_gets_a_5xx(case: Any, live: Server) -> None:
    case.call_and_validate(headers=AUTH, checks=CHECKS, timeout=10)
