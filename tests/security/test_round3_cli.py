"""Issue 27 on the CLI: a YAML alias bomb is refused in milliseconds (medium 10), a home folder that
cannot be made is one line naming OPTIFLOW_HOME (low 12), and ``optiflow demo`` on Redis with no
worker says so after a few seconds instead of sitting at "Queued" (low 13)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from optiflow.errors import ValidationError
from optiflow.files import MAX_ALIAS_VALUES, parse_yaml
from tests.support.http import EXAMPLE_DIR

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("OPTIFLOW_STORE", "OPTIFLOW_REDIS_URL", "OPTIFLOW_DATABASE_URL", "OPTIFLOW_BROKER_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPTIFLOW_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def one_line_error(code: int, err: str, field: str, *words: str) -> str:
    assert code == 2, err
    lines = [line for line in err.strip().splitlines() if "error[" in line]
    assert len(lines) == 1 and f"{field}:" in lines[0], err
    assert "Traceback" not in err
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def laughs(levels: int = 9) -> str:
    """The 1 KB "billion laughs": each level aliases the previous one nine times."""
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    names = "abcdefghijklmnop"
    for i in range(1, levels):
        text += f"{names[i]}: &{names[i]} [" + ", ".join([f"*{names[i - 1]}"] * 9) + "]\n"
    return text


def test_a_yaml_alias_bomb_is_refused_in_milliseconds(home: Path, tmp_path: Path, cli_runner: Cli) -> None:
    bomb = tmp_path / "laughs.yaml"
    bomb.write_text(laughs())
    assert bomb.stat().st_size < 1100
    t0 = time.monotonic()
    code, _, err = cli_runner("submit", str(bomb))
    elapsed = time.monotonic() - t0
    one_line_error(code, err, str(bomb), "aliases", f"{MAX_ALIAS_VALUES:,} values")
    assert elapsed < 5  # was 53 s of CPU with no output; a refusal at the parser's events
    assert not (home / "optiflow.db").exists() or "laughs" not in (home / "optiflow.db").read_bytes().decode(
        "latin-1"
    )


def test_the_bomb_is_refused_at_the_parser_events() -> None:
    t0 = time.thread_time()
    with pytest.raises(ValidationError, match="aliases"):
        parse_yaml(laughs(), "laughs.yaml")
    assert time.thread_time() - t0 < 0.5  # about 10 ms: no value is built


def test_aliases_within_the_bound_still_work() -> None:
    data = parse_yaml("base: &b {model: optiflow/sim, timeout: 30}\njudge: *b\nother: *b\n", "doc.yaml")
    assert data["judge"] == data["other"] == {"model": "optiflow/sim", "timeout": 30}
    with pytest.raises(ValidationError, match="aliases"):
        parse_yaml(laughs(6), "doc.yaml")  # 9^5 = 59,049 values x 9: over the bound
    parse_yaml(laughs(5), "doc.yaml")  # 9^5 values: within it


@pytest.mark.parametrize("command", [("jobs",), ("demo",), ("submit", str(EXAMPLE_DIR / "job.yaml"))])
def test_a_home_that_cannot_be_made_is_one_line(
    cli_runner: Cli, monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...]
) -> None:
    for var in ("OPTIFLOW_STORE", "OPTIFLOW_REDIS_URL", "OPTIFLOW_DATABASE_URL", "OPTIFLOW_BROKER_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPTIFLOW_HOME", "/proc/1/nope")
    code, _, err = cli_runner(*command)
    one_line_error(code, err, "OPTIFLOW_HOME", "cannot create '/proc/1/nope'")


@pytest.mark.redis
def test_demo_with_no_worker_says_so(redis_url: str, redis_prefix: str, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "OPTIFLOW_HOME": str(tmp_path / "home"),
        "OPTIFLOW_REDIS_URL": redis_url,
        "OPTIFLOW_KEY_PREFIX": redis_prefix,
        "PYTHONUNBUFFERED": "1",
    }
    for var in ("OPTIFLOW_STORE", "OPTIFLOW_DATABASE_URL", "OPTIFLOW_BROKER_URL"):
        env.pop(var, None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "optiflow.interfaces.cli", "demo"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 90
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("note:"):
                break
    finally:
        proc.kill()
        proc.wait(10)
    note = next((line for line in lines if line.startswith("note:")), None)
    assert note is not None, "".join(lines)
    assert "no worker consumes the optiflow.control queue" in note and "optiflow worker" in note
    assert any(line.startswith("submitted ") for line in lines)
