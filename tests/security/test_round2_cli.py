"""The low items of issue 20 on the CLI and the Python client: each hostile input is a clear
one-line error naming the field (exit 2), and nothing is written."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from optiflow.errors import ValidationError
from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job_data
from tests.support.http import EXAMPLE_DIR, job_document
from tests.support.workers import embedded_settings

Cli = Callable[..., tuple[int, str, str]]
PROMPT = str(EXAMPLE_DIR / "prompt.yaml")
DATASET = str(EXAMPLE_DIR / "dataset.jsonl")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("OPTIFLOW_STORE", "OPTIFLOW_REDIS_URL", "OPTIFLOW_DATABASE_URL", "OPTIFLOW_BROKER_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPTIFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPTIFLOW_RETRY_BACKOFF_S", "0.001")
    return tmp_path / "home"


@pytest.fixture
def cli(home: Path, cli_runner: Cli) -> Cli:
    return cli_runner


def one_line_error(code: int, err: str, field: str) -> None:
    assert code == 2, err
    lines = [line for line in err.strip().splitlines() if "error[" in line]
    assert len(lines) == 1 and f"{field}:" in lines[0], err
    assert "Traceback" not in err


def nested(depth: int) -> str:
    return "a: " + "[" * depth + "]" * depth + "\n"


# -- YAML nested 900 deep: one depth limit everywhere ---------------------------------------------
def test_deep_yaml_is_a_field_error_on_every_reader(cli: Cli, home: Path, tmp_path: Path) -> None:
    deep = tmp_path / "deep.yaml"
    deep.write_text(nested(900))
    for args in (
        ("submit", str(deep)),
        ("replay", str(deep)),
        ("prompt", "push", str(deep)),
        ("eval", "--prompt", PROMPT, "--dataset", str(deep), "--model", "optiflow/sim"),
    ):
        code, _out, err = cli(*args)
        one_line_error(code, err, str(deep))
        assert "nested deeper than 64 levels" in err, (args, err)
    shallow = tmp_path / "shallow.yaml"
    shallow.write_text(nested(70))  # parses, but over the limit every path shares
    code, _out, err = cli("submit", str(shallow))
    one_line_error(code, err, str(shallow))
    assert not (home / "optiflow.db").exists() or "jobs" not in cli("jobs")[1]


def test_deep_model_limits_are_a_config_error(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from optiflow.errors import ConfigError
    from optiflow.settings import Settings

    deep = tmp_path / "limits.yaml"
    deep.write_text(nested(900))
    with pytest.raises(ConfigError, match="nested deeper"):
        Settings(model_limits=str(deep)).limits()
    with pytest.raises(ConfigError):
        Settings(model_limits="[" * 5000 + "]" * 5000).limits()


# -- control characters in job names and sample ids -----------------------------------------------
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"name": "x\x1b]0;pwned\x07\x1b[2J"}, "name"),
        ({"dataset": [{"id": "a\x1b[2J", "input": {"question": "hi"}, "expected": "X"}]}, "dataset"),
    ],
    ids=["job name", "sample id"],
)
def test_control_characters_are_refused_at_admission(home: Path, change: dict[str, Any], field: str) -> None:
    doc = {**job_document(2), **change}
    with Client(embedded_settings(home)) as client:
        before = client.runtime.jobs.list(limit=10)
        with pytest.raises(ValidationError, match="control character") as err:
            client.submit(load_job_data(doc, source="t"))
        assert (err.value.field or "").startswith(field)
        assert client.runtime.jobs.list(limit=10) == before


# -- baseline_overrides and gate.protect are checked at submission ---------------------------------
@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        (
            {"baseline_overrides": [{"path": "nosuch", "expected_hash": "0" * 64, "body": "x"}]},
            "baseline_overrides.0.path",
            "unknown section 'nosuch'",
        ),
        (
            {"baseline_overrides": [{"path": "persona", "expected_hash": "0" * 64, "body": "x"}]},
            "baseline_overrides.0",
            "frozen",
        ),
        ({"gate": {"protect": ["refund-1", "no-such-sample"]}}, "gate.protect", "'no-such-sample'"),
    ],
    ids=["unknown path", "frozen section", "unknown protect id"],
)
def test_baseline_overrides_and_protect_are_checked_at_submission(
    home: Path, change: dict[str, Any], field: str, words: str
) -> None:
    doc = {**job_document(4), **change}
    with Client(embedded_settings(home)) as client:
        with pytest.raises(ValidationError) as err:
            client.submit(load_job_data(doc, source="t"))
        assert err.value.field == field and words in err.value.message, err.value
        assert client.runtime.jobs.list(limit=10) == []


def test_protect_by_tag_still_works(home: Path) -> None:
    from optiflow.admission import check_protect

    doc = {**job_document(4), "gate": {"protect": ["refund-1"]}}
    spec = load_job_data(doc, source="t")
    tags = {t for s in spec.dataset.samples for t in s.tags}
    check_protect(spec)
    if tags:
        check_protect(
            spec.model_copy(update={"gate": spec.gate.model_copy(update={"protect": (min(tags),)})})
        )


# -- a CSV with a UTF-8 byte-order mark ------------------------------------------------------------
def test_a_csv_with_a_byte_order_mark_loads(tmp_path: Path) -> None:
    from optiflow.files import load_dataset

    path = tmp_path / "excel.csv"
    path.write_bytes("\ufeffid,question,expected\nq1,refund please,RFD-201\n".encode())
    dataset = load_dataset(path)
    assert [s.id for s in dataset.samples] == ["q1"]


# -- optiflow eval when every evaluation errored ---------------------------------------------------
def test_eval_fails_when_every_evaluation_errored(cli: Cli) -> None:
    code, _out, err = cli(
        "eval", "--prompt", PROMPT, "--dataset", DATASET, "--model", "optiflow/sim", "--runs", "1",
        "--param", "sim_error=auth", "--param", "sim_error_rate=1", "--retries", "0",
    )  # fmt: skip
    if "--param" in err and "no such option" in err:
        pytest.skip("eval takes params another way")
    one_line_error(code, err, "--model")
    assert "every evaluation errored" in err


# -- cron --env-file with garbage ------------------------------------------------------------------
def test_cron_refuses_a_garbage_env_file(cli: Cli, home: Path, tmp_path: Path) -> None:
    env = tmp_path / "garbage.env"
    env.write_text("this is not an env file\nOPTIFLOW_HOME /tmp/elsewhere\n")
    job = tmp_path / "measure.yaml"
    job.write_text((EXAMPLE_DIR / "measure.yaml").read_text())
    code, _out, err = cli("cron", str(job), "--env-file", str(env))
    one_line_error(code, err, "--env-file")
    assert "line 1" in err and not home.exists()
    from optiflow.interfaces.cli.cron import load_env_file

    good = tmp_path / "good.env"
    good.write_text("# comment\nexport OPTIFLOW_X_TEST=1\n")
    assert load_env_file(good) == {"OPTIFLOW_X_TEST": "1"}
    os.environ.pop("OPTIFLOW_X_TEST", None)


# -- an unwritable --history-dir -------------------------------------------------------------------
def test_an_unwritable_history_dir_is_refused_before_the_job(cli: Cli, home: Path, tmp_path: Path) -> None:
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("x")
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({**job_document(2), "kind": "compress"}))
    code, _out, err = cli("submit", str(job), "--wait", "--history-dir", str(blocked / "sub"))
    one_line_error(code, err, "--history-dir")
    code, _out, err = cli("report", "0" * 32, "--history-dir", str(blocked))
    one_line_error(code, err, "--history-dir")


# -- optiflow cancel of a finished job -------------------------------------------------------------
def test_cancel_of_a_finished_job_is_a_conflict(cli: Cli, home: Path) -> None:
    with Client(embedded_settings(home)) as client:
        job = client.submit(load_job_data({**job_document(1), "strategy": {"type": "rule"}}, source="t"))
        job.wait(timeout=120)
    code, _out, err = cli("cancel", job.id)
    assert code == 2, err
    assert "error[job_conflict]" in err and "already completed" in err


_ = json


# -- a baseline no sample passes fails under every gate, whatever the floor ------------------------
@pytest.mark.parametrize("mode", ["paired", "strict", "auto"])
def test_a_baseline_nothing_passes_fails_the_job_and_applies_nothing(home: Path, mode: str) -> None:
    doc = {
        **job_document(4),
        "strategy": {"type": "rule"},
        "check": {"type": "regex", "pattern": "^NOTHING-MATCHES-THIS$"},
        "gate": {"mode": mode, "min_baseline_pass_rate": 0.0},
    }
    with Client(embedded_settings(home)) as client:
        spec = load_job_data(doc, source="t")
        result = client.submit(spec).wait(timeout=120)
        assert result.status == "failed", result
        assert "no baseline run passed" in (result.error or "")
        assert client.runtime.store.resolve(spec.prompt.ns, spec.prompt.key, "stable") is None


# -- Redis down: POST /api/jobs answers redis_unavailable, optiflow watch one line -----------------
def _dead_redis_settings(home: Path) -> Any:
    from optiflow.llm.local_model import free_port
    from optiflow.settings import Settings

    return Settings(
        home=home,
        redis_url=f"redis://127.0.0.1:{free_port()}/0",
        broker_url=None,
        result_backend=None,
        database_url=f"sqlite:///{home / 'jobs.db'}",
    )


def test_submitting_during_a_redis_outage_is_redis_unavailable(home: Path) -> None:
    import httpx

    from tests.support.http import Server

    home.mkdir(parents=True, exist_ok=True)
    settings = _dead_redis_settings(home)
    with Client(settings) as client, Server(client, poll_s=0.05, keepalive_s=0.3) as server:
        response = httpx.post(f"{server.url}/api/jobs", json=job_document(2), timeout=30)
    assert response.status_code == 503, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("redis_unavailable", "redis")
    assert "127.0.0.1" not in error["message"]


def test_watch_during_a_redis_outage_is_one_line(
    cli: Cli, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uuid

    from optiflow.core.progress import status_changed

    home.mkdir(parents=True, exist_ok=True)
    settings = _dead_redis_settings(home)
    spec = load_job_data(job_document(2), source="t")
    job_id = uuid.uuid4().hex
    with Client(settings) as client:
        client.runtime.jobs.create(
            job_id, spec.kind, spec.name, spec.model_dump(mode="json"), events=[status_changed("running")]
        )
    monkeypatch.setenv("OPTIFLOW_REDIS_URL", str(settings.redis_url))
    monkeypatch.setenv("OPTIFLOW_DATABASE_URL", str(settings.database_url))
    code, _out, err = cli("watch", job_id, "--timeout", "5")
    assert code != 0 and "Traceback" not in err, err
    assert len([line for line in err.strip().splitlines() if line.strip()]) <= 2, err


def test_a_stored_name_with_control_characters_is_printed_escaped(cli: Cli, home: Path) -> None:
    """A row written before admission refused them (or straight into the database)."""
    import uuid

    from optiflow.core.progress import status_changed

    spec = load_job_data(job_document(1), source="t")
    with Client(embedded_settings(home)) as client:
        client.runtime.jobs.create(
            uuid.uuid4().hex,
            spec.kind,
            "evil\x1b]0;pwned\x07\x1b[2J",
            spec.model_dump(mode="json"),
            events=[status_changed("queued")],
        )
    code, out, err = cli("jobs")
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out
    assert "evil\\x1b]0;pwned\\x07\\x1b[2J" in out
