"""Jobs with ``max_cost_usd`` below their full cost, on two real eval worker processes sharing
one Redis: each stops at its budget, completes with what it had, overspends by no more than the
calls in flight (at most the eval threads of the fleet), and its report says by how much."""

from __future__ import annotations

from pathlib import Path

import pytest

from optiflow.core import kinds
from optiflow.core.budget import BUDGET_EXHAUSTED
from optiflow.core.compress.report import OptimizationReport
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.measure.report import MeasureDocument
from optiflow.core.measure.spec import MeasureSpec
from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job
from optiflow.settings import Settings
from tests.support.workers import ROOT, running_workers, worker_env

pytestmark = [pytest.mark.redis, pytest.mark.workers]
EXAMPLE = ROOT / "examples" / "support-bot"
EVAL_WORKERS, THREADS = 2, 4
IN_FLIGHT = EVAL_WORKERS * THREADS
SIM = {"model": "optiflow/sim", "params": {"sim_latency_ms": 20}}  # calls stay in flight a while


def test_jobs_stop_at_their_budget_across_two_eval_workers(
    redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    measure = load_job(EXAMPLE / "measure.yaml", overrides={"model": SIM, "max_cost_usd": 0.05})
    compress = load_job(
        EXAMPLE / "job.yaml",
        overrides={"model": SIM, "strategy": {"type": "llm", "model": SIM}, "max_cost_usd": 0.12},
    )
    assert isinstance(measure, MeasureSpec) and isinstance(compress, CompressSpec)
    env = worker_env(redis_url, redis_prefix, tmp_path)
    settings = Settings(
        redis_url=redis_url, key_prefix=redis_prefix, home=tmp_path, database_url=env["OPTIFLOW_DATABASE_URL"]
    )
    with (
        running_workers(env, tmp_path, eval_workers=EVAL_WORKERS, eval_concurrency=THREADS),
        Client(settings, embedded=False) as client,
    ):
        measured = client.submit(measure)
        compressed = client.submit(compress)
        m = measured.wait(timeout=120)
        c = compressed.wait(timeout=180)
        jobs = client.runtime.jobs
        items = jobs.trial_items(measured.id)
        events = {
            job.id: [e for e in jobs.events(job.id) if e.type == BUDGET_EXHAUSTED]
            for job in (measured, compressed)
        }

    # the measure job: a document over the evaluations made before the budget ran out
    assert m.status == "completed" and isinstance(m.report, MeasureDocument), m.error
    doc, budget = m.report, m.report.budget
    assert budget is not None and budget.exhausted and budget.step == "measure"
    assert 0 < doc.evaluations < doc.planned == 220
    assert budget.skipped_calls == doc.stats.budget_skipped == doc.planned - doc.evaluations
    made = [i for i in items if not i.skipped]
    assert len(made) == doc.evaluations
    # every call made was charged once, by whichever worker made it: the spend is their sum
    assert budget.spent_usd == pytest.approx(sum(i.cost for i in made), rel=1e-9)
    assert budget.spent_usd >= budget.max_cost_usd == 0.05
    # the overspend: the call that reached the budget and those still in flight, no more
    assert 1 <= budget.over_calls <= IN_FLIGHT
    assert budget.overspend_usd == pytest.approx(budget.spent_usd - 0.05)
    assert budget.overspend_usd <= budget.over_calls * max(i.cost for i in made)
    text = kinds.render(doc)
    assert f"the budget ran out: {doc.evaluations} of 220 evaluations made" in text
    assert f"overspend ${budget.overspend_usd:.4g} by {budget.over_calls} call(s) in flight" in text
    assert len(events[measured.id]) == 1

    # the compress job: what it had decided, the undecided never accepted
    assert c.status == "completed" and isinstance(c.report, OptimizationReport), c.error
    report, cbudget = c.report, c.report.budget
    assert cbudget is not None and cbudget.exhausted and cbudget.spent_usd >= 0.12
    assert 1 <= cbudget.over_calls <= IN_FLIGHT and cbudget.skipped_calls > 0
    undecided = [r for r in report.rejected if r.reason.startswith("undecided")]
    assert undecided, report.rejected
    assert not {r.section_path for r in undecided} & {m.section_path for m in report.modifications}
    assert "budget exhausted at step" in kinds.render(report)
    assert len(events[compressed.id]) == 1
