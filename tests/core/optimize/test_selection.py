"""Paired, sequential selection on a sampled model (DESIGN §2a): auto's choice, racing, the
job-wide alpha, recorded figures and an exact replay."""

from __future__ import annotations

import math
from typing import Any

from optiflow.core.actions import Finish
from optiflow.core.dataset import Dataset, Sample
from optiflow.core.gate.outcomes import Outcomes
from optiflow.core.optimize.configuration import make_config
from optiflow.core.optimize.document import history_document
from optiflow.core.optimize.replay import replay
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.core.optimize.selection import alpha_at, judge
from optiflow.llm.noise import SMOLLM2_LIKE, pass_probability, passes

from .conftest import spec_of
from .harness import Bodies, Params, ScriptedOptimizer, run_optimize

N = 40
SAMPLES = tuple(
    Sample(id=f"s{i}", input={"question": f"q{i}", "company": "A"}, expected="x") for i in range(N)
)
BASE_P = {s.id: pass_probability(SMOLLM2_LIKE, 0, s.id) for s in SAMPLES}


def noisy(gain_at: dict[float, float]) -> Any:
    """Pass probability ``p_s + gain`` (clipped) at temperature t, drawn independently per (t, run)."""

    def answer(bodies: Bodies, params: Params, sid: str, run: int) -> bool:
        t = float(params.get("temperature", 0.7))  # type: ignore[arg-type]
        p = min(1.0, max(0.0, BASE_P[sid] + gain_at.get(t, 0.0)))
        return passes(p, 0, f"t={t}", sid, run)

    return answer


def cfg(temperature: float) -> Any:
    return make_config({("rules",): "rule_a"}, {"temperature": temperature})


def spec(**changes: Any) -> Any:
    return spec_of(dataset=Dataset(name="noisy", samples=SAMPLES), **changes)


def report(run: Any) -> OptimizationHistory:
    assert isinstance(run.action, Finish), run.action
    assert isinstance(run.action.report, OptimizationHistory)
    return run.action.report


def test_alpha_spending_sums_to_alpha() -> None:
    assert sum(alpha_at(0.05, k) for k in range(1, 100_000)) < 0.05
    assert math.isclose(alpha_at(0.05, 1), 0.05 * 6 / math.pi**2)


def test_auto_picks_paired_on_a_sampled_model_and_crowns_a_real_gain() -> None:
    opt = ScriptedOptimizer([[cfg(0.0), cfg(0.2)]], stop_after=1)
    run = run_optimize(spec(), noisy({0.2: 0.30}), optimizer=opt)
    h = report(run)
    assert h.acceptance_rule == "paired" and "sampled model" in h.acceptance_rule_reason
    assert h.best_candidate_id == "c2"
    c1, c2 = h.trial("c1"), h.trial("c2")
    assert c1 is not None and c2 is not None and c1.selection and c2.selection
    assert c2.selection.verdict == "accept" and c2.selection.gain_low > 0
    assert c2.selection.evidence_better >= 1 / c2.selection.alpha
    assert c2.selection.comparison == 2 and c2.selection.alpha == alpha_at(0.05, 2)
    # racing: later rounds hold only undecided contenders and the best (c0), from run 2 on
    rounds = [s for s in run.steps if "round" in s.name]
    for s in rounds:
        names = {t.experiment.name for t in s.targets}
        assert names <= {"c0", "c1", "c2"} and all(t.first_run >= 2 for t in s.targets)
    doc = history_document(h)
    assert doc["acceptanceRule"] == "paired"
    assert replay(doc).ok


def test_no_op_candidates_are_not_crowned_and_replay_is_exact() -> None:
    same = [cfg(t) for t in (0.0, 0.2, 1.0)]
    opt = ScriptedOptimizer([same[:2], same[2:]])
    h = report(run_optimize(spec(), noisy({}), optimizer=opt))
    assert h.acceptance_rule == "paired"
    assert h.best_candidate_id == "c0"
    trials = [t for t in h.trials if t.candidate_id != "c0"]
    assert all(t.selection is not None and t.selection.verdict != "accept" for t in trials)
    assert all(t.selection is not None and t.selection.pairs <= 32 for t in trials)
    result = replay(history_document(h))
    assert result.ok and any(d.kind == "selection" for d in result.decisions)


