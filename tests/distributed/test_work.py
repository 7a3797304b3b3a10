"""The evaluate task body: never raises for a bad sample, renders once, caches, fails fast."""

from __future__ import annotations

from pathlib import Path

from optiflow.distributed.runtime import Runtime
from optiflow.distributed.work import evaluate_one
from optiflow.jobfile import load_job
from optiflow.settings import Settings

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support-bot" / "job.yaml"


def runtime_with_job(tmp_path: Path, **overrides: object) -> tuple[Runtime, str]:
    rt = Runtime(Settings(home=tmp_path, redis_url=None, database_url=None, store="memory"), embedded=True)
    spec = load_job(EXAMPLE, overrides=overrides)
    rt.jobs.create("job1", spec.kind, spec.name, spec.model_dump(mode="json"))
    return rt, spec.dataset.samples[0].id


def test_a_render_error_is_a_failing_record_not_a_raise(tmp_path: Path) -> None:
    # a sample whose input lacks a param the prompt needs: a raise here would stall the chord
    rt, _ = runtime_with_job(tmp_path)
    spec = rt.spec("job1")
    bad = spec.dataset.samples[0].model_copy(update={"input": {"unrelated": "x"}})
    rt._samples.get("job1", lambda: {bad.id: bad})
    out = evaluate_one(rt, "job1", "job1-baseline", "opt-job1-baseline", bad.id, 0, guarded=False)
    assert out["error"].startswith("render:") and not out.get("passed", False)


def test_second_evaluation_of_the_same_prompt_is_a_cache_hit(tmp_path: Path) -> None:
    rt, sid = runtime_with_job(tmp_path)
    first = evaluate_one(rt, "job1", "job1-a", "opt-job1-a", sid, 0, guarded=False)
    again = evaluate_one(rt, "job1", "job1-b", "opt-job1-b", sid, 0, guarded=False)
    assert not first.get("cached") and again["cached"] is True
    assert again["passed"] == first["passed"] and again["experiment_id"] == "job1-b"
