"""What a job must have to be admitted, and what its best must have to be applied (issue 26),
through the embedded client: the one admission path of the CLI, Python and HTTP.

- ``splits: true`` without test samples is refused at admission, naming ``splits`` and the count
  of each split; a job that got past that (admitted before the rule) and crowned a best with no
  held-out result is not applied without ``force``.
- ``baseline_model_params``: the document's and the baseline tag's stored params merge; a key both
  set to different values is refused naming both values (before, the tag's replaced the
  document's without a word), and the checks see the merged params.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from optiflow import admission
from optiflow.core import kinds
from optiflow.core.dataset import Dataset
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.core.overrides import merge_baseline_params, same_json
from optiflow.core.policy import ModelPolicy, PolicyError
from optiflow.errors import ValidationError
from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job
from tests.cli.conftest import Cli
from tests.support.workers import ROOT, embedded_settings

HELPDESK = ROOT / "examples" / "weak-helpdesk" / "job.yaml"
MEASURE = ROOT / "examples" / "support-bot" / "measure.yaml"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("apply-rules-home")


@pytest.fixture(scope="module")
def client(home: Path) -> Iterator[Client]:
    with Client(embedded_settings(home)) as c:
        yield c


def job_count(home: Path) -> int:
    """Job rows in ``home``'s database (0 when it has none, or no tables yet)."""
    if not (home / "optiflow.db").exists():
        return 0
    with sqlite3.connect(home / "optiflow.db") as conn:
        if not conn.execute("select name from sqlite_master where name = 'optiflow_jobs'").fetchone():
            return 0
        return int(conn.execute("select count(*) from optiflow_jobs").fetchone()[0])


def without_test_split(**overrides: Any) -> Any:
    """The weak-helpdesk job with its test samples moved to val: train 20, val 20, test 0."""
    spec = load_job(HELPDESK, overrides={"termination": {"max_iterations": 2}, **overrides})
    samples = tuple(s.model_copy(update={"split": "val"}) if s.split == "test" else s for s in spec.dataset)
    return spec.model_copy(update={"dataset": Dataset(samples=samples)})


# -- splits: true needs a test split ------------------------------------------------------------
def test_splits_without_test_samples_is_refused_at_admission(client: Client, home: Path) -> None:
    spec = without_test_split()
    before = job_count(home)
    with pytest.raises(ValidationError) as err:
        client.submit(spec)
    assert err.value.field == "splits"
    assert "train 20, val 20, test 0" in err.value.message
    assert job_count(home) == before


