"""Probes end to end (a real Celery worker, the embedded one): on a model slow enough that a
whole wave of evaluations is in flight before the first answer, a set that regresses costs its
probe's calls, not the wave's; the decisions are the same as without probes."""

from __future__ import annotations

from pathlib import Path

from optiflow.core.compress.report import OptimizationReport
from optiflow.interfaces.client import Client
from tests.support.workers import ROOT, embedded_settings

EXAMPLE = ROOT / "examples" / "support-bot" / "job.yaml"
LATENCY_MS = 100  # 32 threads: without probes a regressing set has 15 to 30 calls in flight


def test_a_regressing_set_costs_its_probe_not_a_wave(tmp_path: Path) -> None:
    settings = embedded_settings(tmp_path).model_copy(update={"eval_concurrency": 32})
    with Client(settings) as client:
        job = client.submit_file(
            EXAMPLE, model={"model": "optiflow/sim", "params": {"sim_latency_ms": LATENCY_MS}}
        )
        report = job.wait(timeout=120).raise_for_error().report
        trials = {t.extra.get("name"): t for t in client.runtime.jobs.trials(job.id)}
    assert isinstance(report, OptimizationReport)
    assert {r.section_path[-1]: r.stage for r in report.rejected} == {
        "billing": "candidate",
        "security": "greedy",
    }
    calls = {name: t.summary.total - int(t.extra.get("cached", 0)) for name, t in trials.items() if t.summary}
    # the probe: ceil(sqrt(39 watched samples)) = 7 first runs; a few more may start while its
    # answers are written (the same 7 for the regressing billing candidate and combination)
    assert calls["candidate-billing"] <= 7 + 2, calls
    assert calls["combined"] <= 7 + 2, calls
    assert calls["baseline"] == 44 * 3 and calls["candidate-tone"] == 44 * 3  # what passes costs in full
