"""The API the page reads beyond a job's row, against the real server on an embedded client: a
job's prompt (the original side of a diff), its trials with what each changes, its step timeline,
the history of measure jobs of one prompt and tag, the model limits. Each keeps the guard (token,
Host) and the refusals of the rest of the API. The views behind them are also checked on records
written by hand (a gate's statistics, a running step, several rounds of one candidate), which
real jobs do not all produce on demand."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from optiflow.core.progress import Counts, progress_event, trial_events
from optiflow.core.records import Trial
from optiflow.interfaces.client import Client
from optiflow.interfaces.http import HttpConfig
from optiflow.interfaces.http.handlers import PAGE_CSP
from optiflow.interfaces.http.views import (
    measure_point,
    outcome,
    step_label,
    step_name,
    steps_view,
    trials_view,
)
from optiflow.persistence.jobs import JobRecord
from tests.support.http import Server, job_document
from tests.support.page import measure_document
from tests.support.workers import embedded_settings

TOKEN = "page-api-token-1b7d"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LIMITS = '{"sim": {"model": "optiflow/sim", "rpm": 6000, "concurrency": 16}}'


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    settings = embedded_settings(tmp_path_factory.mktemp("page-api-home")).model_copy(
        update={"model_limits": LIMITS}
    )
    with Client(settings) as c:
        yield c


@pytest.fixture(scope="module")
def server(client: Client) -> Iterator[Server]:
    config = HttpConfig.from_settings(client.settings.model_copy(update={"api_token": SecretStr(TOKEN)}))
    with Server(client, poll_s=0.05, keepalive_s=0.3, config=config) as s:
        yield s


@pytest.fixture(scope="module")
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30, headers=AUTH) as c:
        yield c


def finish(http: httpx.Client, document: dict[str, Any]) -> str:
    created = http.post("/api/jobs", json=document)
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    with http.stream("GET", f"/api/jobs/{job_id}/events") as response:
        response.read()  # the stream ends with run_finished
    assert http.get(f"/api/jobs/{job_id}").json()["status"] == "completed"
    return str(job_id)


@pytest.fixture(scope="module")
def compress_job(http: httpx.Client) -> str:
    return finish(http, {**job_document(samples=8), "eval_runs": 2, "require_sensitivity": False})


def test_prompt_is_the_baseline_as_rendered_with_token_counts(http: httpx.Client, compress_job: str) -> None:
    prompt = http.get(f"/api/jobs/{compress_job}/prompt").json()
    doc = job_document()
    assert (prompt["ns"], prompt["key"], prompt["tag"], prompt["model"]) == (
        "support",
        "bot",
        "stable",
        "optiflow/sim",
    )
    assert [s["path"] for s in prompt["sections"]] == [s["path"] for s in doc["prompt"]["sections"]]
    assert [s["body"] for s in prompt["sections"]] == [s["body"] for s in doc["prompt"]["sections"]]
    assert [s["frozen"] for s in prompt["sections"]] == [
        s.get("frozen", False) for s in doc["prompt"]["sections"]
    ]
    assert prompt["settings"]["eval_runs"] == 2 and prompt["settings"]["min_section_tokens"] == 40
    assert "model" not in prompt["settings"]  # never the model's params (an operator's may hold a key)
    report = http.get(f"/api/jobs/{compress_job}").json()["result"]["report"]
    tokens = {s["path"]: s["tokens"] for s in prompt["sections"]}
    for m in report["modifications"]:  # the bars and the report count alike
        assert tokens["/".join(m["section_path"])] == m["original_tokens"]


def test_trials_say_what_each_candidate_changes_and_the_timeline_has_every_step(
    http: httpx.Client, compress_job: str
) -> None:
    data = http.get(f"/api/jobs/{compress_job}/trials").json()
    assert data["status"] == "completed" and data["running"] == []
    report = http.get(f"/api/jobs/{compress_job}").json()["result"]["report"]
    by_name = {t["name"]: t for t in data["trials"]}
    assert by_name["baseline"]["changes"] == []
    for m in report["modifications"]:
        path = "/".join(m["section_path"])
        (change,) = by_name[f"candidate-{m['section_path'][-1]}"]["changes"]
        assert (change["path"], change["body"], change["tokens"]) == (
            path,
            m["proposed_body"],
            m["proposed_tokens"],
        )
        assert change["original_tokens"] == m["original_tokens"]
    steps = data["steps"]
    assert [s["index"] for s in steps] == list(range(report["stats"]["steps"]))
    assert steps[0]["name"] == "baseline" and steps[1]["name"] == "candidates"
    assert sum(s["evaluations"] for s in steps) == report["stats"]["evaluations"]
    assert all(s["state"] == "done" and s["seconds"] is not None for s in steps)


def test_measure_history_of_one_prompt_and_tag_oldest_first(http: httpx.Client) -> None:
    ids = [finish(http, measure_document(samples=4 + i, runs=1)) for i in range(3)]
    finish(http, measure_document(samples=4, runs=1, tag="other"))
    history = http.get("/api/measures", params={"ns": "support", "key": "bot", "tag": "stable"}).json()
    assert [p["job_id"] for p in history["points"]] == ids
    assert all(0 <= p["lower"] <= p["pass_rate"] <= p["upper"] <= 1 for p in history["points"])
    assert [p["evaluations"] for p in history["points"]] == [4, 5, 6]
    latest = http.get("/api/measures", params={"ns": "support", "key": "bot", "limit": "2"}).json()
    assert [p["job_id"] for p in latest["points"]] == ids[1:]  # tag defaults to stable
    assert http.get("/api/measures", params={"ns": "support", "key": "nope"}).json()["points"] == []


def test_measure_history_marks_the_drift_reference_and_each_night_against_it(http: httpx.Client) -> None:
    """Issue 30 on the embedded default: a reference set through the API, two nights compared with
    it, and a changed dataset that starts a reference of its own, as the page reads them."""
    tag = {"tag": "drift-api"}
    ids = [finish(http, measure_document(samples=6, runs=4, drift={"set_reference": True}, **tag))]
    ids += [finish(http, measure_document(samples=6, runs=2, **tag)) for _ in range(2)]
    ids.append(finish(http, measure_document(samples=5, runs=2, **tag)))
    points = http.get("/api/measures", params={"ns": "support", "key": "bot", **tag}).json()["points"]
    assert [p["job_id"] for p in points] == ids
    marks = [p["drift"] for p in points]
    assert [m["status"] for m in marks] == ["reference", "compared", "compared", "reference"]
    assert [m["night"] for m in marks] == [None, 1, 2, None]
    assert marks[1]["reference_id"] == marks[0]["reference_id"] != marks[3]["reference_id"]
    assert all(m["low"] <= m["estimate"] <= m["high"] and not m["drop_shown"] for m in marks[1:3])
    assert marks[2]["headline"].startswith("no drift shown (drop < ")
    assert "the dataset changed since the reference" in marks[3]["headline"]
    job = http.get(f"/api/jobs/{ids[2]}").json()
    assert job["result"]["report"]["drift"]["evidence"]["night"] == 2
    assert job["result"]["report"]["first_run"] == 4 + 2  # after the reference's runs and night 1's


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"key": "bot"}, "ns"),
        ({"ns": "support"}, "key"),
        ({"ns": "support", "key": "bot", "tag": "a b"}, "tag"),
        ({"ns": "x" * 201, "key": "bot"}, "ns"),
        ({"ns": "support", "key": "bot", "limit": "0"}, "limit"),
    ],
)
def test_bad_measure_query_is_400_naming_the_field(
    http: httpx.Client, params: dict[str, str], field: str
) -> None:
    response = http.get("/api/measures", params=params)
    assert response.status_code == 400
    assert response.json()["error"]["field"] == field


def test_limits_list_each_route_with_its_live_state(http: httpx.Client) -> None:
    limits = http.get("/api/limits").json()
    assert limits["configured"] is True and limits["shared"] is False  # embedded: in this process
    (route,) = limits["routes"]
    assert (route["name"], route["model"], route["rpm"], route["concurrency"]) == (
        "sim",
        "optiflow/sim",
        6000,
        16,
    )
    assert route["effective_rpm"] == 6000 and route["in_flight"] == 0


@pytest.mark.parametrize(
    "path", ["/api/jobs/{id}/prompt", "/api/jobs/{id}/trials", "/api/measures?ns=a&key=b", "/api/limits"]
)
def test_every_new_route_keeps_the_guard(server: Server, compress_job: str, path: str) -> None:
    url = server.url + path.format(id=compress_job)
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers={**AUTH, "Host": "evil.example"}).status_code == 403
    assert httpx.get(url, headers=AUTH).status_code == 200


@pytest.mark.parametrize("route", ["prompt", "trials"])
def test_unknown_job_is_404(http: httpx.Client, route: str) -> None:
    for job in ("0" * 32, "x" * 300):
        response = http.get(f"/api/jobs/{job}/{route}")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"


def test_page_files_are_served_under_a_strict_policy(server: Server) -> None:
    for path, kind in (("/", "text/html"), ("/jobs/abc", "text/html"), ("/page/page.js", "text/javascript"),
                       ("/page/page.css", "text/css")):  # fmt: skip
        response = httpx.get(server.url + path)
        assert response.status_code == 200 and response.headers["Content-Type"].startswith(kind)
        assert response.headers["Content-Security-Policy"] == PAGE_CSP
        assert response.headers["X-Content-Type-Options"] == "nosniff"
    html = httpx.get(server.url + "/").text
    assert "<script>" not in html and "<style>" not in html and "style=" not in html
    assert "http://" not in html and "https://" not in html
    assert "'unsafe-inline'" not in PAGE_CSP and "script-src 'self'" in PAGE_CSP
    assert httpx.get(server.url + "/page/other.js").status_code == 404
    # the best box says when the held-out test split did not confirm the best
    script = httpx.get(server.url + "/page/page.js").text
    assert "r.test.confirmed === false" in script
    assert "not confirmed on held-out data: nothing is applied" in script


# -- the views on records written by hand ---------------------------------------------------------
T0 = datetime(2026, 1, 1, tzinfo=UTC)
PROMPT = {
    "ns": "demo",
    "key": "p",
    "sections": [
        {"path": ["rules"], "body": "Always answer politely and reply with code A-1 when asked."},
        {"path": ["tail"], "body": "Thanks.", "frozen": True},
    ],
}


def record(**changes: Any) -> JobRecord:
    spec = {
        "kind": "compress",
        "name": "demo",
        "prompt": PROMPT,
        "dataset": {"samples": [{"id": "s1", "input": "q", "expected": "A-1"}]},
        "check": {"type": "contains"},
        "model": {"model": "optiflow/sim"},
        "strategy": {"type": "rule"},
        "eval_runs": 2,
    }
    base = {"id": "job1", "kind": "compress", "name": "demo", "status": "running", "spec": spec,
            "created_at": T0, "updated_at": T0}  # fmt: skip
    return JobRecord.model_validate({**base, **changes})


def count(text: str) -> int:
    return len(text.split())


def stored(events: list[Any], start: int = 1) -> list[Any]:
    return [
        e.model_copy(update={"seq": start + i, "created_at": T0 + timedelta(seconds=i)})
        for i, e in enumerate(events)
    ]


def trial(cid: str, name: str, step: int, **extra: Any) -> Trial:
    body = (
        {"sections": {"rules": "Reply with code A-1."}} if name.startswith("candidate") else {"sections": {}}
    )
    return Trial(candidate_id=f"job1-{cid}", step_index=step, status="completed", objective_score=0.9,
                 configuration=body, extra={"name": name, **extra})  # fmt: skip


def test_rounds_of_a_gate_keep_their_own_steps_and_names() -> None:
    """Under the paired gate a candidate's trial row is rewritten each round (its step index
    moves), and the baseline's runs are extended: the timeline comes from the events."""
    base = trial("baseline", "baseline", 0)
    cand = [trial("aa", "candidate-rules", 1, round=1), trial("bb", "candidate-other", 1, round=1)]
    round2 = [trial("aa", "candidate-rules", 2, round=2), trial("baseline", "baseline", 2)]
    events = stored(
        [
            progress_event(0, Counts(evaluations_total=4)),
            *trial_events([base]),
            progress_event(1, Counts(evaluations_done=4, evaluations_total=12)),
            *trial_events(cand),
            progress_event(2, Counts(evaluations_done=12, evaluations_total=18)),
            *trial_events(round2),
            progress_event(3, Counts(evaluations_done=18, evaluations_total=18)),
        ]
    )
    steps = steps_view(record(status="completed"), events)
    assert [(s["index"], s["name"], s["evaluations"]) for s in steps] == [
        (0, "baseline", 4),
        (1, "candidates", 8),
        (2, "candidates round 2", 6),
    ]
    assert steps[1]["candidates"] == 2 and steps[1]["seconds"] == 3.0