def test_judge_accept_reject_and_interval() -> None:
    ids = [f"s{i}" for i in range(40)]
    best = Outcomes.of({s: ("01" if i % 2 else "10") * 6 for i, s in enumerate(ids)})
    better = Outcomes.of(dict.fromkeys(ids, "11" * 6))
    f = judge(
        comparison=1,
        alpha=0.05,
        beta=0.05,
        min_gain=0.0,
        effect=0.1,
        margin=0.1,
        max_runs=24,
        against="c0",
        best=best,
        contender=better,
        ids=ids,
    )
    assert f.verdict == "accept" and f.gain == 0.5 and 0 < f.gain_low <= 0.5 <= f.gain_high
    same = judge(
        comparison=1,
        alpha=0.05,
        beta=0.05,
        min_gain=0.0,
        effect=0.1,
        margin=0.1,
        max_runs=24,
        against="c0",
        best=best,
        contender=best,
        ids=ids,
    )
    assert same.verdict == "reject"


def test_explicit_none_keeps_todays_rule_without_extra_runs() -> None:
    h = report(
        run_optimize(
            spec(acceptance={"test": "none"}),
            noisy({}),
            optimizer=ScriptedOptimizer([[cfg(0.2)]]),
        )
    )
    assert h.acceptance_rule == "none" and all(t.selection is None for t in h.trials)


SPLIT = tuple(
    Sample(id=f"{split}{i}", input={"question": f"q{i}", "company": "A"}, expected="x", split=split)  # type: ignore[arg-type]
    for split, n in (("train", 10), ("val", 40), ("test", 40))
    for i in range(n)
)
SPLIT_P = {s.id: pass_probability(SMOLLM2_LIKE, 0, s.id) for s in SPLIT}


def split_answer(test_gain: float) -> Any:
    """temperature 0.2 gains 30 points on train/val, ``test_gain`` on test."""

    def answer(bodies: Bodies, params: Params, sid: str, run: int) -> bool:
        t = float(params.get("temperature", 0.7))  # type: ignore[arg-type]
        gain = (test_gain if sid.startswith("test") else 0.30) if t == 0.2 else 0.0
        return passes(min(1.0, SPLIT_P[sid] + gain), 0, f"t={t}", sid, run)

    return answer


def test_held_out_confirmation_and_apply() -> None:
    from optiflow.core import kinds

    s = spec_of(dataset=Dataset(name="split", samples=SPLIT), splits=True)
    opt = [[cfg(0.2)]]
    good = report(run_optimize(s, split_answer(0.30), optimizer=ScriptedOptimizer(opt)))
    assert good.best_candidate_id == "c1" and good.test is not None
    f = good.test.confirmation
    assert f is not None and f.gain_low > 0 and good.test.confirmed and good.improved
    assert good.gain_line().startswith("improved: held-out pass-rate gain")
    assert not kinds.changes(good).empty
    doc = history_document(good)
    assert doc["improved"] is True and doc["test"]["confirmed"] is True  # type: ignore[index]
    assert replay(doc).ok and any(d.kind == "confirmation" for d in replay(doc).decisions)

    lucky = report(run_optimize(s, split_answer(0.0), optimizer=ScriptedOptimizer(opt)))
    assert lucky.best_candidate_id == "c1" and lucky.test is not None
    assert lucky.test.confirmed is False and not lucky.improved
    assert lucky.gain_line().startswith("not confirmed on held-out data")
    assert kinds.changes(lucky).empty and not kinds.changes(lucky, force=True).empty
    assert kinds.unconfirmed(lucky) is not None


def test_without_splits_the_gain_is_in_sample() -> None:
    opt = ScriptedOptimizer([[cfg(0.2)]], stop_after=1)
    h = report(run_optimize(spec(), noisy({0.2: 0.30}), optimizer=opt))
    assert h.best_candidate_id == "c1" and h.gain_line().startswith("in-sample gain")


