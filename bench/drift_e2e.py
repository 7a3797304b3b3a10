"""The drift check end to end through the real simulated model, and the same outcomes in process.

An embedded client (its in-process Celery worker, litellm, the simulated provider, SQLite) measures
``examples/support-bot`` on the simulator's noise mode: a reference of 12 runs
(:meth:`Client.set_reference`), then nightly measures of 3 runs with nothing changed, then nights
where the provider behind the model name drops samples (``sim_pass_dist`` gains a ``fixed(0)``
component: the samples that pick it fail outright, the others keep their probability). For every
job the per-sample outcomes are drawn again in process, with the simulated model's own functions
and no litellm or Celery, and every recorded decision is re-made by the core from those outcomes.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from optiflow.core.checks import run_check
from optiflow.core.drift.detector import Tally, evidence
from optiflow.core.measure.report import MeasureDocument
from optiflow.core.measure.spec import MeasureSpec
from optiflow.llm.simulated import SimulatedModel

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "support-bot" / "measure.yaml"
BEFORE = "beta(3.3,3.3)"
AFTER = "0.8*beta(3.3,3.3) + 0.2*fixed(0)"


def in_process(spec: MeasureSpec, doc: MeasureDocument) -> dict[str, str]:
    """The job's outcomes, drawn with the simulated model's functions in this process."""
    sim = SimulatedModel()
    params = dict(spec.model.with_params(spec.baseline_model_params).params)
    out: dict[str, str] = {}
    for sample in spec.dataset:
        rendered = spec.prompt.render(sample.input)
        marks = []
        for run in range(doc.first_run, doc.first_run + spec.runs):
            reply = sim.reply(rendered.messages(), params, {"sample_id": sample.id, "run": run}, sleep=False)
            marks.append("1" if run_check(spec.check, reply.text, sample.expected).passed else "0")
        out[sample.id] = "".join(marks)
    return out


def run(quiet_nights: int, drop_nights: int) -> dict[str, Any]:
    from optiflow.interfaces.client import Client
    from optiflow.jobfile import load_job

    started = time.monotonic()
    with tempfile.TemporaryDirectory() as home:
        for var in ("OPTIFLOW_REDIS_URL", "OPTIFLOW_DATABASE_URL", "OPTIFLOW_BROKER_URL", "OPTIFLOW_STORE"):
            os.environ.pop(var, None)
        os.environ["OPTIFLOW_HOME"] = home
        with Client.from_env() as client:
            base = load_job(EXAMPLE, store=client.runtime.store)
            assert isinstance(base, MeasureSpec)

            def spec(dist: str) -> MeasureSpec:
                model = base.model.model_copy(update={"params": {"sim_pass_dist": dist, "sim_seed": 30}})
                return base.model_copy(update={"model": model, "runs": 3, "name": "drift-e2e"})

            jobs: list[tuple[MeasureSpec, MeasureDocument]] = []
            handle = client.set_reference(spec(BEFORE), runs=12)
            docs = [handle.wait(600)]
            for night in range(1, quiet_nights + drop_nights + 1):
                docs.append(client.submit(spec(BEFORE if night <= quiet_nights else AFTER)).wait(600))
                last = docs[-1].report
                if isinstance(last, MeasureDocument) and last.drift is not None and last.drift.drop_shown:
                    break
            for result in docs:
                report = result.report
                assert isinstance(report, MeasureDocument), result.error
                jobs.append((client.runtime.spec(result.job_id), report))  # type: ignore[arg-type]
    return check(jobs, quiet_nights, time.monotonic() - started)


def check(jobs: list[tuple[MeasureSpec, MeasureDocument]], quiet: int, seconds: float) -> dict[str, Any]:
    ref_spec, ref_doc = jobs[0]
    ids = ref_spec.sample_ids()
    same_outcomes = all(in_process(s, d) == d.outcomes for s, d in jobs)
    base = Tally.of(ref_doc.outcomes, ids)
    tallies: list[Tally] = []
    first: int | None = None
    nights = []
    same_decisions = True
    for s, d in jobs[1:]:
        assert d.drift is not None and d.drift.evidence is not None, d.drift
        tallies.append(Tally.of(d.outcomes, ids))
        again = evidence(
            base, tallies, ids=ids, margin=s.drift.margin, alpha=s.drift.alpha, first_shown=first
        )
        first = again.first_shown
        rec = d.drift.evidence
        same = rec.shown == again.shown and abs(rec.log_drop - again.log_drop) < 1e-9 * max(
            1, abs(again.log_drop)
        )
        same_decisions &= same
        assert d.drift.change is not None
        nights.append(
            {
                "night": rec.night,
                "dropped": rec.night > quiet,
                "pass_rate": d.pass_rate,
                "change": d.drift.change.estimate,
                "low": d.drift.change.low,
                "high": d.drift.change.high,
                "log_drop": rec.log_drop,
                "threshold": rec.threshold,
                "shown": rec.shown,
                "first_run": d.first_run,
            }
        )
    shown = next((n["night"] for n in nights if n["shown"] == "drop"), None)
    return {
        "samples": len(ids),
        "reference_runs": ref_spec.runs,
        "runs": jobs[-1][0].runs,
        "quiet_nights": quiet,
        "nights": nights,
        "shown_on_night": shown,
        "false_alarm": any(n["shown"] == "drop" and not n["dropped"] for n in nights),
        "same_outcomes": same_outcomes,
        "same_decisions": same_decisions,
        "jobs": len(jobs),
        "seconds": round(seconds, 1),
        "before": BEFORE,
        "after": AFTER,
    }


__all__ = ["check", "in_process", "run"]
