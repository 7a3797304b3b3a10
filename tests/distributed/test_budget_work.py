"""The task bodies under a job budget: an evaluation charges what its call cost, and once the
spend reaches the budget no model call is made (a skip, a proposal error, a rewrite error)."""

from __future__ import annotations

from pathlib import Path

from optiflow.core.budget import Charge
from optiflow.core.sections import path_str
from optiflow.core.step import RewriteRequest
from optiflow.distributed.work import evaluate_one, propose_one, rewrite_one

from .test_work import runtime_with_job


def test_an_evaluation_charges_its_call_and_none_is_made_past_the_budget(tmp_path: Path) -> None:
    rt, sid = runtime_with_job(tmp_path, max_cost_usd=0.002, max_tokens=10_000)
    first = evaluate_one(rt, "job1", "job1-a", "opt-job1-a", sid, 0, guarded=False)
    spend = rt.scratch.spend("job1")
    assert first["cost"] > 0 and spend.cost_usd == first["cost"]
    assert spend.tokens == first["prompt_tokens"] + first["completion_tokens"]
    rt.scratch.charge("job1", Charge(cost_usd=0.002))  # the rest of the fleet spent the budget
    skipped = evaluate_one(rt, "job1", "job1-a", "opt-job1-a", sid, 1, guarded=False)
    assert skipped == {
        "experiment_id": "job1-a",
        "sample_id": sid,
        "run": 1,
        "reason": "budget_exhausted",
        "skipped": True,
    }
    cached = evaluate_one(rt, "job1", "job1-b", "opt-job1-b", sid, 0, guarded=False)  # costs no call
    assert cached["cached"] is True and cached["passed"] == first["passed"]
    after = rt.scratch.spend("job1")
    assert (after.cost_usd, after.skipped, after.over_calls) == (spend.cost_usd + 0.002, 1, 0)


def test_proposals_and_rewrites_check_and_charge_the_budget(tmp_path: Path) -> None:
    rt, _ = runtime_with_job(tmp_path, max_tokens=100_000)
    spec = rt.spec("job1")
    section = next(s for s in spec.prompt.sections if not s.frozen)
    made = propose_one(rt, "job1", path_str(section.path))
    assert "edit" in made and rt.scratch.spend("job1").tokens > 0  # the strategy's call, charged
    request = RewriteRequest(
        id="r1", model=spec.model, section=section.path, current=section.body, max_length=10_000
    )
    rt.scratch.charge("job1", Charge(tokens=100_000))
    refused = propose_one(rt, "job1", path_str(section.path))
    assert refused["proposal_error"]["error"].startswith("budget exhausted: spent")
    reply = rewrite_one(rt, "job1", request.model_dump(mode="json"))["rewrite"]
    assert reply["id"] == "r1" and reply["text"] is None and reply["error"].startswith("budget exhausted")
    assert rt.scratch.spend("job1").skipped == 2