def test_splits_without_test_samples_is_refused_by_the_cli(
    cli_runner: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "job"
    target.mkdir()
    for name in ("job.yaml", "prompt.yaml"):
        (target / name).write_text((HELPDESK.parent / name).read_text())
    rows = (HELPDESK.parent / "dataset.jsonl").read_text().replace('"split": "test"', '"split": "val"')
    (target / "dataset.jsonl").write_text(rows)
    monkeypatch.setenv("OPTIFLOW_HOME", str(tmp_path / "home"))
    for var in ("OPTIFLOW_STORE", "OPTIFLOW_REDIS_URL", "OPTIFLOW_DATABASE_URL", "OPTIFLOW_BROKER_URL"):
        monkeypatch.delenv(var, raising=False)
    rc, out, err = cli_runner("submit", str(target / "job.yaml"))
    assert (rc, out) == (2, ""), err
    assert err.startswith("error[validation_error]: splits: a job with splits selects on train and val"), err
    assert "train 20, val 20, test 0" in err
    assert job_count(tmp_path / "home") == 0


def test_a_best_without_held_out_confirmation_is_applied_only_with_force(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job admitted before the rule (admission's split check off here) selects a best on
    train/val and has no test result: its report says so, and apply writes it only with force."""
    monkeypatch.setattr(admission, "check_splits", lambda spec: None)
    result = client.submit(without_test_split()).wait(timeout=240).raise_for_error()
    report = result.report
    assert isinstance(report, OptimizationHistory)
    assert report.splits and report.changed and report.test is None and report.held_out_missing
    assert not report.improved
    why = kinds.unconfirmed(report)
    assert why is not None and why.startswith("not confirmed on held-out data: the job had splits: true")
    assert client.apply(result) is None
    assert client.runtime.store.resolve(report.prompt_ns, report.prompt_key, "stable") is None
    forced = client.apply(result, force=True)
    assert forced is not None and forced.status == "applied"


# -- baseline_model_params: merged with the baseline tag's, conflicts refused ------------------
def test_merge_rule() -> None:
    assert merge_baseline_params({"a": 1}, {"b": 2}, tag="t") == {"a": 1, "b": 2}
    assert merge_baseline_params({"a": 0}, {"a": 0.0, "b": [1, {"c": True}]}, tag="t") == {
        "a": 0,
        "b": [1, {"c": True}],
    }
    with pytest.raises(ValidationError) as err:
        merge_baseline_params({"sim_noise": 0.5}, {"sim_noise": 0}, tag="stable")
    assert err.value.field == "baseline_model_params.sim_noise"
    assert (
        "sets 0.5" in err.value.message
        and "stores 0" in err.value.message
        and "'stable'" in err.value.message
    )
    assert not same_json(True, 1) and not same_json(1, "1") and same_json([1.0], [1])


def stored_tag(client: Client, tag: str, params: dict[str, Any]) -> None:
    spec = load_job(MEASURE)
    client.runtime.store.store(spec.prompt.descriptor(), [], tag=tag, model_params=params)


def test_document_and_tag_params_merge(client: Client) -> None:
    stored_tag(client, "noise0", {"sim_noise": 0})
    spec = load_job(
        MEASURE, overrides={"tag": "noise0", "runs": 1, "baseline_model_params": {"sim_latency_ms": 1}}
    )
    job = client.submit(spec)
    assert client.runtime.spec(job.id).baseline_model_params == {"sim_noise": 0, "sim_latency_ms": 1}
    job.wait(timeout=120).raise_for_error()
    same = load_job(
        MEASURE, overrides={"tag": "noise0", "runs": 1, "baseline_model_params": {"sim_noise": 0.0}}
    )
    again = client.submit(same)
    assert client.runtime.spec(again.id).baseline_model_params == {"sim_noise": 0.0}
    again.wait(timeout=120).raise_for_error()


def test_a_conflicting_key_is_refused_naming_both_values(client: Client, home: Path) -> None:
    stored_tag(client, "noise0", {"sim_noise": 0})
    before = job_count(home)
    spec = load_job(MEASURE, overrides={"tag": "noise0", "baseline_model_params": {"sim_noise": 0.5}})
    with pytest.raises(ValidationError) as err:
        client.submit(spec)
    assert err.value.field == "baseline_model_params.sim_noise"
    assert "sets 0.5" in err.value.message and "stores 0" in err.value.message
    assert job_count(home) == before


def test_the_checks_see_the_merged_params(client: Client, home: Path) -> None:
    """Issue 26's document: ``{sim_latency_ms: 1e9}`` on a tag storing ``{sim_noise: 0}``. The
    tag's params used to replace it (the job ran without the latency); merged, its bound refuses
    it. A policy sees the tag's keys too."""
    stored_tag(client, "noise0", {"sim_noise": 0})
    before = job_count(home)
    slow = load_job(MEASURE, overrides={"tag": "noise0", "baseline_model_params": {"sim_latency_ms": 1e9}})
    with pytest.raises(ValidationError) as err:
        client.submit(slow)
    assert err.value.field == "baseline_model_params.sim_latency_ms"
    stored_tag(client, "tools", {"tool_choice": "auto"})
    doc = load_job(MEASURE, overrides={"tag": "tools", "baseline_model_params": {"temperature": 0}})
    with pytest.raises(PolicyError) as refused:
        client.submit(doc, policy=ModelPolicy.build())
    assert refused.value.field == "tag" and "'tools'" in refused.value.message
    assert job_count(home) == before
