"""``optiflow replay JOB_ID``: a finished optimize job replays from the jobs database (issue 14's
papercut: the output of ``optiflow history ID`` could not be replayed, ``missing 'settings'``).

The job is the weak-helpdesk example run by the CLI on the embedded default (SQLite under a
temporary home); its stored report is the history document ``submit`` writes to a file, so both
replay alike. ``optiflow history``'s rounds view is refused with one line saying what to replay."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from tests.support.workers import ROOT

EXAMPLE = ROOT / "examples" / "weak-helpdesk" / "job.yaml"
ERROR = re.compile(r"^error\[(?P<code>[a-z_]+)\]: (?P<field>[^:]+): (?P<message>.+)$")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("OPTIFLOW_STORE", "OPTIFLOW_REDIS_URL", "OPTIFLOW_DATABASE_URL", "OPTIFLOW_BROKER_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPTIFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


def job_ids(home: Path, kind: str) -> list[str]:
    with sqlite3.connect(home / "optiflow.db") as conn:
        return [
            r[0]
            for r in conn.execute("select id from optiflow_jobs where kind = ? order by created_at", (kind,))
        ]


def refused(result: tuple[int, str, str], code: str, field: str, words: str) -> None:
    rc, out, err = result
    assert rc == 2, (rc, out, err)
    (line,) = err.strip().splitlines()
    m = ERROR.match(line)
    assert m and (m["code"], m["field"]) == (code, field), line
    assert words in m["message"], line


def test_a_finished_optimize_job_replays_from_the_database(cli: Cli, home: Path, tmp_path: Path) -> None:
    code, _, err = cli("submit", str(EXAMPLE), "--history-dir", str(tmp_path / "out"))
    assert code == 0, err
    (job_id,) = job_ids(home, "optimize")
    (written,) = (tmp_path / "out").rglob("*.yaml")

    code, out, _ = cli("replay", job_id)
    assert code == 0, out
    replayed = re.match(rf"^{job_id}: (\d+) decisions replayed, 0 differ$", out.strip())
    assert replayed, out
    code, from_file, _ = cli("replay", str(written))  # the history file says the same
    assert code == 0 and from_file.split(":", 1)[1] == out.split(":", 1)[1]

    # other settings decide otherwise: listed, exit 1
    code, out, _ = cli("replay", job_id, "--termination", '[{"type": "max_iterations", "iterations": 1}]')
    assert code == 1
    assert "stop" in out and "differ" in out

    # `optiflow history`'s rounds view is not a replayable document: one line says what is
    code, rounds, _ = cli("history", job_id, "--format", "yaml")
    assert code == 0
    view = tmp_path / "rounds.yaml"
    view.write_text(rounds)
    refused(cli("replay", str(view)), "validation_error", str(view), f"optiflow replay {job_id}")


def test_what_cannot_be_replayed_is_refused_in_one_line(cli: Cli, home: Path, tmp_path: Path) -> None:
    code, _, err = cli("submit", str(ROOT / "examples" / "support-bot" / "measure.yaml"))
    assert code == 0, err
    (measure,) = job_ids(home, "measure")
    code, out, _ = cli("replay", measure)  # a measure's drift record replays (issue 30): here the reference
    assert code == 0 and out.endswith(": 0 night(s) replayed; no drop shown, 0 differ\n"), out
    text = (ROOT / "examples" / "support-bot" / "measure.yaml").read_text().replace("prompt.yaml", "p.yaml")
    for name in ("prompt.yaml", "dataset.jsonl"):
        (tmp_path / ("p.yaml" if name == "prompt.yaml" else name)).write_text(
            (ROOT / "examples" / "support-bot" / name).read_text()
        )
    (tmp_path / "off.yaml").write_text(text + "drift: {against: none}\n")
    code, _, err = cli("submit", str(tmp_path / "off.yaml"))
    assert code == 0, err
    off = next(i for i in job_ids(home, "measure") if i != measure)
    refused(cli("replay", off), "validation_error", "job", "a measure job with no drift record")
    refused(cli("replay", "0" * 32), "not_found", "job", "no job")
    refused(cli("replay", "missing.yaml"), "validation_error", "missing.yaml", "no such file")
