"""Parameter blocks, seed 004's mutation operators, failure analysis and the structured optimizer."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError

from optiflow.core.evaluation import TrialSummary
from optiflow.core.optimize.configuration import config_hash, config_sections, make_config
from optiflow.core.optimize.failures import analyze_failures
from optiflow.core.optimize.history import IterationRecord, TrialHistory
from optiflow.core.optimize.operators import (
    MaxStepsOp,
    MutationError,
    PriorityOp,
    RiskToleranceOp,
    ThresholdOp,
)
from optiflow.core.optimize.params import ParameterBlockError, ParameterBlockSpec
from optiflow.core.optimize.protocol import OptimizerState, StopReason
from optiflow.core.optimize.structured import StructuredMutationOptimizer, StructuredOptimizerSpec
from optiflow.core.optimize.trial import FailingSample, TrialResult

from .harness import T0

BODY = """policy_parameters:
  health_threshold: 0.3            # Flee if health < 30%
  hunger_threshold: 0.5
  max_exploration_steps: 100
  max_combat_attempts: 3
  risk_tolerance: 0.5              # 0=conservative, 1=aggressive
  skill_priority: [explore, fight, eat, use_item, flee]
Keep these in mind."""
BLOCK = ParameterBlockSpec.model_validate(
    {
        "section": "policy",
        "params": {
            "health_threshold": {"type": "float", "min": 0, "max": 1},
            "hunger_threshold": {"type": "float", "min": 0, "max": 1},
            "max_exploration_steps": {"type": "int", "min": 10, "max": 1000},
            "max_combat_attempts": "int",
            "risk_tolerance": {"type": "float", "min": 0, "max": 1},
            "skill_priority": "order",
        },
    }
)
VALUES = BLOCK.parse(BODY)


def test_block_parse_and_render_in_place() -> None:
    assert VALUES == {
        "health_threshold": 0.3,
        "hunger_threshold": 0.5,
        "max_exploration_steps": 100,
        "max_combat_attempts": 3,
        "risk_tolerance": 0.5,
        "skill_priority": ["explore", "fight", "eat", "use_item", "flee"],
    }
    out = BLOCK.render(BODY, {"health_threshold": 0.4, "skill_priority": ["flee", "explore"]})
    assert "  health_threshold: 0.4            # Flee if health < 30%" in out
    assert "  skill_priority: [flee, explore]" in out
    assert out.endswith("Keep these in mind.")
    assert BLOCK.render(BODY, VALUES) == BODY


def test_block_errors() -> None:
    with pytest.raises(ParameterBlockError):
        BLOCK.parse(BODY.replace("hunger_threshold: 0.5", "hunger: 0.5"))
    with pytest.raises(ParameterBlockError):
        BLOCK.parse(BODY.replace("max_combat_attempts: 3", "max_combat_attempts: 3.5"))
    with pytest.raises(ParameterBlockError):
        BLOCK.check({**VALUES, "risk_tolerance": 2.0})
    with pytest.raises(ParameterBlockError):
        BLOCK.render(BODY, {"unknown": 1})
    with pytest.raises(ValidationError):
        ParameterBlockSpec.model_validate({"section": "p", "params": {"bad name": "float"}})


def test_threshold_adjustment() -> None:
    new, desc = ThresholdOp(param="health_threshold", delta=0.1, direction="increase").apply(VALUES, BLOCK)
    assert new["health_threshold"] == 0.4
    assert desc == "Adjusted health_threshold: 0.300 → 0.400 (increase, Δ=0.100)"
    new, _ = ThresholdOp(param="hunger_threshold", delta=0.7, direction="decrease").apply(VALUES, BLOCK)
    assert new["hunger_threshold"] == 0.0  # clamped to the range
    with pytest.raises(MutationError):
        ThresholdOp(param="skill_priority", delta=0.1, direction="increase").apply(VALUES, BLOCK)


def test_priority_operations() -> None:
    new, desc = PriorityOp(param="skill_priority", operation="prioritize", item="flee").apply(VALUES, BLOCK)
    assert new["skill_priority"] == ["flee", "explore", "fight", "eat", "use_item"]
    assert desc.startswith("Prioritized 'flee': ")
    new, _ = PriorityOp(param="skill_priority", operation="deprioritize", item="FIGHT").apply(VALUES, BLOCK)
    assert new["skill_priority"] == ["explore", "eat", "use_item", "flee", "fight"]
    new, desc = PriorityOp(param="skill_priority", operation="rotate").apply(VALUES, BLOCK)
    assert new["skill_priority"] == ["fight", "eat", "use_item", "flee", "explore"]
    assert desc.startswith("Rotated skill_priority")
    same, _ = PriorityOp(param="skill_priority", operation="prioritize", item="sleep").apply(VALUES, BLOCK)
    assert same == VALUES
    with pytest.raises(ValidationError):
        PriorityOp(param="skill_priority", operation="prioritize")


def test_risk_tolerance() -> None:
    new, desc = RiskToleranceOp(value=0.7).apply(VALUES, BLOCK)
    assert new["risk_tolerance"] == 0.7
    assert desc == "Changed risk tolerance: balanced (0.500) → aggressive (0.700)"
    new, desc = RiskToleranceOp(delta=-0.2).apply(VALUES, BLOCK)
    assert new["risk_tolerance"] == 0.3 and "conservative (0.300)" in desc
    with pytest.raises(ValidationError):
        RiskToleranceOp(value=0.5, delta=0.1)


def test_max_steps() -> None:
    new, desc = MaxStepsOp(changes={"max_exploration_steps": 50, "max_combat_attempts": 2}).apply(
        VALUES, BLOCK
    )
    assert (new["max_exploration_steps"], new["max_combat_attempts"]) == (150, 5)
    assert desc == "Adjusted max_exploration_steps: 100 → 150, max_combat_attempts: 3 → 5"
    new, _ = MaxStepsOp(changes={"max_exploration_steps": 5000}, mode="set").apply(VALUES, BLOCK)
    assert new["max_exploration_steps"] == 1000


def failing(*tags: str, expected: str = "X") -> list[FailingSample]:
    return [FailingSample(sample_id=f"f{i}", tags=(t,), expected=expected) for i, t in enumerate(tags)]


def test_failure_analysis_orders_by_count_then_table() -> None:
    a = analyze_failures(
        failing("injury", "starvation", "injury", "combat", "other"),
        categories=["starvation", "combat", "injury"],
    )
    assert a.failure_counts == {"injury": 2, "starvation": 1, "combat": 1}
    assert a.uncategorized == 1
    by_expected = analyze_failures(
        failing("a", "b", expected="FLEE"), categories=["EAT", "FLEE"], categorize="expected"
    )
    assert by_expected.failure_counts == {"FLEE": 2}


SPEC = StructuredOptimizerSpec.model_validate(
    {
        "block": BLOCK.model_dump(),
        "table": {
            "injury": [
                {"op": "threshold", "param": "health_threshold", "delta": 0.1, "direction": "increase"}
            ],
            "starvation": [
                {"op": "threshold", "param": "hunger_threshold", "delta": 0.1, "direction": "decrease"}
            ],
            "combat_loss": [
                {"op": "priority", "param": "skill_priority", "operation": "prioritize", "item": "flee"},
                {"op": "risk_tolerance", "delta": -0.1},
            ],
        },
    }
)


def trial(cid: str, body: str, fails: list[FailingSample]) -> TrialResult:
    cfg = make_config({("policy",): body})
    summary = TrialSummary(
        total=10, passed=10 - len(fails), failed=len(fails), pass_rate=1 - len(fails) / 10,
        total_cost=0.0, avg_latency_ms=0.0, avg_ttft_ms=None, total_tokens=0,
    )  # fmt: skip
    return TrialResult(
        optimization_id="j", candidate_id=cid, mask_id=cid, experiment_id=cid, step_index=0, iteration=0,
        status="completed", objective_score=summary.pass_rate, summary=summary, configuration=cfg,
        config_hash=config_hash(cfg), failing=tuple(fails),
    )  # fmt: skip


def hist(*trials: TrialResult) -> TrialHistory:
    it = IterationRecord(
        number=0, new_best=True, best_candidate_so_far=trials[0].candidate_id, best_so_far=0.5,
        started_at=T0, ended_at=T0 + timedelta(seconds=1),
    )  # fmt: skip
    return TrialHistory(started_at=T0, trials=trials, iterations=(it,))


def test_structured_proposes_from_the_most_frequent_failure_first() -> None:
    opt = StructuredMutationOptimizer(SPEC)
    base = trial("c0", BODY, failing("starvation", "combat_loss", "combat_loss", "injury", "calm"))
    state = OptimizerState(best_candidate_id="c0", best_score=0.5)
    proposals = opt.propose(state, hist(base), 3)
    assert [p.rationale for p in proposals] == [
        "combat_loss x2: Prioritized 'flee': ['explore', 'fight', 'eat', 'use_item', 'flee'] → "
        "['flee', 'explore', 'fight', 'eat', 'use_item']",
        "combat_loss x2: Changed risk tolerance: balanced (0.500) → balanced (0.400)",
        "injury x1: Adjusted health_threshold: 0.300 → 0.400 (increase, Δ=0.100)",  # a tie: table order
    ]
    assert all(p.parent_candidate_ids == ("c0",) for p in proposals)
    body = config_sections(proposals[0].configuration)[("policy",)]
    assert BLOCK.parse(body)["skill_priority"][0] == "flee"
    assert "# Flee if health < 30%" in body  # only the value changed


def test_structured_skips_configurations_already_tried() -> None:
    opt = StructuredMutationOptimizer(SPEC)
    base = trial("c0", BODY, failing("injury"))
    tried_body = BLOCK.render(BODY, {"health_threshold": 0.4})
    history = hist(base, trial("c1", tried_body, failing("injury")))
    assert opt.propose(OptimizerState(best_candidate_id="c0"), history, 3) == []


def test_structured_combine_and_stop() -> None:
    spec = SPEC.model_copy(update={"combine": True})
    opt = StructuredMutationOptimizer(spec)
    base = trial("c0", BODY, failing("injury", "starvation"))
    proposals = opt.propose(OptimizerState(best_candidate_id="c0"), hist(base), 5)
    assert proposals[0].rationale is not None and proposals[0].rationale.startswith("Combined: ")
    values = BLOCK.parse(config_sections(proposals[0].configuration)[("policy",)])
    assert (values["health_threshold"], values["hunger_threshold"]) == (0.4, 0.4)
    assert len(proposals) == 3
    done = trial("c0", BODY, [])
    decision = opt.should_stop(OptimizerState(best_candidate_id="c0"), hist(done))
    assert decision.should_stop and decision.reason is StopReason.TARGET_REACHED
    assert not opt.should_stop(OptimizerState(best_candidate_id="c0"), hist(base)).should_stop


def test_structured_spec_checks_operators_against_the_block() -> None:
    with pytest.raises(ValidationError, match=r"table\.x"):
        StructuredOptimizerSpec.model_validate(
            {
                "block": BLOCK.model_dump(),
                "table": {"x": [{"op": "threshold", "param": "nope", "delta": 0.1, "direction": "increase"}]},
            }
        )
