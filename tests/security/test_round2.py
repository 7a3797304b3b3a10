"""The second round of hardening (issue 20): every input of the hostile-input run that took the
service down, pinned a thread or sent a key away, sent again. Each test fails before its fix."""

from __future__ import annotations

import copy
import time
from typing import Any

import httpx
import pytest

from optiflow.interfaces.client import Client
from optiflow.llm import simulated
from tests.security.conftest import Serve, job_ids
from tests.support.http import job_document

REPEATED = "When a customer asks about x, " * 4000  # 120 KB, no sentence end: k lead-ins x n chars


def measure_document(samples: int = 2, **changes: Any) -> dict[str, Any]:
    doc = job_document(samples)
    doc = {k: v for k, v in doc.items() if k in ("name", "prompt", "dataset", "check", "model")}
    return {**copy.deepcopy(doc), "kind": "measure", "runs": 1, **changes}


def with_filler(doc: dict[str, Any], text: str) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["prompt"]["sections"][1]["body"] += "\n\n" + text
    return doc


# -- high 1: the simulated model's parsers are linear ---------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        REPEATED,
        "When the x is below 3, " * 5200,
        "Questions about x y " * 6000,
        ("When a customer asks about x, " * 15 + "reply with filed as. ") * 250,  # gates satisfied
        "<expected>" * 12000 + "<output>" * 12000 + "<section>" * 12000 + "<input>" * 12000,
    ],
    ids=["rule lead-ins", "policy lead-ins", "hint lead-ins", "bounded sentences", "tags"],
)
def test_a_120_kb_repeated_phrase_parses_in_linear_time(text: str) -> None:
    simulated.parse_rules.cache_clear()
    simulated.parse_policy.cache_clear()
    t0 = time.perf_counter()
    simulated.parse_rules(text)
    simulated.parse_policy(text)
    simulated.rewrite_plan(text, ["x y"])
    simulated.compress_plan(text)
    simulated.judge_reply(text)
    simulated.rewrite_reply(text)
    assert time.perf_counter() - t0 < 0.5  # was 9-12 s each for the first three


def test_bounded_parsing_keeps_every_rule_of_a_real_prompt() -> None:
    text = (
        "Be kind. When a customer asks about a refund, reply with code RFD-201. When the health is "
        "below 0.25, reply with code FLEE. Otherwise reply with code EXPLORE. Questions about "
        "invoices are filed under BIL-150."
    )
    assert [r.label for r in simulated.parse_rules(text)] == ["RFD-201"]
    policy = simulated.parse_policy(text)
    assert [(r.ref, r.label) for r in policy.rules] == [("0.25", "FLEE")] and policy.default == "EXPLORE"
    assert simulated.rewrite_plan(text, ["my invoices"]).converted


def test_healthz_stays_responsive_while_a_120_kb_section_is_evaluated(serve: Serve, client: Client) -> None:
    doc = with_filler(measure_document(2), REPEATED)
    with serve() as server:
        http = httpx.Client(base_url=server.url, timeout=30)
        response = http.post("/api/jobs", json=doc)
        assert response.status_code == 201, response.text
        job_id = response.json()["id"]
        slowest = 0.0
        deadline = time.monotonic() + 60
        status = "queued"
        while time.monotonic() < deadline:
            t0 = time.perf_counter()
            assert http.get("/healthz").status_code == 200
            slowest = max(slowest, time.perf_counter() - t0)
            status = http.get(f"/api/jobs/{job_id}").json()["status"]
            if status in ("completed", "failed", "cancelled"):
                break
            time.sleep(0.05)
    assert status == "completed"
    assert slowest < 1.0  # was 28 s


def test_the_operator_can_refuse_the_simulated_model_over_http(serve: Serve, client: Client) -> None:
    before = job_ids(client)
    with serve(http_allow_sim=False, allowed_models=("openai/*",)) as server:
        response = httpx.post(f"{server.url}/api/jobs", json=measure_document(2), timeout=30)
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("policy_violation", "model.model")
    assert "OPTIFLOW_HTTP_ALLOW_SIM" in error["message"]
    assert job_ids(client) == before


def test_sim_pass_dist_is_allowed_over_http(serve: Serve, client: Client) -> None:
    model = {"model": "optiflow/sim", "params": {"sim_pass_dist": "beta(3.3,3.3)"}}
    with serve() as server:
        response = httpx.post(f"{server.url}/api/jobs", json=measure_document(1, model=model), timeout=30)
    assert response.status_code == 201, response.text
