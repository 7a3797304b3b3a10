"""Optimize and measure jobs end to end through the embedded client (a real in-process Celery
worker): the shipped examples reach their goals, histories replay, rejections are persisted and
never evaluated, the best is applied as a new version."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from optiflow.core.measure.report import MeasureDocument
from optiflow.core.optimize.document import history_document
from optiflow.core.optimize.replay import replay
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.interfaces.client import Client
from tests.support.workers import ROOT, embedded_settings

EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    home = tmp_path_factory.mktemp("optimize-home")
    with Client(embedded_settings(home)) as c:
        assert c.runtime.embedded
        yield c


def test_weak_prompt_rewrite_raises_success_by_30_points_and_replays(client: Client) -> None:
    job = client.submit_file(EXAMPLES / "weak-helpdesk" / "job.yaml")
    result = job.wait(timeout=240).raise_for_error()
    history = result.report
    assert isinstance(history, OptimizationHistory)
    assert history.best_score - history.baseline_score >= 0.30
    assert history.test is not None and history.test.best.score is not None
    assert history.test.best.score - (history.test.baseline.score or 0) >= 0.30  # held out too
    assert history.total_iterations >= 2 and history.termination_reason.message

    # the YAML document replays with no differing decision
    document = yaml.safe_load(yaml.safe_dump(history_document(history), sort_keys=False))
    assert replay(document).ok

    # duplicates are refused with their reason code, persisted, and never evaluated
    rejections = client.runtime.jobs.rejections(job.id)
    duplicates = [r for r in rejections if r.reason_code == "duplicate"]
    assert duplicates, "the example's parallel rewrites converge: some proposals repeat"
    assert all(r.duplicate_of for r in duplicates)
    hashes = [t.config_hash for t in client.runtime.jobs.trials(job.id) if t.config_hash]
    assert len(set(hashes)) == len(hashes)  # each configuration evaluated once

    # apply writes the best as a new version of stable
    applied = client.apply(result)
    assert applied is not None and applied.version is not None and applied.version.tag == "stable"
    assert applied.original is not None and not applied.original.overrides.sections
    again = client.apply(result)  # the same job twice: nothing written
    assert again is not None and again.unchanged and again.version == applied.version
    stable = client.runtime.store.resolve(history.prompt_ns, history.prompt_key, "stable")
    assert stable is not None
    assert {o.body for o in stable.sections} >= {o.body for o in history.best_overrides}


def test_structured_mutation_converges_to_parameters_that_fix_the_failures(client: Client) -> None:
    job = client.submit_file(EXAMPLES / "agent-policy" / "job.yaml")
    history = job.wait(timeout=240).raise_for_error().report
    assert isinstance(history, OptimizationHistory)
    assert history.best_score == 1.0 and history.baseline_score <= 0.5
    best = history.trial(history.best_candidate_id)
    assert best is not None and best.summary is not None and best.summary.failed == 0


def test_measure_job_document_and_floor(client: Client) -> None:
    job = client.submit_file(EXAMPLES / "support-bot" / "measure.yaml", runs=3, fail_below=0.95)
    result = job.wait(timeout=240).raise_for_error()
    doc = result.report
    assert isinstance(doc, MeasureDocument)
    assert doc.runs == 3 and doc.evaluations == 3 * doc.samples
    assert doc.wilson.lower < doc.pass_rate < doc.wilson.upper
    assert doc.latency_ms.p50 is not None and doc.latency_ms.p99 is not None
    assert doc.failed  # 88.6% passes; its lower bound is under 95%
    assert client.runtime.store.list_tags(doc.prompt_ns, doc.prompt_key) == [] or all(
        not t.startswith("opt-") for t in client.runtime.store.list_tags(doc.prompt_ns, doc.prompt_key)
    )


def test_history_file_written_by_the_cli(tmp_path: Path, client: Client) -> None:
    from optiflow.interfaces.cli.jobs import write_history

    job = client.submit_file(EXAMPLES / "weak-helpdesk" / "job.yaml")
    history = job.wait(timeout=240).raise_for_error().report
    assert isinstance(history, OptimizationHistory)
    path = write_history(history, tmp_path)
    assert path.relative_to(tmp_path).parts[:2] == ("optimizations", "weak-helpdesk")
    assert path.name.startswith("rewrite-guidance_") and path.suffix == ".yaml"
    assert replay(yaml.safe_load(path.read_text())).ok
