"""deploy/crontab.example, run as cron runs it: each job line's command under ``env -i`` with only
the variables the file sets (the three it says to edit pointed at this machine), by ``/bin/sh -c``,
from a working directory standing in for the user's home. The jobs run on the embedded default
(``OPTIFLOW_HOME`` from the env file), on small copies of the example's job files.

Every exit code the file documents is checked: 0 ok (the compress job's --apply wrote a version),
3 under the floor, 1 a failed job (and --apply wrote nothing), 2 refused input (nothing
submitted), 75 the lock held by another run (a log line, one stderr line); 4, a drop shown by the
nightly drift check, is run under cron's environment in :func:`test_the_nightly_drift_check_exits_4_under_cron`
(5, Redis lost, in tests/cli/test_cli_errors.py).

``PYTHONPATH`` is the one variable added to the file's: it names this checkout, so the installed
console script loads the code under test (as the worker tests do); it sets nothing else.
"""

from __future__ import annotations

import fcntl
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from optiflow.stores import FilesystemOverridesStore
from tests.support.workers import ROOT

CRONTAB = ROOT / "deploy" / "crontab.example"
EXAMPLE = ROOT / "examples" / "support-bot"
EDIT = ("VENV", "JOBS", "ENV_FILE")  # the variables the crontab says to edit
SAMPLES = 6  # of the example's 44: the same story, a fraction of the model calls


def crontab() -> tuple[dict[str, str], list[str]]:
    """The crontab's variable assignments and the commands of its job lines."""
    env: dict[str, str] = {}
    commands: list[str] = []
    for raw in CRONTAB.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if m := re.match(r"^([A-Za-z_]\w*)\s*=\s*(.*)$", line):
            env[m[1]] = m[2]
            continue
        fields = line.split(None, 5)
        assert len(fields) == 6, f"crontab: 5 time fields and a command: {line!r}"
        assert "%" not in fields[5], "cron turns an unescaped % into a newline"
        commands.append(fields[5])
    return env, commands


def command_for(commands: list[str], job: str) -> str:
    (command,) = [c for c in commands if f"/{job}" in c]
    return command


def small_copy(target: Path, **edits: object) -> Path:
    """examples/support-bot with its first SAMPLES samples; ``edits`` change the fields that
    measure.yaml or job.yaml have."""
    shutil.copytree(EXAMPLE, target)
    lines = (EXAMPLE / "dataset.jsonl").read_text().splitlines(keepends=True)
    (target / "dataset.jsonl").write_text("".join(lines[:SAMPLES]))
    for name in ("measure.yaml", "job.yaml"):
        doc = yaml.safe_load((target / name).read_text())
        doc.update({k: v for k, v in edits.items() if k in doc})
        (target / name).write_text(yaml.safe_dump(doc, sort_keys=False))
    return target


@pytest.fixture(scope="module")
def venv() -> Path:
    """The environment optiflow is installed in: its bin/optiflow is what the crontab runs."""
    prefix = Path(sys.executable).parent.parent
    if not (prefix / "bin" / "optiflow").exists():
        pytest.fail(f"no {prefix / 'bin' / 'optiflow'}: install optiflow (pip install -e .)")
    return prefix


@pytest.fixture(scope="module")
def cron_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cron user's home: the working directory, and OPTIFLOW_HOME (from the env file) in it."""
    return tmp_path_factory.mktemp("cron-user")


@pytest.fixture(scope="module")
def env_file(cron_home: Path) -> Path:
    path = cron_home / "optiflow.env"
    path.write_text(f"# the embedded default: no services\nOPTIFLOW_HOME={cron_home / 'optiflow-home'}\n")
    return path


@pytest.fixture(scope="module")
def jobs(cron_home: Path) -> Path:
    """JOBS: small copies of the example's job files, where the crontab expects them."""
    small_copy(cron_home / "jobs" / "support-bot", runs=3, eval_runs=1)  # 18 answers: a 0.8 floor can pass
    return cron_home / "jobs"


class Run:
    def __init__(self, code: int, out: str, err: str, seconds: float) -> None:
        self.code, self.out, self.err, self.seconds = code, out, err, seconds


