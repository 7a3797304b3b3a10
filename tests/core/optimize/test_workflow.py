"""The optimize workflow walked with hand-made results (no Celery, no I/O)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from optiflow.core.actions import Fail, Finish
from optiflow.core.dataset import Dataset, Sample
from optiflow.core.evaluation import EvalResult
from optiflow.core.optimize.configuration import config_hash, make_config
from optiflow.core.optimize.protocol import CandidateProposal
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.core.optimize.spec import OptimizeSpec
from optiflow.core.optimize.state import OptimizeState
from optiflow.core.optimize.termination import TerminationCause
from optiflow.core.optimize.workflow import OptimizeWorkflow
from optiflow.core.sections import SectionPath
from optiflow.core.step import EvalTarget, RewriteReply, RewriteRequest, Step, StepResults

from .conftest import PROMPT, rules_passing, spec_of
from .harness import T0, Bodies, FakeClock, Params, ScriptedOptimizer, evaluate_target, run_optimize

GOOD = {0.0: 7, 0.2: 9, 0.7: 5, 1.0: 3}


def by_temperature(bodies: Bodies, params: Params, sid: str, run: int) -> bool:
    t = params.get("temperature", 0.7)
    assert isinstance(t, int | float)  # the canonical form writes 0.0 as 0
    return int(sid[1:]) < GOOD[float(t)]


def by_rules(bodies: Bodies, params: Params, sid: str, run: int) -> bool:
    return int(sid[1:]) < rules_passing(bodies[("rules",)])


def report_of(run: Any) -> OptimizationHistory:
    assert isinstance(run.action, Finish), run.action
    assert isinstance(run.action.report, OptimizationHistory)
    return run.action.report


def cfg(rules: str, temperature: float = 0.7) -> dict[str, Any]:
    return make_config({("rules",): rules}, {"temperature": temperature})


def test_grid_search_walk(spec: OptimizeSpec) -> None:
    run = run_optimize(spec, by_temperature)
    # auto's deterministic rule crowns c2 only after c2 and the best ran once more and agreed
    names = ["baseline", "iteration-1", "iteration-1-reproduce", "iteration-2"]
    assert [s.name for s in run.steps] == names
    again = run.steps[2].targets
    assert [(t.experiment.id, t.first_run, t.runs) for t in again] == [("job1-c2", 1, 1), ("job1-c0", 2, 1)]
    baseline = run.steps[0].targets[0]
    assert baseline.experiment.id == "job1-c0"
    assert baseline.experiment.overrides_tag == "opt-job1-c0"
    assert baseline.experiment.parent_tag == "stable"
    assert baseline.sample_ids == spec.dataset.ids() and baseline.runs == 1
    first = run.steps[1].targets
    assert [t.experiment.overrides_tag for t in first] == ["opt-job1-c1", "opt-job1-c2"]
    assert [t.model_params["temperature"] for t in first] == [0.0, 0.2]
    assert all(t.overrides[0].path == ("rules",) and t.overrides[0].body == "rule_a" for t in first)
    assert all(t.overrides[0].expected_hash == PROMPT.section(("rules",)).hash for t in first)
    h = report_of(run)
    assert (h.best_candidate_id, h.baseline_score, h.best_score) == ("c2", 0.5, 0.9)
    assert h.best_model_params == {"temperature": 0.2} and h.best_overrides == ()
    assert [it.new_best for it in h.iterations] == [True, True, False]
    assert h.termination_reason.cause is TerminationCause.EXHAUSTED  # 0.7 is the baseline: never re-run
    assert h.score_improvement == pytest.approx(0.4) and h.score_improvement_percent == pytest.approx(80.0)
    assert [(e.source, e.target) for e in h.lineage().edges] == [("c0", "c1"), ("c0", "c2"), ("c0", "c3")]
    # 40 as before, + the baseline's second run (acceptance auto: two runs show the model
    # deterministic), + the reproduction of the crowning (c2 and the baseline, 10 samples each)
    assert h.stats.evaluations == 70 and h.stats.steps == 4
    assert h.acceptance_rule_switched_at is None
    assert h.acceptance_rule == "none" and "deterministic" in h.acceptance_rule_reason
    assert h.fixed_factors["model"] == "optiflow/sim"
    assert h.fixed_factors["sections"] == {"intro": "frozen " + PROMPT.section(("intro",)).hash[:12], "style": PROMPT.section(("style",)).hash[:12]}  # fmt: skip


def test_baseline_failure_fails_the_job_and_never_initializes_the_optimizer(spec: OptimizeSpec) -> None:
    def errors(step: Step) -> list[EvalResult]:
        return [
            EvalResult(experiment_id=t.experiment.id, sample_id=s, run=0, error="401 invalid api key")
            for t in step.targets
            for s in t.sample_ids
        ]

    opt = ScriptedOptimizer([[cfg("rule_a rule_b")]])
    run = run_optimize(spec, by_rules, evaluate=errors, optimizer=opt)
    assert isinstance(run.action, Fail)
    assert run.action.error == "baseline evaluation failed: 401 invalid api key"
    assert opt.initialized == [] and run.state.optimizer is None
    assert [s.name for s in run.steps] == ["baseline"]


def test_partial_errors_are_failing_evaluations_not_a_failed_baseline(spec: OptimizeSpec) -> None:
    def some_errors(step: Step) -> list[EvalResult]:
        out = [r for t in step.targets for r in evaluate_target(spec.prompt, t, by_rules)]
        return [
            r.model_copy(update={"error": "timeout", "passed": False}) if r.sample_id == "s0" else r
            for r in out
        ]

    run = run_optimize(spec, by_rules, evaluate=some_errors, optimizer=ScriptedOptimizer([]))
    h = report_of(run)
    assert h.trials[0].status == "completed" and h.trials[0].summary.passed == 0


def test_duplicate_proposal_is_rejected_and_never_evaluated(spec: OptimizeSpec) -> None:
    better = cfg("rule_a rule_b")
    base = cfg("rule_a")
    opt = ScriptedOptimizer([[better, better, base], [better]])
    run = run_optimize(spec, by_rules, optimizer=opt)
    h = report_of(run)
    evaluated = [t for s in run.steps for t in s.targets if t.first_run == 0]  # auto: + c0's 2nd run
    assert [t.experiment.id for t in evaluated] == ["job1-c0", "job1-c1"]  # once each
    assert [(r.iteration, r.proposed_index, r.reason_code, r.duplicate_of) for r in h.rejections] == [
        (1, 1, "duplicate", "proposal 0 of this step"),
        (1, 2, "duplicate", "c0"),
        (2, 0, "duplicate", "c1"),
    ]
    # iteration 2 had nothing to evaluate: recorded without a step, then the optimizer ran dry
    assert [it.status for it in h.iterations] == ["success", "success", "no_candidates"]
    assert h.iterations[2].step_index is None and h.iterations[2].candidate_ids == ()
    assert opt.observed == [["c1"], []]
    assert h.termination_reason.cause is TerminationCause.EXHAUSTED


def test_frozen_section_proposal_is_rejected_with_its_code(spec: OptimizeSpec) -> None:
    frozen = {
        "sections": {"rules": "rule_a", "intro": "You are evil ${company}."},
        "model_params": {"temperature": 0.7},
    }
    run = run_optimize(spec, by_rules, optimizer=ScriptedOptimizer([[frozen]]))
    h = report_of(run)
    assert [r.reason_code for r in h.rejections] == ["frozen_section"]
    assert [s.name for s in run.steps] == ["baseline"]


def test_at_most_max_candidates_per_step_in_one_step(spec: OptimizeSpec) -> None:
    script = [[cfg("rule_a " + "rule_x " * i) for i in range(1, 5)]]
    run = run_optimize(spec, by_rules, optimizer=ScriptedOptimizer(script))
    h = report_of(run)
    assert len(run.steps[1].targets) == 2
    assert [r.reason_code for r in h.rejections] == ["over_limit", "over_limit"]
    assert h.best_candidate_id == "c2"  # rule_a + 2 rule_x: 3 passes
    assert [t.accepted for t in h.trials] == [True, False, True]


def test_unknown_parent_is_rejected(spec: OptimizeSpec) -> None:
    orphan = CandidateProposal(configuration=cfg("rule_a rule_b"), parent_candidate_ids=("c7",))
    h = report_of(run_optimize(spec, by_rules, optimizer=ScriptedOptimizer([[orphan]])))
    assert [r.reason_code for r in h.rejections] == ["unknown_parent"]


def test_minimize_objective_keeps_the_cheapest(spec: OptimizeSpec) -> None:
    tokens = {0.0: 300, 0.2: 120, 0.7: 200, 1.0: 150}

    def answer(bodies: Bodies, params: Params, sid: str, run: int) -> tuple[bool, int]:
        t = params.get("temperature", 0.7)
        assert isinstance(t, int | float)
        return True, tokens[float(t)]

    minimize = spec_of(scorer="avg_tokens", objective="minimize")
    h = report_of(run_optimize(minimize, answer))
    assert h.best_model_params == {"temperature": 0.2}
    assert h.baseline_score == 210.0 and h.best_score == 130.0  # + 10 completion tokens each
    assert h.score_improvement == -80.0
    assert [it.new_best for it in h.iterations] == [True, True, False]  # 1.0 (160) is not better than 130


def test_no_improvement_stops_and_time_and_token_budgets_use_history_and_clock() -> None:
    never_better = [[cfg(f"rule_a filler{i}")] for i in range(20)]
    spec = spec_of(termination={"max_iterations": 20, "no_improvement": 2})
    h = report_of(run_optimize(spec, by_rules, optimizer=ScriptedOptimizer(never_better)))
    assert h.total_iterations == 3 and h.termination_reason.cause is TerminationCause.NO_IMPROVEMENT

    timed = spec_of(
        termination=[{"type": "time_budget", "seconds": 25}, {"type": "max_iterations", "iterations": 20}]
    )
    run = run_optimize(timed, by_rules, optimizer=ScriptedOptimizer(never_better), clock=FakeClock(step=10))
    h = report_of(run)
    assert h.termination_reason.cause is TerminationCause.TIME_BUDGET
    assert (h.iterations[-1].ended_at - T0) >= timedelta(seconds=25)
    assert (h.iterations[-2].ended_at - T0) < timedelta(seconds=25)

    budget = spec_of(termination={"token_budget": 2500, "max_iterations": 20})
    h = report_of(run_optimize(budget, by_rules, optimizer=ScriptedOptimizer(never_better)))
    assert h.termination_reason.cause is TerminationCause.TOKEN_BUDGET
    assert [it.tokens for it in h.iterations] == [1100, 1100, 1100]  # 10 samples x (100 + 10) tokens


def test_composite_order_decides_the_recorded_reason() -> None:
    never_better = [[cfg(f"rule_a filler{i}")] for i in range(20)]
    both = [{"type": "max_iterations", "iterations": 3}, {"type": "no_improvement", "window": 2}]
    h = report_of(
        run_optimize(spec_of(termination=both), by_rules, optimizer=ScriptedOptimizer(never_better))
    )
    assert h.termination_reason.cause is TerminationCause.MAX_ITERATIONS
    h = report_of(
        run_optimize(spec_of(termination=both[::-1]), by_rules, optimizer=ScriptedOptimizer(never_better))
    )
    assert h.termination_reason.cause is TerminationCause.NO_IMPROVEMENT


def test_optimizer_stop_decision_is_recorded(spec: OptimizeSpec) -> None:
    opt = ScriptedOptimizer([[cfg("rule_a rule_b")]] * 5, stop_after=1)
    h = report_of(run_optimize(spec, by_rules, optimizer=opt))
    assert h.termination_reason.cause is TerminationCause.OPTIMIZER
    assert h.termination_reason.message == "scripted stop"
    assert h.total_iterations == 2


def test_an_optimizer_exception_fails_the_job(spec: OptimizeSpec) -> None:
    class Broken(ScriptedOptimizer):
        def propose(self, *args: Any) -> list[CandidateProposal]:
            raise RuntimeError("boom")

    run = run_optimize(spec, by_rules, optimizer=Broken([]))
    assert isinstance(run.action, Fail) and run.action.error == "optimizer propose failed: boom"
    assert run.state.phase == "done"


def test_mann_whitney_acceptance_needs_a_significant_gain() -> None:
    spec = spec_of(acceptance={"test": "mann_whitney", "alpha": 0.05})
    small = [[cfg("rule_a rule_b")], [cfg("rule_a rule_b rule_c rule_d rule_e rule_f rule_g rule_h rule_i")]]
    h = report_of(run_optimize(spec, by_rules, optimizer=ScriptedOptimizer(small)))
    assert [t.accepted for t in h.trials] == [True, False, True]
    p1, p2 = h.trials[1].p_value, h.trials[2].p_value
    assert p1 is not None and p1 >= 0.05 and p2 is not None and p2 < 0.05
    assert h.best_candidate_id == "c2"


SPLIT_SAMPLES = tuple(
    Sample(id=f"{split}{i}", input={"question": "q", "company": "A"}, expected="x", split=split)  # type: ignore[arg-type]
    for split in ("train", "val", "test")
    for i in range(4)
)


def by_rules_split(bodies: Bodies, params: Params, sid: str, run: int) -> bool:
    """Train samples pass per ``rule_`` word; val samples only for ``rule_general`` words."""
    body = bodies[("rules",)]
    n = body.count("rule_general") if not sid.startswith("train") else rules_passing(body)
    return int(sid[-1]) < n


def test_splits_optimize_on_train_accept_on_validation_report_on_test() -> None:
    spec = spec_of(dataset=Dataset(name="split", samples=SPLIT_SAMPLES), splits=True)
    overfit = cfg("rule_a rule_b rule_c")  # train 3/4, val 0/4
    general = cfg("rule_general rule_general")  # train 2/4, val 2/4
    opt = ScriptedOptimizer([[overfit, general]])
    run = run_optimize(spec, by_rules_split, optimizer=opt)
    ids = tuple(f"train{i}" for i in range(4)) + tuple(f"val{i}" for i in range(4))
    selection = [s for s in run.steps if not s.name.startswith("test")]
    assert all(t.sample_ids == ids for s in selection for t in s.targets if t.first_run == 0)
    # acceptance auto: the baseline's second run, on the validation samples it decides on
    assert [(t.first_run, t.sample_ids) for t in run.steps[0].targets[1:]] == [(1, ids[4:])]
    # the held-out test is the paired test even under auto's deterministic rule: more rounds
    (test,) = [s for s in run.steps if s.name == "test"]
    assert run.steps[-1].name.startswith("test")
    assert [t.experiment.id for t in test.targets] == ["job1-test-c0", "job1-test-c2"]
    assert [t.experiment.overrides_tag for t in test.targets] == ["opt-job1-test-c0", "opt-job1-test-c2"]
    assert all(t.sample_ids == tuple(f"test{i}" for i in range(4)) for t in test.targets)
    h = report_of(run)
    c1, c2 = h.trials[1], h.trials[2]
    assert (c1.objective_score, c1.validation_score) == (0.75, 0.0)  # the optimizer saw 0.75
    assert (c2.objective_score, c2.validation_score) == (0.5, 0.5)
    assert h.best_candidate_id == "c2"  # accepted on validation, not on train
    assert set(c2.sample_values) == {f"val{i}" for i in range(4)}
    assert {f.sample_id for f in c2.failing} == {"train2", "train3"}  # failure analysis on train only
    assert h.test is not None
    assert (h.test.baseline.score, h.test.best.score) == (0.0, 0.5)
    assert h.test.confirmation is not None and h.test.confirmed is True


def test_splits_need_train_and_val() -> None:
    with pytest.raises(ValueError, match="val"):
        spec_of(splits=True)  # no sample has a split: all are train


def rewriting_spec(**changes: Any) -> OptimizeSpec:
    data = {
        "treatment": {"sections": ["rules"]},
        "optimizer": {"type": "llm_rewrite", "model": {"model": "optiflow/sim"}, "max_length": 60},
    }
    data.update(changes)
    return spec_of(**data)


def add_rule(request: RewriteRequest) -> str:
    return f"{request.current} rule_v{request.variant}g{len(request.iterations)}"


def test_model_assisted_optimizer_asks_in_a_propose_step_then_evaluates() -> None:
    spec = rewriting_spec(termination={"max_iterations": 3})
    run = run_optimize(spec, by_rules, rewrite=add_rule)
    names = ["baseline", "propose-1", "iteration-1", "iteration-1-reproduce", "propose-2", "iteration-2"]
    assert [s.name for s in run.steps][: len(names)] == names
    propose = run.steps[1]
    assert propose.targets == () and len(propose.rewrites) == 2 and propose.size == 2
    r0 = propose.rewrites[0]
    assert (r0.section, r0.current, r0.max_length, r0.prompt_id) == (("rules",), "rule_a", 60, "t/p")
    assert [f.sample_id for f in r0.failing] == [f"s{i}" for i in range(1, 9)]  # capped at 8 with inputs
    assert r0.failing[0].input == {"question": "q1", "company": "Acme"}
    h = report_of(run)
    assert h.best_score == 0.3  # two rewrites in a row, each adds a rule
    # the rewrite calls' tokens are part of their iteration's
    assert h.iterations[1].tokens == 2 * 1100 + 2 * 70
    assert h.stats.proposal_calls == 4


def test_rewrite_failures_end_the_run_with_a_mutation_failure() -> None:
    def failing(request: RewriteRequest) -> RewriteReply:
        return RewriteReply(id=request.id, error="429 rate limited")

    run = run_optimize(rewriting_spec(), by_rules, rewrite=failing)
    h = report_of(run)
    assert h.termination_reason.cause is TerminationCause.OPTIMIZER
    assert h.termination_reason.message == "mutation failed: 429 rate limited"
    assert h.proposal_errors == ("g0-v0: 429 rate limited", "g0-v1: 429 rate limited")
    too_long = run_optimize(rewriting_spec(), by_rules, rewrite=lambda r: "x" * 61)
    assert "exceeds max length 60" in report_of(too_long).termination_reason.message


def test_state_round_trips_and_a_fresh_workflow_resumes_identically(spec: OptimizeSpec) -> None:
    script = [[cfg("rule_a rule_b"), cfg("rule_a rule_c rule_d")], [cfg("rule_a rule_c rule_d rule_e")]]
    straight = report_of(run_optimize(spec, by_rules, optimizer=ScriptedOptimizer(script)))

    clock = FakeClock()
    wf = OptimizeWorkflow(spec, "job1", clock=clock, optimizer=ScriptedOptimizer(script))
    tr = wf.start()
    state, action = tr.state, tr.action
    while isinstance(action, Step):
        evals = tuple(r for t in action.targets for r in evaluate_target(spec.prompt, t, by_rules))
        saved = state.model_dump(mode="json")
        assert OptimizeState.model_validate(saved) == state
        fresh = OptimizeWorkflow(
            spec, "job1", clock=clock, optimizer=ScriptedOptimizer(script)
        )  # a new process
        tr = fresh.advance(OptimizeWorkflow.load_state(saved), StepResults(step=action, evals=evals))
        state, action = tr.state, tr.action
    assert isinstance(action, Finish)
    assert action.report == straight
    assert OptimizationHistory.model_validate(straight.model_dump(mode="json")) == straight


def test_advance_after_the_end_fails(spec: OptimizeSpec) -> None:
    run = run_optimize(spec, by_temperature)
    assert run.workflow is not None
    action = run.workflow.advance(run.state, StepResults(step=run.steps[-1])).action
    assert isinstance(action, Fail)


def test_spec_validation() -> None:
    with pytest.raises(ValueError, match="frozen"):
        spec_of(treatment={"sections": ["intro"]})
    with pytest.raises(ValueError, match="no section"):
        spec_of(treatment={"sections": ["nope"]})
    with pytest.raises(ValueError, match="space"):
        spec_of(treatment={"sections": ["rules"]})  # grid over temperature, not in the treatment
    derived = spec_of(treatment=None)
    assert derived.factor.model_params["temperature"].choices == (0.0, 0.2, 0.7, 1.0)
    dumped = spec_of().model_dump(mode="json")
    assert OptimizeSpec.model_validate(dumped) == spec_of()


def target_bodies(target: EvalTarget) -> dict[SectionPath, str]:
    return {o.path: o.body for o in target.overrides}


def test_candidates_build_on_the_baseline_snapshot() -> None:
    from optiflow.core.overrides import SectionOverride

    style = SectionOverride(
        path=("style",), expected_hash=PROMPT.section(("style",)).hash, body="Be very brief."
    )
    spec = spec_of(baseline_overrides=(style,), baseline_model_params={"top_p": 0.9})
    run = run_optimize(spec, by_rules, optimizer=ScriptedOptimizer([[cfg("rule_a rule_b", 0.2)]]))
    base, cand = run.steps[0].targets[0], run.steps[1].targets[0]
    assert target_bodies(base) == {("style",): "Be very brief."}
    assert base.model_params == {"top_p": 0.9}
    assert target_bodies(cand) == {("rules",): "rule_a rule_b", ("style",): "Be very brief."}
    assert cand.model_params == {"top_p": 0.9, "temperature": 0.2}
    h = report_of(run)
    assert [o.body for o in h.best_overrides] == ["rule_a rule_b"]
    assert h.best_configuration == cfg("rule_a rule_b", 0.2)
    assert h.trials[0].config_hash == config_hash(cfg("rule_a", 0.7))
