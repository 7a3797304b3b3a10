"""No check can hang a process (issue 12): user regexes run on RE2, ``python`` checks in processes
killed at their time bound, and checks read a bounded output.

``^([A-Za-z ]+)+$`` against the simulated model's answers ("Thanks for getting in touch about
refunds. ...") backtracks for hours on Python's ``re``; it once froze the embedded server, its
``/healthz`` and SIGTERM included.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from optiflow.checking import MAX_CHECK_CHARS, regex_search
from optiflow.core.checks import JsonFieldCheck, PythonCheck, RegexCheck
from optiflow.core.dataset import Sample
from optiflow.core.model import ModelConfig
from optiflow.core.prompt import Prompt
from optiflow.evaluator import evaluate
from optiflow.interfaces.client import Client
from tests.interfaces.test_http import Server, job_document
from tests.support.workers import embedded_settings

CATASTROPHIC = "^([A-Za-z ]+)+$"
SIM = ModelConfig(model="optiflow/sim")
PROMPT = Prompt(
    ns="t",
    key="k",
    sections=({"path": "rules", "body": "When a customer asks about refunds, reply with code RFD-201."},),  # type: ignore[arg-type]
)
SAMPLE = Sample(id="q1", input="How do refunds work?", expected="RFD-201")
HERE = "tests.security.check_functions"


def one(
    check: object, *, model: ModelConfig = SIM, timeout_s: float = 10.0, sample: Sample = SAMPLE
) -> object:
    return evaluate(
        prompt=PROMPT,
        overrides=None,
        sample=sample,
        check=check,  # type: ignore[arg-type]
        model=model,
        run=0,
        experiment_id="e",
        python_checks=[f"{HERE}:sleep_forever", f"{HERE}:spin_forever", f"{HERE}:fine"],
        check_timeout_s=timeout_s,
    )


@pytest.mark.timeout(60)  # litellm is imported on the first evaluation
def test_catastrophic_pattern_is_answered_in_linear_time() -> None:
    assert not regex_search(CATASTROPHIC, "a" * 5000 + "!")
    assert regex_search(CATASTROPHIC, "a" * 5000)
    result = one(RegexCheck(pattern=CATASTROPHIC))
    assert result.error is None and not result.passed  # type: ignore[attr-defined]
    assert "no match" in result.reason  # type: ignore[attr-defined]


@pytest.mark.timeout(60)
def test_python_check_over_its_time_bound_is_an_error_of_its_evaluation_and_is_killed(
    tmp_path: Path,
) -> None:
    sample = SAMPLE.model_copy(update={"expected": str(tmp_path)})
    hung = PythonCheck(function=f"{HERE}:sleep_forever")
    started = time.monotonic()
    with ThreadPoolExecutor(4) as pool:  # more hung checks than check processes: none piles up
        results = list(pool.map(lambda _: one(hung, timeout_s=1, sample=sample), range(4)))
    assert time.monotonic() - started < 30
    for r in results:
        assert not r.passed and r.error is not None  # type: ignore[attr-defined]
        assert "ran longer than 1s" in r.error and r.reason == "check timed out"  # type: ignore[attr-defined]
    spun = one(PythonCheck(function=f"{HERE}:spin_forever"), timeout_s=1)
    assert spun.error is not None and "ran longer than 1s" in spun.error  # type: ignore[attr-defined]
    pids = [int(p.name) for p in tmp_path.iterdir()]
    assert pids
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in pids), "a timed-out check process is still running"
    # the pool replaced its processes: a well-behaved check still runs
    ok = one(PythonCheck(function=f"{HERE}:fine"))
    assert ok.error is None and ok.passed  # type: ignore[attr-defined]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def test_output_over_the_cap_is_an_error_not_a_long_check() -> None:
    big = ModelConfig(model="openai/gpt-4o-mini", params={"mock_response": "x" * (MAX_CHECK_CHARS + 1)})
    result = one(RegexCheck(pattern="x+$"), model=big)
    assert result.error is not None and "over the checks' limit" in result.error  # type: ignore[attr-defined]


@pytest.mark.timeout(20)
def test_json_field_on_a_deeply_nested_output_fails_the_sample() -> None:
    nested = ModelConfig(model="openai/gpt-4o-mini", params={"mock_response": "[" * 200_000 + "]" * 200_000})
    result = one(JsonFieldCheck(field="code"), model=nested)
    assert not result.passed and result.error is None  # type: ignore[attr-defined]


# -- the embedded server stays responsive ---------------------------------------------------------
@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with Client(embedded_settings(tmp_path / "home")) as client, Server(client, poll_s=0.05) as s:
        yield s


@pytest.mark.timeout(120)
def test_catastrophic_regex_job_ends_while_healthz_answers(server: Server) -> None:
    document = {
        **job_document(4),
        "check": {"type": "regex", "pattern": CATASTROPHIC},
        "model": {"model": "optiflow/sim", "params": {"sim_latency_ms": 20}},
    }
    health: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        with httpx.Client(base_url=server.url, timeout=2) as http:
            while not stop.is_set():
                started = time.monotonic()
                assert http.get("/healthz").status_code == 200
                health.append(time.monotonic() - started)
                time.sleep(0.02)

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()  # before the job: the probes span it however fast the job ends
    with httpx.Client(base_url=server.url, timeout=10) as http:
        created = http.post("/api/jobs", json=document)
        assert created.status_code == 201, created.text
        job_id = created.json()["id"]
        deadline = time.monotonic() + 90
        status = "queued"
        while time.monotonic() < deadline:
            status = http.get(f"/api/jobs/{job_id}").json()["status"]
            if status in ("completed", "failed", "cancelled"):
                break
            time.sleep(0.1)
        stop.set()
        prober.join(10)
    assert status in ("completed", "failed"), status  # no sample matches: the baseline fails the job
    # the spec's 100 ms for the typical probe; a loaded CI machine may stall one, never for long
    assert health and sorted(health)[len(health) // 2] < 0.1 and max(health) < 2.0, health
