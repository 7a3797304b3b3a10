"""The evaluate task body: never raises for a bad sample, renders once, caches, fails fast."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from optiflow.core.step import Hold
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


def test_a_held_evaluation_waits_for_its_steps_probes_then_calls(tmp_path: Path) -> None:
    rt, sid = runtime_with_job(tmp_path)
    hold = Hold(step=2, probes=2, latency=0.0, wait=30)
    out: dict[str, object] = {}
    held = threading.Thread(
        target=lambda: out.update(evaluate_one(rt, "job1", "job1-a", "t", sid, 0, guarded=True, hold=hold))
    )
    held.start()
    time.sleep(0.2)
    assert held.is_alive() and not out  # one probe answered of two: still waiting
    evaluate_one(rt, "job1", "job1-a", "t", sid, 1, guarded=True, probe_step=2)
    time.sleep(0.1)
    assert held.is_alive()
    evaluate_one(rt, "job1", "job1-b", "t", sid, 2, guarded=True, probe_step=2)
    held.join(5)
    assert not held.is_alive() and out["passed"] is True and not out.get("skipped")


def test_a_held_evaluation_skips_once_a_probe_found_its_regression(tmp_path: Path) -> None:
    rt, sid = runtime_with_job(tmp_path)
    rt.scratch.record("job1", "job1-a", "k", None, regressed=True, probe_step=2)
    started = time.monotonic()
    out = evaluate_one(
        rt, "job1", "job1-a", "t", sid, 0, guarded=True, hold=Hold(step=2, probes=5, latency=0.0, wait=30)
    )
    assert out["skipped"] is True and out["reason"] == "regressed"
    assert time.monotonic() - started < 1


def test_a_lost_probe_delays_a_held_evaluation_until_its_deadline_no_more(tmp_path: Path) -> None:
    rt, sid = runtime_with_job(tmp_path)
    started = time.monotonic()
    out = evaluate_one(
        rt, "job1", "job1-a", "t", sid, 0, guarded=True, hold=Hold(step=2, probes=1, latency=0.0, wait=0.3)
    )
    waited = time.monotonic() - started  # no probe began: the wait counts from its own start
    assert 0.25 < waited < 3 and out["passed"] is True


def test_a_held_evaluations_wait_counts_from_the_probes_start_not_its_own(tmp_path: Path) -> None:
    """A probe that began long before (its step's publish took a while, or the held evaluation
    waited for a thread) leaves a held evaluation only what remains of the probe's wait."""
    rt, sid = runtime_with_job(tmp_path)
    rt.scratch.lookup("job1", "job1-a", "k", probe_step=2)  # a probe began, and never answered
    time.sleep(1.0)
    started = time.monotonic()
    out = evaluate_one(
        rt, "job1", "job1-b", "t", sid, 0, guarded=True, hold=Hold(step=2, probes=1, latency=0.0, wait=1.5)
    )
    waited = time.monotonic() - started  # 0.5 s left of the probe's wait, not 1.5 s of its own
    assert 0.3 < waited < 1.2 and out["passed"] is True


def test_a_hold_queued_by_an_older_worker_is_no_hold() -> None:
    """A rolling upgrade leaves evaluations queued with the old hold (absolute deadlines): they run
    at once instead of failing their job on a hold this version cannot read."""
    old = {"step": 2, "probes": 3, "expect": time.time(), "until": time.time() + 1}
    assert Hold.read(old) is None and Hold.read(None) is None
    assert Hold.read({"step": 2, "probes": 3, "latency": 0.1, "wait": 0.2}) == Hold(
        step=2, probes=3, latency=0.1, wait=0.2
    )
