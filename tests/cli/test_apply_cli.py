"""``optiflow apply`` is a compare-and-set against the prompt the job read (issue 26), end to end
in process on the embedded default (filesystem store and SQLite under OPTIFLOW_HOME).

The reproduction: push the example's prompt, run its compress job, push a newer prompt with one
more section (``warranty``), apply the older job. Before, apply printed ``applied``/``unchanged``
and the store held the job's 8-section snapshot: the warranty section was gone.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from tests.cli.conftest import Cli
from tests.cli.test_jobs_cli import ERROR_LINE, edit_yaml
from tests.support.workers import ROOT

EXAMPLE_DIR = ROOT / "examples" / "support-bot"
WARRANTY = {
    "path": "warranty",
    "title": "Warranty",
    "body": "When a customer asks about the warranty, explain that every product carries a two-year\n"
    "warranty, and reply with code WAR-300.",
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("OPTIFLOW_STORE", "OPTIFLOW_REDIS_URL", "OPTIFLOW_DATABASE_URL", "OPTIFLOW_BROKER_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPTIFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


@pytest.fixture
def job_dir(tmp_path: Path) -> Path:
    """The example, made quick: one run per sample, the strict gate, no ablation, one sample per
    expected code (14)."""
    target = tmp_path / "job"
    shutil.copytree(EXAMPLE_DIR, target)
    edit_yaml(target / "job.yaml", eval_runs=1, gate={"mode": "strict"}, require_sensitivity=False)
    lines, seen = [], set()
    for line in (target / "dataset.jsonl").read_text().splitlines():
        code = yaml.safe_load(line)["expected"]
        if code not in seen:
            seen.add(code)
            lines.append(line)
    (target / "dataset.jsonl").write_text("\n".join(lines) + "\n")
    newer = yaml.safe_load((target / "prompt.yaml").read_text())
    newer["sections"].append(WARRANTY)
    (target / "prompt-v2.yaml").write_text(yaml.safe_dump(newer, sort_keys=False))
    return target


def store_files(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in (home / "store").rglob("*") if p.is_file()}


def submit(cli: Cli, job_file: Path) -> str:
    rc, out, err = cli("submit", str(job_file))
    assert rc == 0, (out, err)
    assert re.search(r"^\s+\+ ", out, re.M), out  # it accepted a change: apply has something to write
    return re.search(r"^submitted (\w+)$", out, re.M).group(1)  # type: ignore[union-attr]


def refused(result: tuple[int, str, str], code: str, field: str) -> str:
    rc, out, err = result
    assert (rc, out) == (2, ""), (rc, out, err)
    line = err.strip()
    assert ERROR_LINE.match(line) and line.startswith(f"error[{code}]: {field}: "), line
    return line


def test_apply_of_a_job_older_than_the_stored_prompt_is_refused_and_names_the_section(
    cli: Cli, home: Path, job_dir: Path
) -> None:
    assert cli("prompt", "push", str(job_dir / "prompt.yaml"))[1].startswith("pushed support/bot: 8 sections")
    older = submit(cli, job_dir / "job.yaml")
    rc, out, _ = cli("prompt", "push", str(job_dir / "prompt-v2.yaml"))
    assert (rc, out.strip()) == (
        0,
        "pushed support/bot: 9 sections (2 frozen); since the stored version: added: warranty",
    )
    before = store_files(home)

    line = refused(cli("apply", older, "--tag", "stable"), "prompt_changed", "prompt")
    assert f"support/bot changed in the store since job:{older} read it (added: warranty)" in line
    assert "nothing was written; rerun the job on the current prompt" in line
    # a failed apply writes nothing either: a bad tag, a temporary tag
    assert "invalid tag 'bad tag!'" in refused(
        cli("apply", older, "--tag", "bad tag!"), "validation_error", "tag"
    )
    assert "temporary" in refused(cli("apply", older, "--tag", "opt-keepme"), "validation_error", "tag")
    assert store_files(home) == before
    rc, out, _ = cli("prompt", "show", "support/bot")
    assert rc == 0 and out.startswith("support/bot: 9 sections; tag stable: no overrides"), out
    assert "warranty" in out

    # the job run again on the current prompt applies on top of it
    (job_dir / "prompt.yaml").write_text((job_dir / "prompt-v2.yaml").read_text())
    current = submit(cli, job_dir / "job.yaml")
    rc, out, err = cli("apply", current, "--tag", "stable")
    assert rc == 0 and out.startswith("applied: support/bot stable v1.0.1"), (out, err)
    rc, out, _ = cli("prompt", "show", "support/bot")
    assert rc == 0 and re.match(r"support/bot: 9 sections; tag stable: \d+ overrides\n", out), out
    refused(cli("apply", older), "prompt_changed", "prompt")  # still refused, still nothing written
    assert "2 versions" in cli("prompt", "history", "support/bot")[1]  # original, v1.0.1


def test_push_says_which_overrides_it_made_stale_and_rollback_refuses_temporary_tags(
    cli: Cli, home: Path, job_dir: Path
) -> None:
    """Pushing a prompt keeps its current semantics (it replaces the prompt; an override made for
    a body it changes is stale: kept, never rendered) and now says so per tag."""
    assert cli("prompt", "push", str(job_dir / "prompt.yaml"))[0] == 0
    job = submit(cli, job_dir / "job.yaml")
    applied = cli("apply", job)[1]
    assert applied.startswith("applied: support/bot stable v1.0.1"), applied
    changed = yaml.safe_load((job_dir / "prompt.yaml").read_text())
    tone = next(s for s in changed["sections"] if s["path"] == "tone")
    tone["body"] = "Be warm, brief and polite."
    (job_dir / "prompt-v3.yaml").write_text(yaml.safe_dump(changed, sort_keys=False))
    rc, out, _ = cli("prompt", "push", str(job_dir / "prompt-v3.yaml"))
    assert rc == 0
    lines = out.strip().splitlines()
    assert lines[0] == "pushed support/bot: 8 sections (2 frozen); since the stored version: changed: tone"
    assert lines[1:] == [
        "  tag stable: override(s) of tone made for the replaced bodies are stale now: kept, "
        "skipped when rendering (run the job again on this prompt)"
    ]
    assert "stale (made for" in next(
        x for x in cli("prompt", "show", "support/bot")[1].splitlines() if " tone " in x
    )
    before = store_files(home)
    refused(
        cli("prompt", "rollback", "support/bot", "v1.0.0", "--tag", "opt-keepme"), "validation_error", "tag"
    )
    assert store_files(home) == before
