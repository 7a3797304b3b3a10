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
        ("When a customer asks about x, " * 15 + "reply with code A filed as. ") * 250,
        "When a customer asks about x " * 4000 + ", reply with code A.",
        "<expected>" * 12000 + "<output>" * 12000 + "<section>" * 12000 + "<input>" * 12000,
    ],
    ids=["rule lead-ins", "policy lead-ins", "hint lead-ins", "sentences", "one far tail", "tags"],
)
def test_a_120_kb_repeated_phrase_parses_in_linear_time(text: str) -> None:
    simulated.clear_caches()
    t0 = time.perf_counter()
    simulated.parse_rules(text)
    simulated.parse_policy(text)
    simulated.rewrite_plan(text, ["x y"])
    simulated.compress_plan(text)
    simulated.judge_reply(text)
    simulated.rewrite_reply(text)
    # was 9-12 s each for the first three; linear takes ~0.1 s, the bound leaves a loaded CI room
    assert time.perf_counter() - t0 < 3


_PIECES = [
    *("When a customer asks about ", "When the ", "when an user writes regarding ", "refund", " x "),
    *("health is below ", "0.5", "3", "limit", ", ", ",", ". ", "! ", "? ", ": ", "; ", " then "),
    *("reply with code ", "respond with the label ", "RFD-201", "ABC", "abc", "Otherwise ", "otherwise, "),
    *("Questions about ", "question on ", " are filed under ", " is routed as code ", "this filed under "),
    *("\n", "\n\n", "  ", "v1.2", "1.", "x"),
]


def test_the_linear_scan_finds_exactly_what_the_patterns_find() -> None:
    """A randomized differential test: on short texts (where the patterns are fast) the linear
    scan returns the same matches as ``pattern.finditer``."""
    import random

    rng = random.Random(20)
    scans = [
        (simulated._RULE_SCAN, simulated.RULE_RE),
        (simulated._POLICY_SCAN, simulated.POLICY_RE),
        (simulated._DEFAULT_SCAN, simulated.DEFAULT_RE),
        (simulated._HINT_SCAN, simulated.HINT_RE),
    ]
    for _ in range(3000):
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 25)))
        for scan, pattern in scans:
            expected = [(m.span(), m.groupdict()) for m in pattern.finditer(text)]
            assert [(m.span(), m.groupdict()) for m in simulated._scan(scan, text)] == expected, text


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
    assert slowest < 5  # was 28 s; a few ms when the control worker is not the one parsing


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


# -- high 2: bounded timeouts and latencies, finite numbers, cancel frees threads, clean errors ------
def post_job(server: Any, doc: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.url}/api/jobs", json=doc, timeout=30)


def wait_ended(http: httpx.Client, job_id: str, timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job: dict[str, Any] = http.get(f"/api/jobs/{job_id}").json()
        if job["status"] in ("completed", "failed", "cancelled"):
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not end in {timeout_s} s")


@pytest.mark.parametrize(
    ("model", "field", "words"),
    [
        (
            {"model": "optiflow/sim", "timeout": 86400, "retries": 0},
            "model.timeout",
            "less than or equal to 600",
        ),
        ({"model": "optiflow/sim", "timeout": 1e308}, "model.timeout", "less than or equal to 600"),
        ({"model": "optiflow/sim", "timeout": 500.0, "retries": 5}, "model", "redelivery window"),
        (
            {"model": "optiflow/sim", "params": {"sim_latency_ms": 86400000}},
            "model",
            "sim_latency_ms: must be between 0 and 60000 ms",
        ),
        ({"model": "optiflow/sim", "params": {"sim_ttft_ms": -1}}, "model", "sim_ttft_ms"),
    ],
    ids=["a day", "1e308", "timeout x retries", "sim latency of a day", "negative ttft"],
)
def test_timeouts_and_latencies_are_bounded(
    serve: Serve, client: Client, model: dict[str, Any], field: str, words: str
) -> None:
    before = job_ids(client)
    with serve() as server:
        response = post_job(server, measure_document(2, model=model))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["field"] == field and words in error["message"], error
    assert job_ids(client) == before


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'"timeout": 1e400', "model.timeout"),
        (b'"timeout": 30, "params": {"sim_latency_ms": -1e400}', "model.params.sim_latency_ms"),
    ],
)
def test_a_non_finite_number_is_a_field_error(serve: Serve, client: Client, raw: bytes, field: str) -> None:
    import json

    doc = measure_document(2)
    text = (
        json.dumps(doc)
        .encode()
        .replace(b'"model": {"model": "optiflow/sim"', b'"model": {"model": "optiflow/sim", ' + raw)
    )
    assert raw in text
    before = job_ids(client)
    with serve() as server:
        response = httpx.post(
            f"{server.url}/api/jobs", content=text, headers={"Content-Type": "application/json"}, timeout=30
        )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["field"] == field and "not a finite number" in error["message"], error
    assert job_ids(client) == before


