"""Every job is validated at submission, by one code path for the CLI, Python and HTTP: a document
that cannot run is refused naming the field, and nothing is written (no job row, no file, no Redis
key). Before, these were accepted (row written, 201) and failed later on a worker (issue 12)."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import yaml

from optiflow.errors import ValidationError
from optiflow.interfaces.client import Client
from optiflow.settings import Settings
from tests.interfaces.test_http import Server, job_document
from tests.support.workers import embedded_settings

LIMIT = 100  # OPTIFLOW_MAX_SAMPLE_RUNS in these tests: 4 samples x 50 runs is over it
ALLOWED = "tests.security.check_functions:fine"


def base() -> dict[str, Any]:
    return job_document(4)


def with_section_body(doc: dict[str, Any], extra: str) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["prompt"]["sections"][1]["body"] += extra
    return doc


def without(doc: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != key}


# name -> (document change, field named, words of the message)
BAD: dict[str, tuple[Callable[[dict[str, Any]], dict[str, Any]], str, str]] = {
    "python check outside the allowlist": (
        lambda d: {**d, "check": {"type": "python", "function": "os.system"}},
        "check.function",
        "not in the allowlist",
    ),
    "a parameter no sample provides": (
        lambda d: with_section_body(d, " Sign every answer as ${agent_name}."),
        "dataset",
        "'agent_name'",
    ),
    "a broken ${ placeholder": (
        lambda d: with_section_body(d, " Sign as ${agent_name"),
        "prompt.sections.tone",
        "malformed placeholder",
    ),
    "a lone $": (
        lambda d: with_section_body(d, " Refunds over $ 50 need approval."),
        "prompt.sections.tone",
        "malformed placeholder",
    ),
    "a regex RE2 does not run": (
        lambda d: {**d, "check": {"type": "regex", "pattern": "(?<=code )[A-Z]+-\\d+"}},
        "check.pattern",
        "unsupported regex",
    ),
    "no kind": (lambda d: without(d, "kind"), "kind", "required"),
    "eval_runs: true": (lambda d: {**d, "eval_runs": True}, "eval_runs", "valid integer"),
    'eval_runs: "3"': (lambda d: {**d, "eval_runs": "3"}, "eval_runs", "valid integer"),
    'fail_fast: "no"': (lambda d: {**d, "fail_fast": "no"}, "fail_fast", "valid boolean"),
    'model timeout: "30"': (
        lambda d: {**d, "model": {"model": "optiflow/sim", "timeout": "30"}},
        "model.timeout",
        "valid number",
    ),
    "samples x runs over the limit": (
        lambda d: {**d, "eval_runs": 50},
        "eval_runs",
        "above the limit of 100 (OPTIFLOW_MAX_SAMPLE_RUNS)",
    ),
}
CASES = pytest.mark.parametrize("case", list(BAD), ids=list(BAD))


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.exists() else []


def assert_names(field: str | None, message: str, case: str) -> None:
    _, want_field, words = BAD[case]
    assert field is not None and (field == want_field or field.endswith(f": {want_field}")), (field, message)
    assert words in message, message


# -- CLI ------------------------------------------------------------------------------------------
@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("OPTIFLOW_STORE", "OPTIFLOW_REDIS_URL", "OPTIFLOW_DATABASE_URL", "OPTIFLOW_BROKER_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPTIFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPTIFLOW_MAX_SAMPLE_RUNS", str(LIMIT))
    monkeypatch.setenv("OPTIFLOW_PYTHON_CHECKS", f'["{ALLOWED}"]')
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


@CASES
def test_cli_refuses_with_one_line_and_writes_nothing(
    case: str, home: Path, tmp_path: Path, cli_runner: Callable[..., tuple[int, str, str]]
) -> None:
    job = tmp_path / "bad.yaml"
    job.write_text(yaml.safe_dump(BAD[case][0](base()), sort_keys=False))
    code, out, err = cli_runner("submit", str(job))
    assert code == 2 and out == "", (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert re.match(r"^error\[(validation_error|limit_exceeded)\]: \S.*: \S.*$", line), line
    _, sep, message = line.partition(f"{BAD[case][1]}: ")
    assert sep and BAD[case][2] in message, line
    assert files_under(home) == []


# -- Python ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    settings = embedded_settings(tmp_path_factory.mktemp("admission-home")).model_copy(
        update={"max_sample_runs": LIMIT, "python_checks": [ALLOWED]}
    )
    with Client(settings) as c:
        yield c


@CASES
def test_python_refuses_and_writes_nothing(case: str, client: Client, tmp_path: Path) -> None:
    job = tmp_path / "bad.yaml"
    job.write_text(yaml.safe_dump(BAD[case][0](base()), sort_keys=False))
    before = files_under(client.settings.home)
    with pytest.raises(ValidationError) as refused:
        client.submit_file(job)
    assert_names(refused.value.field, refused.value.message, case)
    assert files_under(client.settings.home) == before
    assert client.runtime.jobs.list(limit=1000) == []


# -- HTTP -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def http(client: Client) -> Iterator[httpx.Client]:
    with Server(client) as server, httpx.Client(base_url=server.url, timeout=15) as c:
        yield c


@CASES
def test_http_refuses_with_400_and_writes_nothing(case: str, client: Client, http: httpx.Client) -> None:
    response = http.post("/api/jobs", json=BAD[case][0](base()))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] in ("validation_error", "limit_exceeded")
    assert_names(error["field"], error["message"], case)
    assert http.get("/api/jobs").json()["jobs"] == []


def test_the_good_document_is_accepted(client: Client, http: httpx.Client) -> None:
    """The base of every bad variant passes (with a python check on the allowlist) and runs."""
    response = http.post("/api/jobs", json={**base(), "check": {"type": "python", "function": ALLOWED}})
    assert response.status_code == 201, response.text
    result = client.job(response.json()["id"]).wait(timeout=120)
    assert result.status == "completed", result.error


# -- Redis: no key -------------------------------------------------------------------------------
@pytest.mark.redis
def test_refused_documents_write_no_redis_key(redis_url: str, redis_prefix: str, tmp_path: Path) -> None:
    from optiflow.jobfile import load_job_data

    settings = Settings(
        redis_url=redis_url,
        key_prefix=redis_prefix,
        home=tmp_path / "home",
        database_url=f"sqlite:///{tmp_path / 'jobs.db'}",
        max_sample_runs=LIMIT,
    )
    with Client(settings, embedded=False) as client:
        for case, (change, _, _) in BAD.items():
            with pytest.raises(ValidationError):
                client.submit(load_job_data(change(base()), source=case, store=client.runtime.store))
        assert client.runtime.jobs.list(limit=1000) == []
    keys = list(redis.Redis.from_url(redis_url).scan_iter(match=f"{redis_prefix}*"))
    assert keys == []
