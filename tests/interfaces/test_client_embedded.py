"""The Python client on the embedded default, end to end: memory broker, in-process results, a
real Celery worker in a thread, SQLite and the filesystem store under ``home``. Then the same
through the CLI in a child process with nothing but OPTIFLOW_HOME set.

One module-scoped client runs every job here: litellm's import (seconds) is paid once.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from optiflow.core.compress.report import OptimizationReport
from optiflow.core.result import OptimizeResult
from optiflow.core.sections import path_str
from optiflow.errors import JobError
from optiflow.interfaces.client import Client, JobHandle
from optiflow.jobfile import load_job
from tests.support.inline import run_inline
from tests.support.workers import ROOT, embedded_settings

EXAMPLE = ROOT / "examples" / "support-bot" / "job.yaml"
NS, KEY = "support", "bot"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    with Client(embedded_settings(tmp_path_factory.mktemp("embedded-home"))) as c:
        assert c.runtime.embedded
        yield c


@pytest.fixture(scope="module")
def reference() -> OptimizationReport:
    """The pure workflow driven in this process with the same model answers."""
    return run_inline(load_job(EXAMPLE, overrides={"fail_fast": False}))


@pytest.fixture(scope="module")
def first(client: Client) -> tuple[JobHandle, OptimizeResult]:
    started = time.monotonic()
    job = client.submit_file(EXAMPLE, fail_fast=False)
    result = job.wait(timeout=180)
    print(f"\nembedded example job (fail_fast off): {time.monotonic() - started:.1f}s")
    return job, result


def temp_tags(client: Client) -> list[str]:
    return [t for t in client.runtime.store.list_tags(NS, KEY) if t.startswith("opt-")]


def test_result_equals_the_pure_workflow(
    first: tuple[JobHandle, OptimizeResult], reference: OptimizationReport
) -> None:
    job, result = first
    assert isinstance(result, OptimizeResult)
    assert result.ok and result.status == "completed" and result.error is None
    assert result.job_id == job.id
    got = result.raise_for_error().report
    assert got is not None
    assert got.modifications == reference.modifications
    assert got.rejected == reference.rejected
    assert got.baseline_pass_rate == reference.baseline_pass_rate
    assert got.total_token_reduction == reference.total_token_reduction > 0
    assert got.modifications and got.rejected  # the example exercises both
    assert got.stats.fail_fast_skipped == 0  # fail_fast off: every evaluation ran


def test_job_state_after_completion(client: Client, first: tuple[JobHandle, OptimizeResult]) -> None:
    job, result = first
    assert job.status() == "completed"
    assert job.result() == result  # the database copy equals the reply
    assert job.wait(timeout=1) == result  # a finished job answers at once
    # every per-sample result is there once the job has ended (the last step's are written first)
    report = result.raise_for_error().report
    assert report is not None
    assert len(client.runtime.jobs.trial_items(job.id)) == report.stats.evaluations
    again = client.job(job.id)
    assert again.id == job.id and again.status() == "completed"
    assert [r.id for r in client.runtime.jobs.list("completed")] == [job.id]
    assert temp_tags(client) == []
    # nothing touched stable
    assert client.runtime.store.resolve(NS, KEY, "stable") is None
    assert client.runtime.store.history(NS, KEY) == []


def test_apply_versions_stable(client: Client, first: tuple[JobHandle, OptimizeResult]) -> None:
    job, result = first
    assert result.report is not None
    spec = load_job(EXAMPLE)
    sample = spec.dataset.samples[0].input
    before = spec.prompt.render(sample).system

    applied = client.apply(result)
    assert applied is not None and applied.status == "applied"
    v1, original = applied.version, applied.original
    assert v1 is not None and original is not None
    assert (original.version, original.source, original.overrides.sections) == ("v1.0.0", "original", ())
    assert (v1.tag, v1.version, v1.previous, v1.source) == ("stable", "v1.0.1", "v1.0.0", f"job:{job.id}")
    again = client.apply(result)  # the same job twice: says so, writes nothing
    assert again is not None and again.unchanged and again.version == v1
    stable = client.runtime.store.resolve(NS, KEY, "stable")
    assert stable is not None
    assert spec.prompt.render(sample, overrides=stable).system != before
    bodies = spec.prompt.effective_bodies(stable)
    for m in result.report.modifications:
        assert bodies[m.section_path] == m.proposed_body, path_str(m.section_path)

    # a job on the new stable starts from it: its baseline snapshot is v1.0.1's overrides
    second = client.submit_file(EXAMPLE)
    assert client.runtime.spec(second.id).baseline_overrides == stable.sections
    r2 = second.wait(timeout=120).raise_for_error()
    assert r2.report is not None
    if not r2.report.modifications:  # nothing left to accept: apply writes no version
        assert client.apply(r2) is None
        assert [v.version for v in client.runtime.store.history(NS, KEY)] == ["v1.0.0", "v1.0.1"]

    # rolling back to the original undoes the apply: stable renders the prompt as shipped again
    undone = client.runtime.store.rollback(spec.prompt.descriptor(), original.version)
    assert undone.version == "v1.0.2" and not undone.overrides.sections
    assert spec.prompt.render(sample, overrides=undone.overrides).system == before

    # another job (from an empty baseline tag) that accepts changes: applying it bumps the patch
    third = client.submit_file(EXAMPLE, baseline_tag="fresh", eval_runs=1)
    with pytest.raises(JobError, match="did not finish within"):
        third.wait(timeout=0.01)
    r3 = third.wait(timeout=120).raise_for_error()
    assert r3.report is not None and r3.report.modifications
    applied3 = client.apply(r3.job_id)  # by job id
    assert applied3 is not None and applied3.original is None
    v2 = applied3.version
    assert v2 is not None
    assert (v2.version, v2.previous, v2.source) == ("v1.0.3", "v1.0.2", f"job:{third.id}")
    history = client.runtime.store.history(NS, KEY)
    assert [v.version for v in history] == ["v1.0.0", "v1.0.1", "v1.0.2", "v1.0.3"]
    assert temp_tags(client) == []


def test_cancel_running_embedded_job(client: Client) -> None:
    job = client.submit_file(
        EXAMPLE, model={"model": "optiflow/sim", "params": {"sim_latency_ms": 50}}, fail_fast=False
    )
    deadline = time.monotonic() + 30
    while job.status() != "running" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert job.status() == "running"
    started = time.monotonic()
    job.cancel()
    result = job.wait(timeout=30)
    print(f"\nembedded cancel -> reply {time.monotonic() - started:.2f}s")
    assert result.status == "cancelled" and result.report is None
    assert job.status() == "cancelled"
    assert temp_tags(client) == []
    with pytest.raises(JobError, match="cancelled"):
        client.apply(result)


# -- the CLI in a child process ------------------------------------------------------------------
CHILD = """\
import contextlib, io, json, sys
from optiflow.interfaces.cli import run