class Cron:
    """Runs crontab command lines the way cron does; ``values`` replace the edited variables."""

    def __init__(self, assigned: dict[str, str], home: Path) -> None:
        self.assigned, self.home = assigned, home

    def start(self, command: str, **values: str) -> tuple[subprocess.Popen[str], float]:
        env = {**self.assigned, **values, "PYTHONPATH": str(ROOT)}
        argv = [
            "env",
            "-i",
            *(f"{k}={v}" for k, v in env.items()),
            env.get("SHELL", "/bin/sh"),
            "-c",
            command,
        ]
        started = time.monotonic()
        proc = subprocess.Popen(
            argv, cwd=self.home, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        return proc, started

    def run(self, command: str, **values: str) -> Run:
        (result,) = self.together((command, values))
        return result

    def together(self, *lines: tuple[str, dict[str, str]]) -> list[Run]:
        """Several lines at once, as cron starts the lines due at one minute (each job has its
        own lock; the embedded SQLite database takes writers from several processes)."""
        started = [self.start(command, **values) for command, values in lines]
        runs = []
        for proc, t0 in started:
            out, err = proc.communicate(timeout=240)
            runs.append(Run(proc.returncode, out, err, time.monotonic() - t0))
        return runs


@pytest.fixture(scope="module")
def cron(venv: Path, cron_home: Path, env_file: Path, jobs: Path) -> Cron:
    assigned, _ = crontab()
    assert set(EDIT) <= set(assigned), f"the crontab sets {sorted(assigned)}, expected {EDIT}"
    edited = {"VENV": str(venv), "JOBS": str(jobs), "ENV_FILE": str(env_file)}
    return Cron({**assigned, **edited}, cron_home)


def optiflow_home(cron_home: Path) -> Path:
    return cron_home / "optiflow-home"


def job_rows(cron_home: Path) -> list[tuple[str, str, str]]:
    db = optiflow_home(cron_home) / "optiflow.db"
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        return list(conn.execute("select id, kind, status from optiflow_jobs order by created_at"))


def log_of(cron_home: Path, name: str) -> str:
    return (optiflow_home(cron_home) / "cron" / f"{name}.log").read_text()


def versions(cron_home: Path) -> list[str]:
    store = FilesystemOverridesStore(optiflow_home(cron_home) / "store")
    return [v.version for v in store.history("support", "bot")]


def test_the_crontab_documents_its_exit_codes_and_runs_absolute_paths() -> None:
    assigned, commands = crontab()
    assert assigned.get("PATH") == "/usr/bin:/bin" and assigned.get("SHELL") == "/bin/sh"
    text = CRONTAB.read_text()
    for code in (
        "0 ok",
        "1 the job failed",
        "2 refused input",
        "3 a measure job under",
        "4 a measure job shows a drop since its drift reference",
        "5 Redis was lost",
        "75 the previous run",
    ):
        assert code in text, code
    for command in commands:
        argv = shlex.split(command)
        assert argv[0] == "$VENV/bin/optiflow" and argv[1] == "cron", command
        assert "--env-file" in argv
    assert "--fail-below" in command_for(commands, "support-bot/measure.yaml")
    assert "--apply" in command_for(commands, "support-bot/job.yaml")


def test_crontab_lines_under_cron_environment(
    cron: Cron,
    cron_home: Path,
    cli_runner: Callable[..., tuple[int, str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, commands = crontab()
    measure, compress = command_for(commands, "measure.yaml"), command_for(commands, "job.yaml")

    # 0 and 0: the nightly measure job is at or above its floor; the weekly compress job completed
    # with accepted changes, and --apply wrote them to stable. One after the other: an apply
    # measures the tag it wrote as its drift reference, so a nightly measure that ends after it
    # (on a loaded machine) would rightly report "the prompt changed since the reference".
    ok = cron.run(measure)
    applied = cron.run(compress)
    print(
        f"\nmeasure and compress --apply under cron's environment: {ok.seconds:.1f}s, {applied.seconds:.1f}s"
    )
    assert (ok.code, ok.out, ok.err) == (0, "", ""), ok.err  # quiet when all is well: cron mails nothing
    log = log_of(cron_home, "support-bot-nightly")
    assert re.search(r"^\S+Z optiflow cron support-bot-nightly: start \(pid \d+\)", log, re.MULTILINE)
    assert "pass rate" in log and "-> ok" in log
    # the first nightly measure of the tag is its drift reference; the end line says so
    assert re.search(
        r"support-bot-nightly: job \w+: exit 0 \(ok\); drift: this measure is the reference from now on "
        r"\(no reference for support/bot@stable with this model, dataset and check yet\)\n$",
        log,
    ), log
    assert (applied.code, applied.out, applied.err) == (0, "", ""), log_of(cron_home, "support-bot")
    log = log_of(cron_home, "support-bot")
    assert "applied: support/bot stable v1.0.1 (the prompt before it is v1.0.0" in log
    assert versions(cron_home) == ["v1.0.0", "v1.0.1"]

    # applying that job again (by hand) says so and writes nothing
    (job_id,) = re.findall(r"support-bot: job (\w+): exit 0", log)
    for name in [n for n in os.environ if n.startswith("OPTIFLOW_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("OPTIFLOW_HOME", str(optiflow_home(cron_home)))
    code, out, _ = cli_runner("apply", job_id)
    assert code == 0
    unchanged = "unchanged: support/bot stable v1.0.1 already holds these changes; nothing written"
    assert out.splitlines()[-1] == unchanged
    assert versions(cron_home) == ["v1.0.0", "v1.0.1"]

    # 3: the measure job under a floor it cannot reach (a Wilson lower bound is below 1), and
    # 1: a compress job that fails (the provider refuses every baseline call): --apply writes nothing
    refusing = {"model": "optiflow/sim", "params": {"sim_error_rate": 1.0, "sim_error": "auth"}}
    bad = small_copy(cron_home / "bad" / "support-bot", model=refusing, eval_runs=1)
    before = job_rows(cron_home)
    floor, failed = cron.together(
        (measure.replace("--fail-below 0.8", "--fail-below 1"), {}), (compress, {"JOBS": str(bad.parent)})
    )
    print(f"under the floor, failing compress --apply: {floor.seconds:.1f}s, {failed.seconds:.1f}s")
    assert floor.code == 3, floor.err
    assert floor.err.strip() == (
        "optiflow cron support-bot-nightly: exit 3 (under the --fail-below floor); "
        f"log: {optiflow_home(cron_home) / 'cron' / 'support-bot-nightly.log'}"
    )
    assert "exit 3 (under the --fail-below floor)" in log_of(cron_home, "support-bot-nightly")
    assert failed.code == 1, failed.err
    assert "exit 1 (the job failed)" in failed.err
    assert (
        "error: the baseline gives the gate nothing to stand on"
        in log_of(cron_home, "support-bot").rsplit("start (pid", 1)[1]
    )
    assert sorted(r[1:] for r in job_rows(cron_home)[len(before) :]) == [
        ("compress", "failed"),
        ("measure", "completed"),
    ]
    assert versions(cron_home) == ["v1.0.0", "v1.0.1"]

    # 2: refused input: nothing submitted
    doc = yaml.safe_load((bad / "measure.yaml").read_text())
    (bad / "measure.yaml").write_text(yaml.safe_dump({**doc, "runs": 0}))
    before = job_rows(cron_home)
    refused = cron.run(measure, JOBS=str(bad.parent))
    print(f"refused measure: {refused.seconds:.1f}s")
    assert refused.code == 2, refused.err
    assert "exit 2 (refused input)" in refused.err
    nightly = log_of(cron_home, "support-bot-nightly")
    assert re.search(r"error\[validation_error\]: .*measure.yaml: runs: ", nightly)
    assert job_rows(cron_home) == before


def test_a_held_lock_exits_75_with_a_log_line(cron: Cron, cron_home: Path) -> None:
    """While a run holds the job's lock (an flock, as `flock -n FILE` takes), the next exits at
    once with its own code, a log line naming the holder, and one stderr line for cron's mail."""
    _, commands = crontab()
    lock_path = optiflow_home(cron_home) / "cron" / "support-bot-nightly.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    before = job_rows(cron_home)
    with lock_path.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write(f"{os.getpid()}\n")
        held.flush()
        locked = cron.run(command_for(commands, "measure.yaml"))
    assert locked.code == 75, locked.err
    assert "exit 75 (another run holds the lock)" in locked.err
    last = log_of(cron_home, "support-bot-nightly").splitlines()[-1]
    assert f"another run (pid {os.getpid()}) holds {lock_path}: not started (exit 75)" in last
    assert job_rows(cron_home) == before  # nothing submitted


def test_the_nightly_drift_check_exits_4_under_cron(cron: Cron, cron_home: Path) -> None:
    """The example's nightly line on a measure compared with its reference: while the pass rate
    stays above the --fail-below floor, the provider behind the model name starts failing one
    sample that always passed (the simulator's ``sim_pass_dist``, seed 14: ``international-3``); the
    drift check shows it on its second night, exit 4, its end line and cron's one stderr line say so."""
    _, commands = crontab()
    nightly = command_for(commands, "measure.yaml")
    jobs = cron_home / "drift-jobs"
    shutil.copytree(EXAMPLE, jobs / "support-bot")  # all 44 samples, 5 runs as shipped
    measure = jobs / "support-bot" / "measure.yaml"
    doc = yaml.safe_load(measure.read_text())
    measure.write_text(
        yaml.safe_dump({**doc, "tag": "nightly"}, sort_keys=False)
    )  # stable was applied to above
    home = {"OPTIFLOW_HOME": str(optiflow_home(cron_home)), "JOBS": str(jobs)}
    set_reference = '"$VENV/bin/optiflow" measure "$JOBS/support-bot/measure.yaml" --set-reference'
    ref = cron.run(set_reference, **home)
    assert ref.code == 0, ref.err
    assert "drift: this measure is the reference from now on (set by measure --set-reference)" in ref.out
    quiet = cron.run(nightly, JOBS=str(jobs))
    assert (quiet.code, quiet.err) == (0, ""), quiet.err
    end = log_of(cron_home, "support-bot-nightly").strip().splitlines()[-1]
    assert re.search(
        r"exit 0 \(ok\); no drift shown \(drop < \d+\.\d% with 95% confidence\): tonight \+0\.0%", end
    )

    doc = yaml.safe_load(measure.read_text())
    doc["model"] = {
        "model": "optiflow/sim",
        "params": {"sim_pass_dist": "0.96*fixed(1) + 0.04*fixed(0)", "sim_seed": 14},
    }
    measure.write_text(yaml.safe_dump(doc, sort_keys=False))
    for _ in range(3):  # one sample failing one night is not enough on its own; two nights are
        drifted = cron.run(nightly, JOBS=str(jobs))
        if drifted.code != 0:
            break
    print(
        f"\nreference, quiet night, drifted night under cron: {ref.seconds:.1f}s, {quiet.seconds:.1f}s, {drifted.seconds:.1f}s"
    )
    log = log_of(cron_home, "support-bot-nightly")
    assert drifted.code == 4, log[-2000:]
    assert (
        "fail below 80.0%: lower bound 81.2% -> ok" in log.rsplit("start (pid", 1)[1]
    )  # the floor sees nothing
    assert "samples that flipped most: international-3 100% -> 0%" in log
    end = log.strip().splitlines()[-1]
    assert re.search(
        r"job \w+: exit 4 \(a drop since the reference is shown\); drift: \u22122\.3% \[\u2212\d+\.\d%, [+\u2212]\d+\.\d%\] "
        r"against the reference of .*: a drop shown tonight \(night 3\)$",
        end,
    ), end
    assert drifted.err.startswith(
        "optiflow cron support-bot-nightly: exit 4 (a drop since the reference is shown); drift: \u22122.3%"
    )
    assert drifted.err.strip().endswith(
        f"log: {optiflow_home(cron_home) / 'cron' / 'support-bot-nightly.log'}"
    )
