"""Progress lines, the summary box, the YAML history document and decision replay."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
import yaml

from optiflow.core.actions import Finish
from optiflow.core.optimize.configuration import make_config
from optiflow.core.optimize.document import history_document, history_path
from optiflow.core.optimize.output import fmt_score, iteration_line, progress_lines, summary_box
from optiflow.core.optimize.replay import replay
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.errors import ValidationError

from .conftest import rules_passing, spec_of
from .harness import T0, Bodies, Params, ScriptedOptimizer, run_optimize


def by_rules(bodies: Bodies, params: Params, sid: str, run: int) -> bool:
    return int(sid[1:]) < rules_passing(bodies[("rules",)])


def cfg(rules: str) -> dict[str, Any]:
    return make_config({("rules",): rules}, {"temperature": 0.7})


SCRIPT = [
    [cfg("rule_a rule_b"), cfg("rule_a rule_b rule_c")],  # iteration 1: c2 new best (0.3)
    [cfg("rule_a rule_b"), cfg("rule_a x")],  # iteration 2: a duplicate, then 0.1: no gain
    [cfg("rule_a rule_b rule_c rule_d rule_e")],  # iteration 3: 0.5, new best
    [cfg("rule_a y")],  # iteration 4: no gain
]


def history(**changes: Any) -> OptimizationHistory:
    spec = spec_of(name="support bot", experiment="rewrite-rules", **changes)
    run = run_optimize(spec, by_rules, optimizer=ScriptedOptimizer(SCRIPT))
    assert isinstance(run.action, Finish) and isinstance(run.action.report, OptimizationHistory)
    return run.action.report


@pytest.fixture(scope="module")
def h() -> OptimizationHistory:
    return history()


def test_progress_lines(h: OptimizationHistory) -> None:
    assert progress_lines(h) == [
        "OPTIMIZE [support bot] Starting: treatmentFactor=sections:rules + model_params:temperature, objective=MAXIMIZE",
        "OPTIMIZE [support bot] Iteration 0: score=0.10 (best=0.10)",
        "OPTIMIZE [support bot] Iteration 1: score=0.30 (best=0.30) ↑ NEW BEST",
        "OPTIMIZE [support bot] Iteration 2: score=0.10 (best=0.30)",
        "OPTIMIZE [support bot] Iteration 3: score=0.50 (best=0.50) ↑ NEW BEST",
        "OPTIMIZE [support bot] Iteration 4: score=0.10 (best=0.50)",
        "OPTIMIZE [support bot] Terminated: The optimizer proposed no new candidate",
    ]
    empty = h.iterations[1].model_copy(update={"status": "no_candidates", "new_best": False})
    assert iteration_line("u", empty) == "OPTIMIZE [u] Iteration 1: no candidate to evaluate (best=0.30)"


def test_fmt_score() -> None:
    assert [fmt_score(x) for x in (0.85, 0.875, 1.0, 0.0, 0.00123, 12.34567, None)] == [
        "0.85",
        "0.875",
        "1.00",
        "0.00",
        "0.00123",
        "12.3457",
        "n/a",
    ]


def box_lines(text: str) -> list[str]:
    lines = text.splitlines()
    assert all(len(line) == 68 for line in lines), [line for line in lines if len(line) != 68]
    assert lines[0].startswith("╔") and lines[-1].startswith("╚")
    return lines


def test_summary_box_verbosities(h: OptimizationHistory) -> None:
    minimal = box_lines(summary_box(h, "minimal"))
    summary = box_lines(summary_box(h, "summary"))
    full = box_lines(summary_box(h, "full"))
    assert len(minimal) < len(summary) < len(full)
    text = "\n".join(summary)
    assert "║  OPTIMIZE: support bot / rewrite-rules" in text
    for expected in (
        "Treatment factor: sections:rules + model_params:temperature",
        "Fixed factors:    model=optiflow/sim, prompt=t/p",
        "Objective:        MAXIMIZE Success rate (higher is better)",
        "Iterations:       5",
        "Best iteration:   3 (c4)",
        "Raw score:        0.10 → 0.50 (+400.00%; as evaluated, not the",
        "Termination:      The optimizer proposed no new candidate",
        "Rejected:         1 duplicate",
        "rules:",
        "rule_a rule_b rule_c rule_d rule_e",
        "temperature=0.7",
    ):
        assert expected in text, expected
    assert "Fixed factors" not in "\n".join(minimal)
    assert "Best value:" in "\n".join(minimal)
    full_text = "\n".join(full)
    assert "#3 score=0.50 best=0.50 ↑ NEW BEST [c4=0.50]" in full_text
    assert "Lineage:          c4 ← c2 ← c0" in full_text


def test_history_path() -> None:
    at = datetime(2026, 1, 16, 10, 45, 30)
    assert (
        history_path("support bot", "rewrite-rules", at)
        == "optimizations/support-bot/rewrite-rules_20260116_104530.yaml"
    )
    assert history_path("../x", "", at) == "optimizations/x/optimize_20260116_104530.yaml"


def test_history_document_has_seed_003s_shape(h: OptimizationHistory) -> None:
    doc = yaml.safe_load(yaml.safe_dump(history_document(h), sort_keys=False, allow_unicode=True))
    for key in (
        "useCaseId",
        "experimentId",
        "treatmentFactorName",
        "treatmentFactorType",
        "fixedFactors",
        "objective",
        "scorerDescription",
        "mutatorDescription",
        "terminationPolicyDescription",
        "startTime",
        "endTime",
        "totalDurationMs",
        "iterations",
        "bestIteration",
        "terminationReason",
        "scoreImprovement",
        "scoreImprovementPercent",
        "totalIterations",
    ):
        assert key in doc, key
    assert doc["useCaseId"] == "support bot" and doc["objective"] == "MAXIMIZE"
    assert doc["startTime"] == T0.isoformat()
    first = doc["iterations"][0]
    assert first["iterationNumber"] == 0 and first["status"] == "SUCCESS" and first["score"] == 0.1
    assert first["factorSuit"] == {"model": "optiflow/sim", "temperature": 0.7, "rules": "rule_a"}
    assert first["statistics"]["sampleCount"] == 10 and first["statistics"]["successRate"] == 0.1
    assert doc["bestIteration"]["iterationNumber"] == 3
    assert doc["bestIteration"]["factorValues"]["rules"] == "rule_a rule_b rule_c rule_d rule_e"
    assert doc["terminationReason"]["cause"] == "EXHAUSTED"
    assert doc["scoreImprovement"] == pytest.approx(0.4)
    assert doc["scoreImprovementPercent"] == pytest.approx(400.0)
    assert doc["totalIterations"] == 5
    assert [r["reasonCode"] for r in doc["rejections"]] == ["duplicate"]
    assert {(e["source"], e["target"]) for e in doc["lineage"]["edges"]} >= {("c0", "c1"), ("c2", "c4")}
    assert doc["iterations"][-1]["decision"] == "stop"
    assert doc["settings"]["termination"]["type"] == "composite"


def yaml_round_trip(h: OptimizationHistory) -> dict[str, Any]:
    loaded = yaml.safe_load(yaml.safe_dump(history_document(h), allow_unicode=True))
    assert isinstance(loaded, dict)
    return loaded


def test_replay_of_an_unchanged_history_has_no_differing_decision(h: OptimizationHistory) -> None:
    report = replay(yaml_round_trip(h))
    assert report.ok, report.lines()
    assert report.best_candidate_id == h.best_candidate_id
    kinds = [d.kind for d in report.decisions]
    assert kinds.count("stop") == 5 and kinds.count("new_best") == 4 and kinds.count("score") == 6
    assert report.lines() == ["15 decisions replayed, none differs"]


def test_replay_lists_the_decisions_a_changed_policy_would_take(h: OptimizationHistory) -> None:
    report = replay(yaml_round_trip(h), termination={"max_iterations": 3})
    assert not report.ok
    assert [(d.iteration, d.kind, d.recorded, d.replayed) for d in report.differences] == [
        (2, "stop", "continue", "max_iterations"),
        (3, "stop", "continue", "max_iterations"),
        (4, "stop", "continue", "max_iterations"),
    ]
    assert report.termination is not None and report.termination.message == "Maximum of 3 iterations reached"
    assert report.lines()[0] == "3 of 15 decisions differ:"


def test_replay_of_a_policy_stop() -> None:
    stopped = history(termination={"max_iterations": 10, "no_improvement": 1})
    assert stopped.termination_reason.cause.value == "no_improvement"
    doc = yaml_round_trip(stopped)
    assert replay(doc).ok
    looser = replay(doc, termination={"max_iterations": 10, "no_improvement": 5})
    assert [(d.iteration, d.recorded, d.replayed) for d in looser.differences] == [
        (2, "no_improvement", "continue")
    ]


def test_replay_with_another_scorer_or_objective(h: OptimizationHistory) -> None:
    doc = yaml_round_trip(h)
    rescored = replay(doc, scorer="cost_efficiency")
    assert {d.kind for d in rescored.differences} == {"score"}  # same ranking here, other numbers
    flipped = replay(doc, objective="minimize")
    assert any(d.kind == "new_best" for d in flipped.differences)


def test_replay_refuses_a_foreign_document() -> None:
    with pytest.raises(ValidationError):
        replay({"useCaseId": "x"})


def test_acceptance_says_the_rule_in_words_once() -> None:
    """Issue 29: the summary printed ``Acceptance: none: none (set in the job)``."""
    from optiflow.core.optimize.output import acceptance_text

    assert acceptance_text("none", "none (set in the job)") == (
        "strictly better score, no statistical test (test: none, set in the job)"
    )
    assert acceptance_text("paired", "auto: 3 of 44 samples gave different results") == (
        "paired selection (auto: 3 of 44 samples gave different results)"
    )
    assert acceptance_text("mann_whitney", "") == "strictly better score and a Mann-Whitney U test"