def test_the_running_step_comes_from_the_pending_action_with_its_proposals() -> None:
    overrides = [{"path": ["rules"], "expected_hash": "h", "body": "Reply with code A-1."}]
    target = {"experiment": {"id": "job1-aa", "name": "candidate-rules", "overrides_tag": "opt-job1-aa"},
              "overrides": overrides, "sample_ids": ["s1"], "runs": 2}  # fmt: skip
    action = {"type": "step", "index": 1, "name": "candidates", "targets": [target]}
    rec = record(action=action, step_index=1)
    view = trials_view(rec, [trial("baseline", "baseline", 0)], [], count)
    (running,) = view["running"]
    assert (running["candidate_id"], running["name"], running["evaluations"]) == ("aa", "candidate-rules", 2)
    assert running["changes"] == [
        {"path": "rules", "body": "Reply with code A-1.", "tokens": 4, "original_tokens": 10}
    ]
    events = stored([progress_event(0, Counts()), progress_event(1, Counts(evaluations_done=2))])
    steps = steps_view(rec, events)
    assert [(s["name"], s["state"]) for s in steps] == [("proposals", "done"), ("candidates", "running")]
    assert steps[-1]["evaluations"] == 2
    assert steps_view(record(status="cancelled", action=action), events)[-1]["state"] == "done"


