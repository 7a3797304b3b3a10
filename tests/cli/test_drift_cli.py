"""The nightly drift check on the embedded default, end to end through the CLI (issue 30).

``optiflow measure --set-reference`` records the reference; nightly measures compare with it
(``no drift shown (drop < X% with 95% confidence)``); the provider behind the same model name
then drops samples (the simulator's ``sim_pass_dist`` gains a ``fixed(0)`` part), and a measure
exits 4 naming the drift, as do ``optiflow report`` and ``optiflow cron`` (its end line and its one
stderr line); ``optiflow replay`` re-decides every night, from the job and from the history file.
An apply records a new reference, which the next measure compares with.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path

import pytest
import yaml

from tests.cli.conftest import Cli
from tests.support.workers import ROOT

EXAMPLE = ROOT / "examples" / "support-bot"
SAMPLES = 20
BEFORE = "beta(3.3,3.3)"
AFTER = "0.5*beta(3.3,3.3) + 0.5*fixed(0)"  # half the samples fail outright; the others keep theirs


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("OPTIFLOW_STORE", "OPTIFLOW_REDIS_URL", "OPTIFLOW_DATABASE_URL", "OPTIFLOW_BROKER_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPTIFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


def nightly(target: Path, dist: str = BEFORE) -> Path:
    """A copy of the example's measure job on the simulator's noise mode (``dist``)."""
    if not target.exists():
        shutil.copytree(EXAMPLE, target)
        lines = (EXAMPLE / "dataset.jsonl").read_text().splitlines(keepends=True)
        (target / "dataset.jsonl").write_text("".join(lines[:SAMPLES]))
    doc = yaml.safe_load((EXAMPLE / "measure.yaml").read_text())
    doc.update(runs=3, model={"model": "optiflow/sim", "params": {"sim_pass_dist": dist, "sim_seed": 4}})
    (target / "measure.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return target / "measure.yaml"


def job_of(out: str) -> str:
    return re.findall(r"^job (\w+): completed$", out, re.M)[-1]


def test_reference_nights_then_a_drop_exits_4_and_replays(cli: Cli, home: Path, tmp_path: Path) -> None:
    measure = nightly(tmp_path / "jobs" / "support-bot")
    rc, out, err = cli("measure", str(measure), "--set-reference")
    assert rc == 0, err
    assert "drift: this measure is the reference from now on (set by measure --set-reference)" in out
    assert "12 run(s) x 20 samples" in out
    history = re.search(r"^history: (\S+)$", err, re.M)
    assert history is not None and history.group(1).startswith("measurements/support_bot_stable/")

    for _ in range(2):  # nothing changed
        rc, out, err = cli("measure", str(measure))
        assert rc == 0, err
        assert re.search(
            r"no drift shown \(drop < \d+\.\d% with 95% confidence\): tonight [+\u2212]\d", out
        ), out
    assert "night 2: evidence of a drop" in out

    nightly(tmp_path / "jobs" / "support-bot", AFTER)  # the provider changes behind the model name
    for _ in range(4):
        rc, out, err = cli("measure", str(measure))
        if rc != 0:
            break
    assert rc == 4, (out, err)
    drift_line = next(line.strip() for line in out.splitlines() if line.strip().startswith("drift: "))
    assert re.match(
        r"drift: \u2212\d+\.\d% \[\u2212\d+\.\d%, [+\u2212]\d+\.\d%\] against the reference of ", drift_line
    )
    assert "a drop shown tonight" in drift_line
    assert drift_line in err  # the exit's reason, on stderr
    assert "samples that flipped most: " in out
    job = job_of(out)
    written = re.findall(r"^history: (\S+)$", err, re.M)

    rc, out, err = cli("report", job)
    assert rc == 4 and drift_line in out, (out, err)
    rc, out, _ = cli("replay", job)
    assert rc == 0, out
    assert re.search(
        r"support/bot@stable, reference \w+: \d night\(s\) replayed; a drop first shown on night \d, 0 differ",
        out,
    )
    rc, out, _ = cli("replay", str(tmp_path / written[-1]))
    assert rc == 0 and "0 differ" in out, out

    # under cron: the end line names the drift, and cron's mail gets one line with it
    rc, _, err = cli("cron", str(measure), "--log-file", str(tmp_path / "cron.log"))
    assert rc == 4
    log = (tmp_path / "cron.log").read_text()
    assert re.search(r"job \w+: exit 4 \(a drop since the reference is shown\); drift: \u2212\d", log), log
    assert "still shown until a new reference is set" in log  # the drop stays shown
    last = err.strip().splitlines()[-1]  # (in process, the capture also holds what went to the log)
    assert last.startswith(
        "optiflow cron support-bot-nightly: exit 4 (a drop since the reference is shown); drift: \u2212"
    )

    # a new reference (the operator handled it): the next night compares with it, quietly
    rc, out, err = cli("measure", str(measure), "--set-reference")
    assert rc == 0, err
    rc, out, err = cli("measure", str(measure))
    assert rc == 0 and "no drift shown" in out and "night 1:" in out, (out, err)


def test_an_apply_records_the_reference_the_next_measure_compares_with(
    cli: Cli, home: Path, tmp_path: Path
) -> None:
    target = tmp_path / "jobs" / "support-bot"
    measure = nightly(target)
    rc, out, err = cli("measure", str(measure))
    assert rc == 0 and "no reference for support/bot@stable with this model, dataset and check yet" in out, (
        err
    )
    job = yaml.safe_load((target / "job.yaml").read_text())
    job.update(eval_runs=1)
    (target / "job.yaml").write_text(yaml.safe_dump(job, sort_keys=False))
    rc, out, err = cli("submit", str(target / "job.yaml"), "--wait", "--apply")
    assert rc == 0, err
    assert "applied: support/bot stable v1.0.1" in out
    ref = re.search(
        r"^reference: support/bot@stable, 12 run\(s\): pass rate \d+\.\d% \(job (\w+)\)", out, re.M
    )
    assert ref is not None, out
    rc, out, err = cli("report", ref.group(1))
    assert rc == 0 and "this measure is the reference from now on (applied support/bot stable v1.0.1)" in out
    rc, out, err = cli("measure", str(measure))  # the prompt as applied, compared with its reference
    assert rc == 0, err
    assert "no drift shown" in out and "night 1:" in out, out


def test_measure_refuses_what_is_not_a_measure_job_and_writes_nothing(cli: Cli, home: Path) -> None:
    rc, out, err = cli("measure", str(EXAMPLE / "job.yaml"))
    assert (rc, out) == (2, "") and "`optiflow measure` runs measure jobs" in err, err
    rc, out, err = cli("measure", str(EXAMPLE / "measure.yaml"), "--runs", "0")
    assert rc == 2 and "--runs" in err
    if (home / "optiflow.db").exists():
        with sqlite3.connect(home / "optiflow.db") as db:
            assert list(db.execute("select id from optiflow_jobs")) == []