def test_budget_running_out_mid_race_ends_the_job_with_nothing_crowned_unshown() -> None:
    from optiflow.core.budget import BudgetReport
    from optiflow.core.optimize.termination import TerminationCause
    from optiflow.core.optimize.workflow import OptimizeWorkflow
    from optiflow.core.step import Step, StepResults

    from .harness import FakeClock, evaluate_target

    s = spec(max_cost_usd=10.0)
    wf = OptimizeWorkflow(s, "j", clock=FakeClock(), optimizer=ScriptedOptimizer([[cfg(0.0), cfg(0.2)]]))
    tr = wf.start()
    state, action = tr.state, tr.action
    answer = noisy({0.2: 0.05})
    rounds = 0
    while isinstance(action, Step):
        evals = [r for t in action.targets for r in evaluate_target(s.prompt, t, answer)]
        out = "round-" in action.name and (rounds := rounds + 1) == 2
        budget = BudgetReport(max_cost_usd=10.0, exhausted=True) if out else None
        tr = wf.advance(state, StepResults(step=action, evals=tuple(evals), budget=budget))
        state, action = tr.state, tr.action
    assert rounds == 2  # the budget ran out in the second racing round
    h = report(type("R", (), {"action": action})())
    assert h.termination_reason.cause is TerminationCause.BUDGET_EXHAUSTED
    racing = [t for t in h.trials if t.candidate_id != "c0"]
    assert racing and all(t.selection is not None for t in racing)
    assert h.best_candidate_id == "c0" or next(t for t in racing if t.accepted).selection.accepted  # type: ignore[union-attr]


def test_grid_search_composes_with_paired_selection() -> None:
    # the conftest's grid over temperature [0.0, 0.2, 0.7, 1.0]; 0.2 gains 30 points, 0.7 is the baseline
    h = report(run_optimize(spec(), noisy({0.2: 0.30})))
    assert h.acceptance_rule == "paired" and h.best_model_params == {"temperature": 0.2}
    assert replay(history_document(h)).ok


def test_race_rounds_keep_the_trial_rows_whole() -> None:
    """Trial rows are keyed by experiment: after a multi-round race the baseline's row (folded as
    the driver upserts them) is still its own evaluation, not the last round's extension runs, and
    a contender's covers every round it was evaluated in."""
    from optiflow.core.optimize.workflow import OptimizeWorkflow
    from optiflow.core.records import Trial
    from optiflow.core.step import Step, StepResults

    from .harness import FakeClock, evaluate_target

    s = spec(acceptance={"test": "paired"})
    wf = OptimizeWorkflow(s, "j", clock=FakeClock(), optimizer=ScriptedOptimizer([[cfg(0.0), cfg(0.2)]]))
    tr = wf.start()
    state, action = tr.state, tr.action
    answer = noisy({0.2: 0.05})
    rows: dict[str, Trial] = {}
    made: dict[str, int] = {}
    baseline_made = 0
    names = []
    while isinstance(action, Step):
        names.append(action.name)
        evals = [r for t in action.targets for r in evaluate_target(s.prompt, t, answer)]
        for r in evals:
            made[r.experiment_id] = made.get(r.experiment_id, 0) + 1
        if action.index == 0:
            baseline_made = len(evals)
        tr = wf.advance(state, StepResults(step=action, evals=tuple(evals)))
        rows.update({t.candidate_id: t for t in tr.trials})
        if "-round-" in action.name:
            assert "j-c0" not in {t.candidate_id for t in tr.trials}  # the best's extension runs
        state, action = tr.state, tr.action
    assert sum("iteration-1-round-" in n for n in names) >= 2, names
    h = report(type("R", (), {"action": action})())
    base = rows["j-c0"]
    assert made["j-c0"] > baseline_made  # the race extended the baseline's runs
    assert base.summary is not None and base.summary.total == baseline_made
    base_trial = h.trial("c0")
    assert base_trial is not None and base.objective_score == base.summary.pass_rate
    for cid in ("c1", "c2"):
        row, trial = rows[f"j-{cid}"], h.trial(cid)
        assert row.summary is not None and trial is not None
        assert row.summary.total == made[f"j-{cid}"]  # every round's runs, not the last round's
        assert row.objective_score == row.summary.pass_rate
        assert trial.summary is not None and row.summary.total == trial.summary.total