def test_step_names() -> None:
    assert step_name(["baseline"]) == "baseline"
    assert step_name(["candidate-a", "candidate-b"]) == step_name(["candidate-a"]) == "candidates"
    assert step_name(["baseline", "greedy-1"]) == "greedy-1"
    assert step_name([]) == "step"
    # greedy sets chained in one step, and a gate's later rounds, in the CLI's words
    assert step_name(["greedy-1", "greedy-2"]) == "greedy-1, greedy-2"
    assert step_name([f"greedy-{n}" for n in range(1, 12)]) == "greedy-1 … greedy-11"
    assert step_label("greedy-2-3") == "greedy-2 round 3"
    assert step_label("candidates-2") == "candidates round 2"
    assert step_label("combined-3") == "combined round 3"
    assert step_label("greedy-2") == step_name(["greedy-2"]) == "greedy-2"


def test_the_jobs_list_says_what_each_finished_job_found() -> None:
    compress = {
        "kind": "compress",
        "total_token_reduction": 587,
        "modifications": [{}, {}, {}],
        "rejected": [{}],
    }
    assert outcome(record(status="completed", result={"report": compress})) == {
        "text": "\N{MINUS SIGN}587 tokens · 3 accepted, 1 rejected",
        "bad": False,
    }
    iterations = [{"best_so_far": 0.2}, {"best_so_far": 0.6}, {"best_so_far": 0.875}]
    optimize = {
        "kind": "optimize",
        "iterations": iterations,
        "best_candidate_id": "c4",
        "baseline_candidate_id": "c0",
    }
    # a report from before headlines: the scores, labelled as evaluated (not an estimate)
    raw = "raw score 0.20 → 0.875 (as evaluated, not an estimate)"
    assert outcome(record(kind="optimize", result={"report": optimize}))["text"] == raw
    # the selection's own estimate leads when the report has it (issue 28)
    headline = "in-sample gain +5.0% [+1.0%, +9.0%] (paired)"
    assert outcome(record(kind="optimize", result={"report": {**optimize, "headline": headline}}))[
        "text"
    ] == (headline)
    # a best the held-out test split did not confirm is no improvement (nothing is applied)
    confirmed = {
        **optimize,
        "test": {"confirmed": True},
        "gain_summary": "improved: held-out score 0.2 -> 0.9",
    }
    assert outcome(record(kind="optimize", result={"report": confirmed}))["text"] == raw
    for unconfirmed in (
        {**optimize, "test": {"confirmed": False}},
        {
            **optimize,
            "gain_summary": "not confirmed on held-out data: pass-rate gain +1.0%; nothing is applied",
        },
    ):
        assert outcome(record(kind="optimize", result={"report": unconfirmed})) == {
            "text": "raw score 0.20 → 0.875: not confirmed on held-out data",
            "bad": False,
        }
    in_sample = {
        **optimize,
        "gain_summary": "in-sample gain +5.0% [...]: not confirmed on held-out data (use splits)",
    }
    assert outcome(record(kind="optimize", result={"report": in_sample}))["text"] == raw
    kept = {**optimize, "best_candidate_id": "c0", "test": {"confirmed": None}}
    assert (
        outcome(record(kind="optimize", result={"report": kept}))["text"]
        == "baseline 0.20 kept: no better candidate"
    )
    measure = {
        "kind": "measure",
        "pass_rate": 0.864,
        "wilson": {"lower": 0.795, "upper": 0.91},
        "fail_below": 0.8,
    }
    below = outcome(record(kind="measure", status="completed", result={"report": measure}))
    assert below == {"text": "pass rate 86.4% · lower bound 79.5% under the floor 80.0%", "bad": True}
    above = outcome(record(kind="measure", result={"report": {**measure, "fail_below": 0.7}}))
    assert above is not None and above["bad"] is False
    assert outcome(record(status="running")) is None
    assert outcome(record(status="failed", result={"report": None, "error": "boom"})) is None