def call(argv):
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            run(argv)
        except SystemExit as exc:
            code = exc.code or 0
    return {"code": code, "out": out.getvalue(), "err": err.getvalue()}

demo = call(["demo"])
submit = call(["submit", sys.argv[1], "--json"])
applied = call(["apply", demo["out"].split("submitted ", 1)[1].split()[0]])
print(json.dumps({"demo": demo, "submit": submit, "apply": applied, "again": call(["demo"])}))
"""


def test_demo_and_submit_json_on_a_clean_environment(tmp_path: Path, reference: OptimizationReport) -> None:
    """``optiflow demo``, ``optiflow submit JOB --json``, ``optiflow apply`` of the demo's job and
    ``optiflow demo`` again (one interpreter: litellm's import is paid once) with OPTIFLOW_HOME as
    the only OPTIFLOW_* variable, from an unrelated directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPTIFLOW_")}
    env["OPTIFLOW_HOME"] = str(tmp_path / "home")
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(EXAMPLE)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    print(f"\ndemo + submit --json in a child process: {time.monotonic() - started:.1f}s")
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout.strip().splitlines()[-1])

    demo = runs["demo"]
    assert demo["code"] == 0, demo
    out = demo["out"]
    job_id = out.split("submitted ", 1)[1].split()[0]
    assert f"job {job_id}: completed" in out
    accepted = [line.split()[1] for line in out.splitlines() if line.strip().startswith("+ ")]
    assert accepted == [path_str(m.section_path) for m in reference.modifications]
    assert f"apply it with: optiflow apply {job_id}" in out
    home = tmp_path / "home"
    assert f"  job: sqlite:///{home / 'optiflow.db'}\n" in out  # it says where it wrote
    assert f"  temporary tags: files under {home / 'store'} (removed when the job ends)" in out
    assert "tag 'demo', which nothing writes" in out

    # applying the demo's job writes stable, and the next demo still tells the whole story
    assert runs["apply"]["code"] == 0, runs["apply"]
    assert runs["apply"]["out"].startswith(
        "applied: support/bot stable v1.0.1 (the prompt before it is v1.0.0"
    )
    again = runs["again"]
    assert again["code"] == 0, again
    assert [
        line.split()[1] for line in again["out"].splitlines() if line.strip().startswith("+ ")
    ] == accepted

    submit = runs["submit"]
    assert submit["code"] == 0, submit
    assert submit["err"].startswith("submitted ")  # the id goes to stderr: stdout is pure JSON
    doc = json.loads(submit["out"])
    assert doc["status"] == "completed"
    assert doc["report"]["total_token_reduction"] == reference.total_token_reduction
    assert doc["job_id"] != job_id

    # the state went to OPTIFLOW_HOME, nowhere else
    assert (tmp_path / "home" / "optiflow.db").exists()
    assert not (tmp_path / ".optiflow").exists()
    with contextlib.closing(__import__("sqlite3").connect(tmp_path / "home" / "optiflow.db")) as db:
        rows = sorted(db.execute("select id, status from optiflow_jobs where kind != 'measure'"))
        measures = list(db.execute("select status from optiflow_jobs where kind = 'measure'"))
    again_id = again["out"].split("submitted ", 1)[1].split()[0]
    assert rows == sorted([(job_id, "completed"), (doc["job_id"], "completed"), (again_id, "completed")])
    assert measures == [("completed",)]  # the apply measured stable as accepted: the drift reference
