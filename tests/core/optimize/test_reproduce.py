"""``auto``'s deterministic rule crowns nothing it did not see twice (issue 28): a crowning waits
for one more run of the contender and the best; a flip switches the job to the paired selection,
and the held-out confirmation is the paired test whatever rule selection used."""

from __future__ import annotations

from typing import Any

from optiflow.core.actions import Finish
from optiflow.core.gate.outcomes import Outcomes
from optiflow.core.optimize.document import history_document
from optiflow.core.optimize.replay import replay
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.core.optimize.reproduce import flipped

from .conftest import rules_passing, spec_of
from .harness import Bodies, Params, ScriptedOptimizer, run_optimize


def cfg(rules: str) -> dict[str, Any]:
    return {"sections": {"rules": rules}, "model_params": {"temperature": 0.7}}


def mostly_sure(bodies: Bodies, params: Params, sid: str, run: int) -> bool:
    """Deterministic except for ``rule_coin``: s5..s7 pass on even runs only (a sampled model
    whose other samples are sure)."""
    rules = bodies[("rules",)]
    if "rule_coin" in rules and sid in ("s5", "s6", "s7"):
        return run % 2 == 0
    return rules_passing(rules) > int(sid[1:])


def _history(run: Any) -> OptimizationHistory:
    assert isinstance(run.action, Finish), run.action
    report = run.action.report
    assert isinstance(report, OptimizationHistory)
    return report


def test_a_flip_in_the_reproduction_switches_to_paired_selection() -> None:
    spec = spec_of(termination={"max_iterations": 3})
    opt = ScriptedOptimizer([[cfg("rule_a rule_coin")], [cfg("rule_a rule_b")]])
    run = run_optimize(spec, mostly_sure, optimizer=opt, max_steps=10_000)
    h = _history(run)
    names = [s.name for s in run.steps]
    assert names[:3] == ["baseline", "iteration-1", "iteration-1-reproduce"]
    # one run said 0.4 against 0.1: today's rule would have crowned c1 on it
    assert h.trial("c1") is not None and h.trial("c1").selection is not None  # decided by the race
    assert h.acceptance_rule == "paired" and h.acceptance_rule_switched_at == 1
    assert "answered differently when run once more" in h.acceptance_rule_reason
    assert any(n.startswith("iteration-2") and n != "iteration-2-reproduce" for n in names)
    assert "iteration-2-reproduce" not in names  # every later iteration is raced
    doc = history_document(h)
    assert doc["acceptanceRuleSwitchedAt"] == 1
    assert replay(doc).ok, replay(doc).lines()


def test_a_deterministic_model_pays_one_run_of_two_candidates_per_crowning() -> None:
    spec = spec_of(termination={"max_iterations": 3})
    opt = ScriptedOptimizer([[cfg("rule_a rule_b")], [cfg("rule_x")]])  # the second is no better
    run = run_optimize(spec, mostly_sure, optimizer=opt)
    h = _history(run)
    assert [s.name for s in run.steps] == ["baseline", "iteration-1", "iteration-1-reproduce", "iteration-2"]
    assert sum(t.runs * len(t.sample_ids) for t in run.steps[2].targets) == 2 * 10
    assert h.best_candidate_id == "c1" and h.acceptance_rule == "none"
    assert replay(history_document(h)).ok


def test_flipped_reads_answered_runs_of_either_side() -> None:
    a = Outcomes.of({"x": "11", "y": "0e0", "z": "1.0"})
    b = Outcomes.of({"x": "10", "y": "00", "z": "11"})
    assert flipped([a], ["x", "y", "z"]) == ["z"]
    assert flipped([a, b], ["x", "y", "z"]) == ["x", "z"]
