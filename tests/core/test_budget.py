"""The hard budget in each workflow: a step that ran out ends the job with what it had.

The workers' check is played here in one thread: a step's evaluations in order, each charged
``COST``; once the spend reaches the budget the rest are skipped with reason ``budget_exhausted``,
and the step's results carry the spend (what the driver reads from the job scratch)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from optiflow.core import kinds
from optiflow.core.actions import Action, Fail, Finish
from optiflow.core.budget import BUDGET_EXHAUSTED, JobBudget, Spend, budget_line, budget_report
from optiflow.core.compress.report import OptimizationReport
from optiflow.core.compress.workflow import CompressWorkflow
from optiflow.core.evaluation import EvalResult
from optiflow.core.measure.report import MeasureDocument
from optiflow.core.measure.workflow import MeasureWorkflow
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.core.optimize.termination import TerminationCause
from optiflow.core.optimize.workflow import OptimizeWorkflow
from optiflow.core.step import SectionEdit, Step, StepResults
from optiflow.core.workflow import Transition

from . import test_measure as measure
from .compress_harness import bodies_of, words
from .optimize.conftest import spec_of
from .optimize.harness import FakeClock, evaluate_target
from .test_compress_workflow import PROMPT, answer, keep, make_spec

COST = 0.001


def run_budgeted(
    wf: Any, tr: Transition[Any], evaluate: Callable[[Step], Sequence[EvalResult]], budget: JobBudget
) -> tuple[Action, list[Step], list[Transition[Any]]]:
    """Run ``wf`` to its end; each evaluation costs ``COST`` and is made only while the job's
    spend is under ``budget``."""
    spend = Spend()
    steps, transitions = [], [tr]
    while isinstance(tr.action, Step):
        step = tr.action
        steps.append(step)
        evals = []
        for r in evaluate(step):
            if budget.exhausted_by(spend.cost_usd, spend.tokens):
                evals.append(
                    EvalResult(
                        experiment_id=r.experiment_id,
                        sample_id=r.sample_id,
                        run=r.run,
                        skipped=True,
                        reason=BUDGET_EXHAUSTED,
                    )
                )
                spend = spend.model_copy(update={"skipped": spend.skipped + 1})
                continue
            evals.append(r.model_copy(update={"cost": COST}))
            cost = spend.cost_usd + COST
            over = spend.over_calls + budget.exhausted_by(cost, spend.tokens)
            spend = spend.model_copy(update={"cost_usd": cost, "over_calls": over})
        edits = tuple(
            SectionEdit(
                path=p,
                original_hash=wf.spec.prompt.section(p).hash,
                proposed_body=EDITS[p],
                original_tokens=words(wf.spec.effective_body(p)),
                proposed_tokens=words(EDITS[p]),
            )
            for p in step.propose
        )
        results = StepResults(
            step=step, evals=tuple(evals), edits=edits, budget=budget_report(budget, spend, step=step.name)
        )
        state = wf.load_state(tr.state.model_dump(mode="json"))  # the checkpoint round trip
        tr = wf.advance(state, results)
        transitions.append(tr)
    return tr.action, steps, transitions


def event_types(transitions: list[Transition[Any]]) -> list[str]:
    return [e.type for tr in transitions for e in tr.events]


def test_budget_fields_are_shared_by_every_spec_and_strict() -> None:
    from optiflow.core.compress.spec import CompressSpec
    from optiflow.core.measure.spec import MeasureSpec
    from optiflow.core.optimize.spec import OptimizeSpec

    for spec_type in (CompressSpec, MeasureSpec, OptimizeSpec):
        assert issubclass(spec_type, JobBudget)
    s = measure.spec(max_cost_usd=2, max_tokens=5000)
    assert s.budget == JobBudget(max_cost_usd=2.0, max_tokens=5000)
    assert measure.spec().budget is None
    for bad in ({"max_cost_usd": "1"}, {"max_cost_usd": 0}, {"max_tokens": 1.5}, {"max_tokens": True}):
        with pytest.raises(ValueError):
            measure.spec(**bad)


# -- measure ---------------------------------------------------------------------------------------
def test_measure_cut_by_the_budget_documents_what_was_evaluated() -> None:
    wf = MeasureWorkflow(measure.spec(max_cost_usd=0.02), "job7", clock=lambda: measure.AT)
    action, _, transitions = run_budgeted(wf, wf.start(), measure.results, JobBudget(max_cost_usd=0.02))
    assert isinstance(action, Finish) and isinstance(action.report, MeasureDocument)
    doc = action.report
    assert (doc.planned, doc.evaluations, doc.stats.budget_skipped, doc.stats.fail_fast_skipped) == (
        30,
        20,
        10,
        0,
    )
    assert doc.budget is not None and doc.budget_exhausted
    assert (doc.budget.spent_usd, doc.budget.skipped_calls, doc.budget.step) == (
        pytest.approx(0.02),
        10,
        "measure",
    )
    # runs 0 and 1 were made (s0 fails run 1); run 2 was skipped: nothing is counted for it
    assert doc.run_pass_rates == (1.0, 0.9) and doc.pass_rate == pytest.approx(19 / 20)
    assert doc.consistently_passed == 9 and doc.failing_samples == ("s0",)
    text = kinds.render(doc)
    assert "the budget ran out: 20 of 30 evaluations made" in text
    assert "budget exhausted at step measure: spent $0.02 of $0.02" in text
    assert event_types(transitions).count(BUDGET_EXHAUSTED) == 1
    (event,) = [e for tr in transitions for e in tr.events if e.type == BUDGET_EXHAUSTED]
    line = kinds.event_line("measure", "nightly", event)
    assert line == f"MEASURE [nightly] {budget_line(doc.budget)}"
    assert event.payload["skipped_calls"] == 10 and event.payload["exhausted"] is True


def test_measure_within_its_budget_says_what_it_spent() -> None:
    wf = MeasureWorkflow(measure.spec(max_cost_usd=1.0), "job7", clock=lambda: measure.AT)
    action, _, transitions = run_budgeted(wf, wf.start(), measure.results, JobBudget(max_cost_usd=1.0))
    assert isinstance(action, Finish) and isinstance(action.report, MeasureDocument)
    assert action.report.evaluations == 30 and not action.report.budget_exhausted
    assert "budget: spent $0.03 of $1" in kinds.render(action.report)
    assert BUDGET_EXHAUSTED not in event_types(transitions)


def test_measure_with_nothing_evaluated_fails() -> None:
    wf = MeasureWorkflow(measure.spec(max_tokens=10), "job7", clock=lambda: measure.AT)
    tr = wf.start()
    assert isinstance(tr.action, Step)
    (target,) = tr.action.targets
    skipped = tuple(
        EvalResult(
            experiment_id=target.experiment.id, sample_id=s, run=0, skipped=True, reason=BUDGET_EXHAUSTED
        )
        for s in target.sample_ids
    )
    report = budget_report(JobBudget(max_tokens=10), Spend(tokens=12, skipped=10), step="measure")
    action = wf.advance(tr.state, StepResults(step=tr.action, evals=skipped, budget=report)).action
    assert isinstance(action, Fail) and action.error.startswith(
        "measure: nothing evaluated: budget exhausted"
    )


# -- optimize --------------------------------------------------------------------------------------
def optimize_run(
    max_cost_usd: float, test: str = "none"
) -> tuple[OptimizationHistory, list[str], list[Transition[Any]]]:
    # today's rule: the budgets below count its calls (auto adds a second baseline run)
    spec = spec_of(max_cost_usd=max_cost_usd, acceptance={"test": test})
    wf = OptimizeWorkflow(spec, "job1", clock=FakeClock())

    def evaluate(step: Step) -> list[EvalResult]:  # c1 (temperature 0) passes 7, c2 (0.2) 9
        good = {0.0: 7, 0.2: 9, 0.7: 5, 1.0: 3}
        return [
            r
            for t in step.targets
            for r in evaluate_target(
                spec.prompt, t, lambda b, p, sid, run: int(sid[1:]) < good[float(p.get("temperature", 0.7))]
            )
        ]

    action, steps, transitions = run_budgeted(wf, wf.start(), evaluate, JobBudget(max_cost_usd=max_cost_usd))
    assert isinstance(action, Finish) and isinstance(action.report, OptimizationHistory), action
    return action.report, [s.name for s in steps], transitions


def test_optimize_cut_in_an_iteration_decides_the_full_trials_only() -> None:
    # the baseline (10 evaluations), then c1 in full and 5 of c2's 10
    h, steps, transitions = optimize_run(25 * COST)
    assert steps == ["baseline", "iteration-1"]
    assert h.termination_reason.cause is TerminationCause.BUDGET_EXHAUSTED
    assert h.termination_reason.message.startswith("Budget exhausted at step iteration-1: spent $0.025")
    c1, c2 = h.trial("c1"), h.trial("c2")
    assert c1 is not None and c1.completed and c1.accepted and c1.objective_score == 0.7
    assert c2 is not None and c2.status == "cancelled" and not c2.accepted
    assert c2.error == "budget exhausted: 5 of 10 evaluations made"
    assert h.best_candidate_id == "c1"  # c2 would have won in full: it is never accepted cut short
    assert [it.status for it in h.iterations] == ["success", "success"]
    assert h.budget is not None and h.budget.exhausted and h.budget.skipped_calls == 5
    assert h.stats.budget_skipped == 5
    assert BUDGET_EXHAUSTED in event_types(transitions)
    assert "Terminated: Budget exhausted at step iteration-1" in kinds.closing_line(h, "uc")  # type: ignore[operator]


def test_optimize_cut_in_a_reproduction_crowns_nothing() -> None:
    # auto: the baseline and its second run (20), c1 and c2 in full (20), then the reproduction
    # of c2's crowning (c2 and the baseline once more, 20) gets 5 evaluations
    h, steps, _ = optimize_run(45 * COST, test="auto")
    assert steps == ["baseline", "iteration-1", "iteration-1-reproduce"]
    assert h.acceptance_rule == "none" and h.termination_reason.cause is TerminationCause.BUDGET_EXHAUSTED
    c2 = h.trial("c2")
    assert c2 is not None and c2.completed and not c2.accepted  # not crowned on one run
    assert h.best_candidate_id == "c0"
    from optiflow.core.optimize.document import history_document
    from optiflow.core.optimize.replay import replay

    assert replay(history_document(h)).ok
    # cut in the iteration step itself: the full trials are not crowned unreproduced either
    h, steps, _ = optimize_run(35 * COST, test="auto")
    assert steps == ["baseline", "iteration-1"] and h.best_candidate_id == "c0"
    assert replay(history_document(h)).ok


def test_optimize_with_every_trial_cut_records_an_iteration_without_a_decision() -> None:
    h, steps, _ = optimize_run(12 * COST)
    assert steps == ["baseline", "iteration-1"]
    assert [t.status for t in h.trials] == ["completed", "cancelled", "cancelled"]
    assert h.iterations[-1].status == "budget_exhausted" and h.best_candidate_id == "c0"
    from optiflow.core.optimize.output import progress_lines

    assert "the budget ran out before a trial was evaluated in full" in progress_lines(h)[2]


def test_optimize_cut_in_the_baseline_ends_with_the_baseline() -> None:
    h, steps, _ = optimize_run(4 * COST)
    assert steps == ["baseline"]
    assert h.termination_reason.cause is TerminationCause.BUDGET_EXHAUSTED
    assert len(h.iterations) == 1 and h.best_candidate_id == "c0"
    assert h.budget is not None and h.budget.step == "baseline" and h.budget.skipped_calls == 6
    assert h.baseline_score == 1.0  # over the 4 samples evaluated (s0..s3 all pass at 0.7)


# -- compress --------------------------------------------------------------------------------------
EDITS = {
    ("a",): keep("", "rule_a", "rule_shared"),
    ("b",): keep("", "rule_b", "rule_shared"),
    ("c",): "rule_c",
}


def compress_run(max_cost_usd: float) -> tuple[OptimizationReport, list[str]]:
    spec = make_spec(max_cost_usd=max_cost_usd)
    wf = CompressWorkflow(spec, "job1")

    def evaluate(step: Step) -> list[EvalResult]:
        out = []
        for t in step.targets:
            bodies = bodies_of(spec, t)
            for run in range(t.runs):
                for sid in t.sample_ids:
                    ok = answer(bodies, sid, run)
                    out.append(EvalResult(experiment_id=t.experiment.id, sample_id=sid, run=run, passed=ok))
        return out

    action, steps, _ = run_budgeted(wf, wf.start(words), evaluate, JobBudget(max_cost_usd=max_cost_usd))
    assert isinstance(action, Finish) and isinstance(action.report, OptimizationReport), action
    return action.report, [s.name for s in steps]


def undecided(report: OptimizationReport) -> list[tuple[tuple[str, ...], str]]:
    return [(r.section_path, r.stage) for r in report.rejected if r.reason.startswith("undecided: budget")]


def test_compress_cut_in_the_candidates_accepts_only_what_was_decided() -> None:
    # baseline 12 evaluations, then a's 12 in full, 6 of b's, none of c's
    report, steps = compress_run(30 * COST)
    assert steps == ["baseline", "candidates"]
    assert [m.section_path for m in report.modifications] == [("a",)]
    assert undecided(report) == [(("b",), "candidate"), (("c",), "candidate")]
    assert (
        report.budget is not None and report.budget.step == "candidates" and report.budget.skipped_calls == 18
    )
    text = kinds.render(report)
    assert "not accepted at candidate: undecided, the budget ran out" in text
    assert "budget exhausted at step candidates" in text
    assert kinds.render(report, "minimal").endswith("; budget exhausted")


def test_compress_out_of_budget_after_the_candidates_keeps_the_largest_alone() -> None:
    # every candidate in full, and nothing left for their combination
    report, steps = compress_run(48 * COST)
    assert steps == ["baseline", "candidates"]
    assert [m.section_path for m in report.modifications] == [("a",)]
    assert undecided(report) == [(("b",), "greedy"), (("c",), "greedy")]
    assert report.budget is not None and report.budget.skipped_calls == 0


def test_compress_cut_in_the_combination_goes_on_from_memory_only() -> None:
    report, steps = compress_run(52 * COST)  # 4 of the combination's 10 guarded evaluations
    assert steps == ["baseline", "candidates", "combined"]
    assert [m.section_path for m in report.modifications] == [("a",)]
    assert undecided(report) == [(("b",), "greedy"), (("c",), "greedy")]


def test_compress_cut_in_the_baseline_accepts_nothing() -> None:
    report, steps = compress_run(5 * COST)
    assert steps == ["baseline"]
    assert report.modifications == ()
    assert undecided(report) == [(("a",), "candidate"), (("b",), "candidate"), (("c",), "candidate")]
    assert report.baseline_pass_rate == 1.0  # over the 5 evaluations made (not "never", the 6th)


def test_compress_within_its_budget_decides_as_without_one() -> None:
    report, steps = compress_run(1.0)
    plain, plain_steps = compress_run(10_000.0)
    assert steps == plain_steps == ["baseline", "candidates", "combined"]
    assert report.modifications == plain.modifications and not undecided(report)
    assert report.budget is not None and not report.budget.exhausted
    assert PROMPT.section(("a",)).body != report.modifications[0].proposed_body