def test_non_finite_numbers_are_refused_in_files_and_python(tmp_path: Any) -> None:
    from optiflow.core.model import ModelConfig
    from optiflow.errors import ValidationError
    from optiflow.jobfile import load_job

    job = tmp_path / "job.yaml"
    doc = measure_document(1)
    import yaml

    job.write_text(
        yaml.safe_dump({**doc, "model": {"model": "optiflow/sim", "timeout": 30}}).replace("30", ".inf")
    )
    with pytest.raises(ValidationError) as err:
        load_job(job)
    assert "model.timeout" in (err.value.field or "") and "finite" in err.value.message
    with pytest.raises(ValueError, match="finite"):
        ModelConfig(model="optiflow/sim", timeout=float("inf"))
    with pytest.raises(ValueError, match="finite"):
        ModelConfig(model="openai/x", params={"temperature": float("nan")})


def test_cancel_wakes_the_threads_a_long_simulated_latency_holds(serve: Serve, client: Client) -> None:
    slow = {"model": "optiflow/sim", "timeout": 600, "retries": 0, "params": {"sim_latency_ms": 60000}}
    with serve() as server:
        http = httpx.Client(base_url=server.url, timeout=30)
        warm = http.post("/api/jobs", json=measure_document(1)).json()["id"]  # litellm imported
        assert wait_ended(http, warm, 120)["status"] == "completed"
        response = http.post("/api/jobs", json=measure_document(4, model=slow))
        assert response.status_code == 201, response.text
        job_id = response.json()["id"]
        deadline = time.monotonic() + 20
        while http.get(f"/api/jobs/{job_id}").json()["status"] != "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # the evaluations are asleep in the model's latency
        t0 = time.monotonic()
        assert http.post(f"/api/jobs/{job_id}/cancel").status_code == 202
        assert wait_ended(http, job_id, 20)["status"] == "cancelled"
        # the next job gets the threads back: it runs at once (was: stuck at 0/2 for the latency)
        response = http.post("/api/jobs", json=measure_document(2))
        assert wait_ended(http, response.json()["id"], 20)["status"] == "completed"
        assert time.monotonic() - t0 < 15


def test_a_job_error_carries_no_traceback_and_no_server_path(serve: Serve, client: Client) -> None:
    """``sim_seed: "abc"`` makes the simulated provider raise inside litellm, which wraps the
    error with its traceback and the server's file paths."""
    model = {"model": "optiflow/sim", "retries": 0, "params": {"sim_seed": "abc"}}
    with serve() as server:
        http = httpx.Client(base_url=server.url, timeout=30)
        response = http.post("/api/jobs", json=measure_document(2, model=model))
        assert response.status_code == 201, response.text
        job_id = response.json()["id"]
        job = wait_ended(http, job_id)
        texts = [http.get(f"/api/jobs/{job_id}{tail}").text for tail in ("", "/trials", "/events")]
    assert job["status"] in ("failed", "completed")
    for text in texts:
        assert "Traceback" not in text and "site-packages" not in text and ".py" not in text, text[:2000]
    assert "invalid literal" in "".join(texts)  # the error is still said


def test_the_longest_model_call_ends_within_the_brokers_redelivery_window() -> None:
    from optiflow.core.model import MAX_CALL_S, MAX_TIMEOUT_S
    from optiflow.distributed.app import VISIBILITY_TIMEOUT_S

    assert MAX_TIMEOUT_S <= MAX_CALL_S <= VISIBILITY_TIMEOUT_S / 2
