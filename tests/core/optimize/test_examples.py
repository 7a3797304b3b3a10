"""The shipped optimize examples on the simulated model, and the simulated rewrite / policy protocols."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from optiflow.core.actions import Finish
from optiflow.core.model import ModelConfig
from optiflow.core.optimize.configuration import config_sections
from optiflow.core.optimize.document import history_document
from optiflow.core.optimize.output import summary_box
from optiflow.core.optimize.replay import replay
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.core.optimize.structured import StructuredOptimizerSpec
from optiflow.core.optimize.termination import TerminationCause
from optiflow.core.step import FailingExample, IterationFeedback, RewriteRequest
from optiflow.llm.rewrite import REWRITE_MARKER, rewrite_messages
from optiflow.llm.simulated import GENERIC_ANSWER, SimulatedModel, policy_decision, rewrite_plan

from .harness import run_optimize
from .sim import load_example_spec, sim_evaluator, sim_rewrite


def run_example(name: str, **changes: Any) -> OptimizationHistory:
    spec = load_example_spec(name, **changes)
    run = run_optimize(spec, lambda *a: True, rewrite=sim_rewrite, evaluate=sim_evaluator(spec))
    assert isinstance(run.action, Finish), run.action
    assert isinstance(run.action.report, OptimizationHistory)
    return run.action.report


@pytest.fixture(scope="module")
def helpdesk() -> OptimizationHistory:
    return run_example("weak-helpdesk")


def test_weak_prompt_gains_at_least_30_points_by_llm_rewrite(helpdesk: OptimizationHistory) -> None:
    h = helpdesk
    assert h.baseline_score == pytest.approx(0.2)  # validation split
    assert h.best_score - h.baseline_score >= 0.30
    assert h.test is not None
    assert h.test.best.summary.pass_rate - h.test.baseline.summary.pass_rate >= 0.30  # held-out test split
    assert h.termination_reason.cause is TerminationCause.OPTIMIZER  # nothing left to fix
    body = config_sections(h.best_configuration)[("guidance",)]
    assert "When a customer asks about late parcels, reply with code SHP-310." in body
    assert "filed under" not in body
    assert [o.path for o in h.best_overrides] == [("guidance",)]
    box = summary_box(h)
    assert "Raw score:        0.20 → 1.00 (+400.00%; as evaluated, not the" in box
    assert "Termination:      no failing sample left" in box


def test_its_history_replays_with_no_differing_decision(helpdesk: OptimizationHistory) -> None:
    doc = yaml.safe_load(yaml.safe_dump(history_document(helpdesk), allow_unicode=True))
    report = replay(doc)
    assert report.ok, report.lines()


def test_parallel_rewrites_that_coincide_are_rejected_as_duplicates(helpdesk: OptimizationHistory) -> None:
    assert helpdesk.rejections and {r.reason_code for r in helpdesk.rejections} == {"duplicate"}
    evaluated = {t.config_hash for t in helpdesk.trials}
    assert all(r.config_hash in evaluated for r in helpdesk.rejections)  # the first copy was run, once
    assert len(evaluated) == len(helpdesk.trials)


def test_structured_mutation_converges_to_parameters_that_fix_every_failure_category() -> None:
    h = run_example("agent-policy")
    spec = StructuredOptimizerSpec.model_validate(load_example_spec("agent-policy").optimizer.model_dump())
    values = spec.block.parse(config_sections(h.best_configuration)[("policy_parameters",)])
    assert values["health_threshold"] == pytest.approx(0.4)
    assert values["hunger_threshold"] == pytest.approx(0.6)
    assert values["risk_tolerance"] == pytest.approx(0.5)
    assert values["max_exploration_steps"] == 150
    assert values["skill_priority"][0] == "flee"  # type: ignore[index]
    best = h.trial(h.best_candidate_id)
    assert best is not None and best.failing == () and best.summary.pass_rate == 1.0
    assert h.baseline_score < 0.3
    assert h.termination_reason.message == "no failing sample left"
    rationales = " ".join(t.rationale or "" for t in h.trials)
    for category in ("injury", "starvation", "too_passive", "premature_return", "combat_loss"):
        assert category in rationales
    doc = yaml.safe_load(yaml.safe_dump(history_document(h), allow_unicode=True))
    assert replay(doc).ok


# -- the simulated protocols ----------------------------------------------------------------------
BODY = (
    "Be kind. Questions about refunds are filed under RFD-201. Questions about late parcels are handled "
    "under SHP-310. Questions about gift cards are filed under GFT-610."
)


def test_rewrite_plan_converts_hints_relevant_to_failing_inputs() -> None:
    failing = ["where is my refund", "my parcel is late", "parcel late again"]
    plan = rewrite_plan(BODY, failing, variant=0, per_call=1)
    assert plan.converted == (
        ("Questions about late parcels are handled under SHP-310", "When a customer asks about late parcels, reply with code SHP-310"),
    )  # fmt: skip
    assert "Questions about refunds are filed under RFD-201" in plan.text
    second = rewrite_plan(BODY, failing, variant=1, per_call=1)
    assert second.converted[0][1] == "When a customer asks about refunds, reply with code RFD-201"
    assert rewrite_plan(BODY, ["unrelated question"]).text == BODY
    both = rewrite_plan(BODY, failing, per_call=5)
    assert len(both.converted) == 2 and "GFT-610" in both.text and "gift cards are filed" in both.text


def test_rewrite_request_round_trip_through_the_sim() -> None:
    request = RewriteRequest(
        id="g0-v0",
        model=ModelConfig(model="optiflow/sim"),
        prompt_id="helpdesk/assistant",
        section=("guidance",),
        current=BODY,
        max_length=500,
        iterations=(IterationFeedback(iteration=0, score=0.2, success_rate=0.2),),
        failing=(
            FailingExample(
                sample_id="s1", input={"question": "When will my refund arrive?"}, expected="RFD-201"
            ),
        ),
    )
    messages = rewrite_messages(request)
    assert messages[0]["content"].startswith(REWRITE_MARKER)
    assert "Iteration 0: score=0.200, successRate=20.00%" in messages[1]["content"]
    reply = SimulatedModel().reply(messages, sleep=False)
    assert "When a customer asks about refunds, reply with code RFD-201." in reply.text


POLICY = """When health is below health_threshold, reply with code FLEE.
When enemy_strength is below risk_tolerance, reply with code FIGHT.
When steps is at least 100, reply with code RETURN.
Otherwise reply with code EXPLORE.
  health_threshold: 0.4   # flee below this
  risk_tolerance: 0.5
  skill_priority: [flee, fight]"""


def test_policy_decisions() -> None:
    assert policy_decision(POLICY, "health=0.3, enemy_strength=0.9, steps=10") == "FLEE"
    assert policy_decision(POLICY, "health=0.3, enemy_strength=0.2, steps=10") == "FLEE"  # priority
    assert (
        policy_decision(POLICY.replace("[flee, fight]", "[fight, flee]"), "health=0.3 enemy_strength=0.2")
        == "FIGHT"
    )
    assert policy_decision(POLICY, "health=0.9, enemy_strength=0.9, steps=100") == "RETURN"
    assert policy_decision(POLICY, "health=0.9, enemy_strength=0.9, steps=10") == "EXPLORE"
    assert policy_decision(POLICY, "Where is my refund?") is None  # no observation: not a policy question
    assert policy_decision("When a customer asks about refunds, reply with code R.", "health=0.1") is None
    sim = SimulatedModel()
    msgs = [{"role": "system", "content": POLICY}, {"role": "user", "content": "health=0.1, steps=5"}]
    assert sim.reply(msgs, sleep=False).text == "Based on the observations, my next action is FLEE."
    assert sim.reply(msgs, {"sim_style": "label"}, sleep=False).text == "FLEE"
    assert sim.reply(msgs, {"sim_noise": 1.0}, sleep=False).text == GENERIC_ANSWER


def test_run_rewrite_through_litellm_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    from optiflow.llm.rewrite import run_rewrite

    monkeypatch.setenv("OPTIFLOW_RETRY_BACKOFF_S", "0.001")
    request = RewriteRequest(
        id="g1-v0",
        model=ModelConfig(model="optiflow/sim"),
        section=("guidance",),
        current=BODY,
        max_length=500,
        failing=(FailingExample(sample_id="s", input="Is my parcel late?", expected="SHP-310"),),
    )
    reply = run_rewrite(request)
    assert reply.error is None and reply.id == "g1-v0"
    assert reply.text is not None and "reply with code SHP-310" in reply.text
    assert reply.prompt_tokens > 0 and reply.cost > 0
    auth = ModelConfig(model="optiflow/sim", params={"sim_error": "auth", "sim_fail_attempts": 1}, retries=0)
    failed = run_rewrite(request.model_copy(update={"model": auth}))
    assert failed.text is None and failed.error is not None and "authentication" in failed.error
