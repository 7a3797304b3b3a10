"""Bad settings and arguments get one line and exit 2, never a traceback (issue 12); a lost Redis
during ``submit --wait`` gets one line naming the job and exit 5 (4 is a measure that shows drift)."""

from __future__ import annotations

import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.cli.conftest import Cli
from tests.support import redis_server
from tests.support.workers import ROOT

ONE_LINE = re.compile(r"^error\[(?P<code>[a-z_]+)\]: (?P<field>[^:]+): (?P<message>\S.*)$")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("OPTIFLOW_STORE", "OPTIFLOW_REDIS_URL", "OPTIFLOW_DATABASE_URL", "OPTIFLOW_BROKER_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPTIFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


def one_line(result: tuple[int, str, str], code: str, field: str, words: str) -> None:
    rc, out, err = result
    assert rc == 2, (rc, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    m = ONE_LINE.match(lines[0])
    assert m, lines[0]
    assert (m["code"], m["field"]) == (code, field), lines[0]
    assert words in m["message"], lines[0]


@pytest.mark.parametrize(
    ("variable", "value", "words"),
    [
        ("OPTIFLOW_EVAL_CONCURRENCY", "0", "greater than or equal to 1"),
        ("OPTIFLOW_EVAL_CONCURRENCY", "100000", "less than or equal to 512"),
        ("OPTIFLOW_STORE", "bogus", "'auto', 'memory', 'filesystem', 'redis' or 'sql' (got 'bogus')"),
        ("OPTIFLOW_PYTHON_CHECKS", "notjson", "not valid JSON"),
    ],
)
def test_bad_setting_names_its_variable(
    variable: str, value: str, words: str, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, value)
    one_line(cli("jobs"), "config_error", variable, words)


def test_eval_with_an_empty_model_name(cli: Cli) -> None:
    one_line(
        cli("eval", "--prompt", "p.yaml", "--dataset", "d.jsonl", "--model", ""),
        "validation_error",
        "--model",
        "must name a model",
    )


def test_serve_on_an_address_that_is_none(cli: Cli) -> None:
    one_line(cli("serve", "--host", "256.1.1.1"), "validation_error", "--host", "not an IP address")


def test_worker_with_absurd_concurrency(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPTIFLOW_REDIS_URL", "redis://127.0.0.1:1/0")  # never reached
    one_line(cli("worker", "-c", "100000"), "usage_error", "--concurrency", "not in the range 1<=x<=512")


@pytest.fixture
def history_file(tmp_path: Path) -> Path:
    from optiflow.core.optimize.document import history_document
    from tests.core.optimize.test_outputs import history

    path = tmp_path / "history.yaml"
    path.write_text(yaml.safe_dump(history_document(history()), allow_unicode=True))
    return path


@pytest.mark.parametrize(
    ("option", "value", "words"),
    [
        ("--termination", '{"bogus": 1}', "unknown termination key"),
        ("--termination", '[{"type": "max_iterations", "iterations": 0}]', "greater than or equal to 1"),
        ("--scorer", "no_such_scorer", "does not match any of the expected tags"),
        ("--acceptance", '{"alpha": 7}', "less than 1"),
    ],
)
def test_replay_with_a_bad_option_is_refused_not_a_difference(
    option: str, value: str, words: str, cli: Cli, history_file: Path
) -> None:
    assert cli("replay", str(history_file))[0] == 0  # the recorded run replays as recorded
    one_line(cli("replay", str(history_file), option, value), "validation_error", option, words)


# -- Redis lost during submit --wait ---------------------------------------------------------------
@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    with redis_server.private_redis(tmp_path) as server:
        yield server


@pytest.mark.timeout(120)
def test_submit_wait_when_redis_dies_names_the_job_and_exits_4(
    cli: Cli, home: Path, monkeypatch: pytest.MonkeyPatch, private_redis: tuple[str, subprocess.Popen[bytes]]
) -> None:
    url, proc = private_redis
    monkeypatch.setenv("OPTIFLOW_REDIS_URL", url)
    monkeypatch.setenv("OPTIFLOW_DATABASE_URL", f"sqlite:///{home.parent / 'jobs.db'}")
    # no worker runs: the job waits in the queue until Redis goes away under the waiting CLI
    threading.Timer(2.0, proc.kill).start()
    rc, out, err = cli("submit", str(ROOT / "examples" / "support-bot" / "job.yaml"), "--wait")
    job_id = re.search(r"submitted ([0-9a-f]{32})", out)
    assert job_id, (out, err)
    assert rc == 5, (rc, out, err)
    last = err.strip().splitlines()[-1]
    assert "Traceback" not in err, err
    assert last.startswith("error[redis_unreachable]: ") and f"optiflow watch {job_id[1]}" in last, last
