"""The job commands refuse bad input with one clear line and write nothing.

Every refusal is ``error[code]: field: message`` on stderr, a non-zero exit code, nothing on
stdout, and no trace in OPTIFLOW_HOME: no job row, no store file, no directory created. These
run in process on the embedded default; none of them reaches a model, so litellm is never
imported.
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

EXAMPLE_DIR = ROOT / "examples" / "support-bot"
ERROR_LINE = re.compile(r"^error\[[a-z_]+\]: \S.*: \S.*$")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("OPTIFLOW_STORE", "OPTIFLOW_REDIS_URL", "OPTIFLOW_DATABASE_URL", "OPTIFLOW_BROKER_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPTIFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


@pytest.fixture
def job_dir(tmp_path: Path) -> Path:
    """A copy of the example (job, prompt, dataset) to make bad variants of."""
    target = tmp_path / "job"
    shutil.copytree(EXAMPLE_DIR, target)
    return target


def job_rows(home: Path) -> list[tuple[str, str]]:
    db = home / "optiflow.db"
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        return list(conn.execute("select id, status from optiflow_jobs order by id"))


def files_under(home: Path) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file()) if home.exists() else []


def refused(result: tuple[int, str, str], code: str, field: str, message: str) -> str:
    """Exit code 2, nothing on stdout, exactly one ``error[code]: field: message`` line."""
    rc, out, err = result
    assert rc == 2, (rc, out, err)
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert ERROR_LINE.match(line), line
    assert line.startswith(f"error[{code}]: "), line
    _, sep, after = line.partition(f"{field}: ")
    assert sep, f"field {field!r} not named: {line}"
    assert message in after, line
    return line


def edit_yaml(path: Path, **changes: object) -> None:
    data = yaml.safe_load(path.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(yaml.safe_dump(data, sort_keys=False))


# -- submit: bad job files ------------------------------------------------------------------------
def _missing_file(d: Path) -> Path:
    return d / "nope.yaml"


def _malformed_yaml(d: Path) -> Path:
    (d / "job.yaml").write_text("kind: compress\nprompt: [prompt.yaml\ndataset: dataset.jsonl\n")
    return d / "job.yaml"


def _not_a_mapping(d: Path) -> Path:
    (d / "job.yaml").write_text("- compress\n- prompt.yaml\n")
    return d / "job.yaml"


def _unknown_kind(d: Path) -> Path:
    edit_yaml(d / "job.yaml", kind="distill")
    return d / "job.yaml"


def _missing_dataset(d: Path) -> Path:
    edit_yaml(d / "job.yaml", dataset=None)
    return d / "job.yaml"


def _dataset_file_missing(d: Path) -> Path:
    (d / "dataset.jsonl").unlink()
    return d / "job.yaml"


def _duplicate_sample_ids(d: Path) -> Path:
    lines = (d / "dataset.jsonl").read_text().splitlines()
    (d / "dataset.jsonl").write_text("\n".join([*lines, lines[3]]) + "\n")
    return d / "job.yaml"


def _duplicate_section_path(d: Path) -> Path:
    prompt = yaml.safe_load((d / "prompt.yaml").read_text())
    prompt["sections"].append({"path": prompt["sections"][1]["path"], "body": "again"})
    (d / "prompt.yaml").write_text(yaml.safe_dump(prompt, sort_keys=False))
    return d / "job.yaml"


def _zero_eval_runs(d: Path) -> Path:
    edit_yaml(d / "job.yaml", eval_runs=0)
    return d / "job.yaml"


def _unknown_check(d: Path) -> Path:
    edit_yaml(d / "job.yaml", check={"type": "telepathy"})
    return d / "job.yaml"


def _misspelt_field(d: Path) -> Path:
    edit_yaml(d / "job.yaml", eval_run=3)
    return d / "job.yaml"


def _prompt_not_in_store(d: Path) -> Path:
    edit_yaml(d / "job.yaml", prompt="support/nowhere")
    return d / "job.yaml"


def _bad_baseline_tag(d: Path) -> Path:
    edit_yaml(d / "job.yaml", baseline_tag="my tag")
    return d / "job.yaml"


BAD_JOBS = {
    "missing job file": (_missing_file, "validation_error", "nope.yaml", "file not found"),
    "malformed yaml": (_malformed_yaml, "validation_error", "job.yaml", "malformed YAML (line"),
    "not a mapping": (_not_a_mapping, "validation_error", "job.yaml", "expected a mapping"),
    "unknown kind": (_unknown_kind, "validation_error", "job.yaml: kind", "unknown job kind 'distill'"),
    "missing dataset": (_missing_dataset, "validation_error", "job.yaml: dataset", "required"),
    "dataset file missing": (_dataset_file_missing, "validation_error", "dataset.jsonl", "file not found"),
    "duplicate sample ids": (
        _duplicate_sample_ids,
        "validation_error",
        "dataset.jsonl",
        "duplicate sample id",
    ),
    "duplicate section path": (
        _duplicate_section_path,
        "validation_error",
        "prompt.yaml",
        "duplicate section path",
    ),
    "eval_runs 0": (_zero_eval_runs, "validation_error", "job.yaml: eval_runs", "greater than or equal to 1"),
    "unknown check": (_unknown_check, "validation_error", "job.yaml: check", "'telepathy'"),
    "misspelt field": (_misspelt_field, "validation_error", "job.yaml: eval_run", "Extra inputs"),
    "prompt not in store": (_prompt_not_in_store, "not_found", "prompt", "support/nowhere"),
    "bad baseline tag": (_bad_baseline_tag, "validation_error", "tag", "invalid tag 'my tag'"),
}


@pytest.mark.parametrize("case", list(BAD_JOBS))
def test_submit_refuses_bad_job_and_writes_nothing(case: str, cli: Cli, job_dir: Path, home: Path) -> None:
    make, code, field, message = BAD_JOBS[case]
    job_file = make(job_dir)
    refused(cli("submit", str(job_file)), code, field, message)
    assert not home.exists(), files_under(home)


def test_submit_refusal_leaves_existing_state_untouched(cli: Cli, job_dir: Path, home: Path) -> None:
    """With a home that already holds jobs and prompts, a refused submit adds nothing."""
    from optiflow.persistence import JobRepository

    home.mkdir(parents=True)
    repo = JobRepository(f"sqlite:///{home / 'optiflow.db'}")
    repo.create("existing", "compress", "x", {"kind": "compress"})
    assert cli("prompt", "push", str(job_dir / "prompt.yaml"))[0] == 0
    before = (job_rows(home), files_under(home))
    for make, code, field, message in BAD_JOBS.values():
        shutil.rmtree(job_dir)
        shutil.copytree(EXAMPLE_DIR, job_dir)
        refused(cli("submit", str(make(job_dir))), code, field, message)
    assert (job_rows(home), files_under(home)) == before


def test_submit_option_errors(cli: Cli, home: Path) -> None:
    job = str(EXAMPLE_DIR / "job.yaml")
    refused(cli("submit", job, "--apply"), "validation_error", "--apply", "--apply needs --wait")
    refused(cli("submit", job, "--wait", "--timeout", "0"), "validation_error", "--timeout", "positive")
    refused(cli("submit", job, "--wait", "--timeout", "-5"), "validation_error", "--timeout", "positive")
    assert not home.exists()


# -- commands about a job -------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["status", "report", "apply", "cancel", "resume"])
def test_unknown_job_id_on_a_fresh_machine_creates_nothing(command: str, cli: Cli, home: Path) -> None:
    refused(cli(command, "f00d"), "not_found", "job", "no job 'f00d'")
    assert not home.exists(), files_under(home)


@pytest.fixture
def queued_job(home: Path) -> str:
    """A job row as a submission leaves it before any worker picks it up."""
    from optiflow.jobfile import load_job
    from optiflow.persistence import JobRepository

    home.mkdir(parents=True)
    spec = load_job(EXAMPLE_DIR / "job.yaml")
    JobRepository(f"sqlite:///{home / 'optiflow.db'}").create(
        "q1", spec.kind, spec.name, spec.model_dump(mode="json")
    )
    return "q1"


@pytest.mark.parametrize("command", ["status", "report", "apply", "cancel", "resume"])
def test_unknown_job_id_with_other_jobs(command: str, cli: Cli, home: Path, queued_job: str) -> None:
    before = (job_rows(home), files_under(home))
    refused(cli(command, "f00d"), "not_found", "job", "no job 'f00d'")
    assert (job_rows(home), files_under(home)) == before


def test_unfinished_job_has_no_report_and_nothing_to_apply(cli: Cli, home: Path, queued_job: str) -> None:
    rc, out, err = cli("status", queued_job)
    assert rc == 0 and err == ""
    assert out.startswith(f"{queued_job} compress support-bot: queued")
    before = (job_rows(home), files_under(home))
    refused(cli("report", queued_job), "job_error", "job", f"job {queued_job} has not finished (queued)")
    refused(cli("report", queued_job, "--json"), "job_error", "job", "has not finished (queued)")
    refused(cli("apply", queued_job), "job_error", "job", f"job {queued_job} has not finished (queued)")
    assert (job_rows(home), files_under(home)) == before  # no version, no store file


def test_cancel_queued_job_then_report(cli: Cli, home: Path, queued_job: str) -> None:
    rc, out, err = cli("cancel", queued_job)
    assert (rc, err) == (0, "")
    assert out.strip() == f"cancelled {queued_job}"
    assert job_rows(home) == [(queued_job, "cancelled")]
    rc, out, _ = cli("status", queued_job)
    assert rc == 0 and ": cancelled" in out and "cancelled by user" in out
    rc, out, _ = cli("report", queued_job)
    assert rc == 1  # a report of a job that did not complete: printed, and the exit code says so
    assert f"job {queued_job}: cancelled" in out
    refused(cli("apply", queued_job), "job_error", "job", "cancelled")
    rc, out, err = cli("cancel", queued_job)  # again: a conflict, as HTTP's 409 (issue 20); harmless
    assert rc == 2 and out == ""
    assert err.strip() == f"error[job_conflict]: job: job {queued_job} already cancelled: nothing to cancel"
    assert job_rows(home) == [(queued_job, "cancelled")]


def test_cancel_of_a_job_running_in_another_process_says_how(cli: Cli, home: Path, queued_job: str) -> None:
    """Embedded, a running job's worker and cancel signal live in the process that submitted it:
    the command says so instead of pretending to have cancelled it."""
    from optiflow.persistence import JobRepository

    repo = JobRepository(f"sqlite:///{home / 'optiflow.db'}")
    assert repo.record_step(queued_job, expected_step=0, new_step=0, state={}, action=None)
    assert job_rows(home) == [(queued_job, "running")]
    files = files_under(home)
    refused(cli("cancel", queued_job), "job_error", "job", "stop that process")
    assert job_rows(home) == [(queued_job, "running")]
    assert files_under(home) == files


def test_resume_refuses_a_live_job_and_a_finished_one(cli: Cli, home: Path, queued_job: str) -> None:
    before = (job_rows(home), files_under(home))
    refused(cli("resume", queued_job), "job_conflict", "job", "is making progress")
    assert (job_rows(home), files_under(home)) == before
    assert cli("cancel", queued_job)[0] == 0
    refused(cli("resume", queued_job), "job_conflict", "job", "already ended cancelled")


def test_watch_a_finished_job_replays_its_events_then_the_summary(
    cli: Cli, home: Path, queued_job: str
) -> None:
    assert cli("cancel", queued_job)[0] == 0
    rc, out, _ = cli("watch", queued_job)
    assert rc == 1  # it did not complete
    lines = out.strip().splitlines()
    assert lines[0] == "COMPRESS [support-bot] Cancelled: cancelled by user"
    assert lines[-1] == f"job {queued_job}: cancelled (cancelled by user)"
    rc, out, _ = cli("watch", queued_job, "--verbosity", "minimal")
    assert rc == 1 and out.strip().splitlines() == [f"job {queued_job}: cancelled (cancelled by user)"]
    refused(cli("watch", queued_job, "--timeout", "0"), "validation_error", "--timeout", "positive")


def test_measure_job_under_its_floor_exits_3_for_cron(cli: Cli, home: Path) -> None:
    measure = str(EXAMPLE_DIR / "measure.yaml")
    refused(
        cli("submit", measure, "--fail-below", "1.5"), "validation_error", "--fail-below", "between 0 and 1"
    )
    refused(
        cli("submit", str(EXAMPLE_DIR / "job.yaml"), "--fail-below", "0.5"),
        "validation_error",
        "--fail-below",
        "only measure jobs",
    )
    rc, out, err = cli("submit", measure, "--wait", "--fail-below", "0.95")
    assert rc == 3, err
    assert "pass rate 88.6%" in out and "fail below 95.0%" in out
    assert "is under --fail-below 95.0%" in err
    rc, out, _ = cli("submit", measure, "--wait", "--fail-below", "0.5")
    assert rc == 0 and "-> ok" in out


# -- a baseline that gives the gate nothing to stand on (issue 11) ----------------------------------
def test_a_baseline_passing_nothing_fails_the_job_with_its_cause_and_apply_writes_nothing(
    cli: Cli, job_dir: Path, home: Path
) -> None:
    job_file = job_dir / "job.yaml"
    edit_yaml(job_file, check={"type": "regex", "pattern": "^NEVER MATCHES$"}, eval_runs=2)
    rc, out, err = cli("submit", str(job_file), "--wait", "--apply")
    assert rc == 1, (out, err)
    assert "nothing to stand on" in out and "min_baseline_pass_rate" in out, out
    assert "applied" not in out
    assert [status for _, status in job_rows(home)] == ["failed"]
    code, history, _ = cli("prompt", "history", "support/bot")
    assert code != 0 or "v1.0" not in history  # no version of stable was written


# -- what the operator reads (issue 22) ------------------------------------------------------------
def test_demo_prints_what_the_job_cost_and_watch_closes_every_kind_with_its_box(cli: Cli, home: Path) -> None:
    rc, out, err = cli("demo", "--job", str(EXAMPLE_DIR / "measure.yaml"))
    assert rc == 0, err
    job_id = re.search(r"^submitted (\w+)$", out, re.M).group(1)  # type: ignore[union-attr]
    calls = [line.strip() for line in out.splitlines() if line.strip().startswith("model calls:")]
    assert calls == ["model calls: 220 for 220 evaluations; 0 cache hit(s), 0 fail-fast skip(s)"], out
    assert re.search(r"; cost \$\d+\.\d{6}$", out, re.M), out  # the cost has its unit
    rc, out, _ = cli("watch", job_id)
    assert rc == 0
    box = out[out.index("╔") :].splitlines()
    assert box[0].startswith("╔") and box[-1].startswith("╚"), out
    assert len({len(line) for line in box}) == 1, "the box's lines are not all of one width"
    assert f"MEASURE: job {job_id} completed" in box[1]
    assert any("pass rate 88.6%" in line for line in box) and any(
        "model calls: 220 for 220" in line for line in box
    )