def test_a_measure_point_knows_the_prompt_it_measured() -> None:
    report = {
        "kind": "measure",
        "pass_rate": 0.5,
        "wilson": {"lower": 0.3, "upper": 0.7},
        "mean_tokens": 984.0,
    }
    spec = record().spec
    before = measure_point(record(kind="measure", result={"report": report}))
    same = measure_point(record(kind="measure", result={"report": report}))
    changed = {**spec, "prompt": {**PROMPT, "sections": [{"path": ["rules"], "body": "Reply A-1."}]}}
    after = measure_point(record(kind="measure", spec=changed, result={"report": report}))
    assert before is not None and same is not None and after is not None
    assert before["prompt_hash"] == same["prompt_hash"] != after["prompt_hash"]
    assert after["mean_tokens"] == 984.0


def test_a_measure_point_needs_a_measure_report() -> None:
    report = {
        "kind": "measure",
        "pass_rate": 0.5,
        "wilson": {"lower": 0.3, "upper": 0.7},
        "latency_ms": {"p50": 3.0},
    }
    point = measure_point(record(kind="measure", status="completed", result={"report": report}))
    assert point is not None and (point["pass_rate"], point["lower"], point["latency_p50"]) == (0.5, 0.3, 3.0)
    assert measure_point(record(status="failed", result={"report": None})) is None
    assert measure_point(record(status="completed", result={"report": {"kind": "compress"}})) is None
