"""Gates: strict equals seed 000, auto's choice, evidence failures, protected samples, plans."""

from __future__ import annotations

import pytest

from optiflow.core.dataset import Sample
from optiflow.core.evaluation import EvalResult, regressions, summarize
from optiflow.core.gate import (
    GateDecision,
    GateSpec,
    NoEvidenceError,
    Outcomes,
    RunPlan,
    RunRange,
    assess,
    decide,
    first_round,
)

STRICT = GateSpec(mode="strict", first_runs=3, max_error_rate=1.0)


def results(exp: str, runs: dict[str, str]) -> list[EvalResult]:
    """EvalResults from outcome strings ('1' pass, '0' fail, 'e' error, '.' skipped)."""
    out = []
    for sid, seq in runs.items():
        for run, c in enumerate(seq):
            out.append(
                EvalResult(
                    experiment_id=exp,
                    sample_id=sid,
                    run=run,
                    passed=c == "1",
                    error="boom" if c == "e" else None,
                    skipped=c == ".",
                )
            )
    return out


def drive_strict(spec: GateSpec, base: dict[str, str], cand: dict[str, str]) -> GateDecision:
    """Give the gate the candidate's runs only as its plans ask for them."""
    ids = tuple(base)
    baseline = Outcomes.from_results(results("b", base), ids)
    a = assess(spec, baseline, ids).require()
    full = Outcomes.from_results(results("c", cand), ids)
    candidate = Outcomes()
    for _ in range(5):
        d = decide(spec, a, baseline, candidate)
        if d.decided:
            return d
        asked = {sid: r for r in d.plan.candidate for sid in r.sample_ids}
        assert all(r.start == candidate.next_run(s) for s, r in asked.items())
        candidate = candidate.extend(Outcomes(runs={s: full.seq(s)[: r.stop] for s, r in asked.items()}))
    raise AssertionError("strict did not decide")


CASES = {
    "no regression": ({"a": "111", "b": "111", "c": "010"}, {"a": "111", "b": "111", "c": "000"}),
    "one regression in the last run": ({"a": "111", "b": "111"}, {"a": "110", "b": "111"}),
    "flaky baseline sample cannot regress": ({"a": "101", "b": "111"}, {"a": "000", "b": "111"}),
    "candidate error is a regression": ({"a": "111", "b": "111"}, {"a": "1e1", "b": "111"}),
    "baseline error: the sample cannot regress": ({"a": "1e1", "b": "111"}, {"a": "000", "b": "111"}),
    "two regressions": ({"a": "111", "b": "111", "c": "111"}, {"a": "011", "b": "111", "c": "100"}),
    "fixed samples do not help": ({"a": "111", "b": "000"}, {"a": "101", "b": "111"}),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_strict_decides_as_seed_000(case: str) -> None:
    base, cand = CASES[case]
    ids = tuple(base)
    seed_regressed = regressions(
        summarize(results("b", base), ids).consistently_passed, summarize(results("c", cand), ids)
    )
    d = drive_strict(STRICT, base, cand)
    assert d.accepted == (not seed_regressed)
    assert set(d.stats.regressed) == set(seed_regressed)
    assert d.stats.gate == "strict"


def test_strict_asks_only_for_samples_that_can_regress() -> None:
    baseline = Outcomes.of({"a": "111", "b": "101", "c": "000", "d": "111"})
    a = assess(STRICT, baseline, "abcd")
    d = decide(STRICT, a, baseline, Outcomes())
    assert d.verdict == "continue"
    assert d.plan.candidate == (RunRange(start=0, stop=3, sample_ids=("a", "d")),)
    assert d.plan.baseline == ()


def test_strict_rejects_at_the_first_regression_with_a_lower_bound() -> None:
    baseline = Outcomes.of({"a": "111", "b": "111"})
    a = assess(STRICT, baseline, "ab")
    d = decide(STRICT, a, baseline, Outcomes.of({"a": "0", "b": ""}))
    assert d.verdict == "reject"
    assert d.reason.startswith("at least 1 regression")
    assert d.stats.regressed == ("a",)
    # issue 29: the report's line says what it is, not "pass rate 100% -> 0% on 1 of 2 samples"
    assert d.stats.stopped_early
    assert (
        d.stats.strict_text() == "stopped early by fail-fast after 1 of 2 samples: at least 1 regression(s)"
    )
    done = decide(STRICT, a, baseline, Outcomes.of({"a": "110", "b": "111"}))
    assert not done.stats.stopped_early
    assert done.stats.strict_text() == "1 regression(s) on 2 samples"


def test_first_round_is_first_runs_of_every_sample() -> None:
    plan = first_round(GateSpec(first_runs=2), ("x", "y"))
    assert plan.baseline == (RunRange(start=0, stop=2, sample_ids=("x", "y")),)
    assert plan.calls == 4


# -- auto ---------------------------------------------------------------------------------------
def test_auto_picks_strict_for_a_deterministic_model() -> None:
    a = assess(GateSpec(), Outcomes.of({"a": "111", "b": "000", "c": "111"}), "abc")
    assert a.gate == "strict"
    assert "deterministic" in a.reason


def test_auto_picks_paired_when_runs_disagree_and_says_how_many() -> None:
    a = assess(GateSpec(), Outcomes.of({"a": "110", "b": "000", "c": "011"}), "abc", power=False)
    assert a.gate == "paired"
    assert "2 of 3 samples" in a.reason


def test_auto_with_one_run_is_paired_and_says_why() -> None:
    a = assess(GateSpec(first_runs=1), Outcomes.of({"a": "1", "b": "0"}), "ab", power=False)
    assert a.gate == "paired"
    assert "1 answered baseline run" in a.reason
    assert "first_runs >= 2" in a.reason


def test_explicit_mode_is_used_and_named() -> None:
    a = assess(GateSpec(mode="paired"), Outcomes.of({"a": "111", "b": "000"}), "ab", power=False)
    assert a.gate == "paired"
    assert a.reason == "mode paired (set in the job)"


# -- evidence first -----------------------------------------------------------------------------
def test_baseline_passing_nothing_fails_with_the_cause() -> None:
    a = assess(GateSpec(), Outcomes.of({"a": "000", "b": "000"}), "ab")
    assert a.failure is not None
    assert a.failure.startswith("baseline pass rate 0.0% is under min_baseline_pass_rate 5.0%")
    with pytest.raises(NoEvidenceError) as exc:
        a.require()
    assert exc.value.code == "gate_no_evidence"
    assert exc.value.field == "gate"


def test_baseline_errors_over_the_limit_fail_and_are_counted() -> None:
    a = assess(GateSpec(), Outcomes.of({"a": "1e1", "b": "111", "c": "e11"}), "abc")
    assert a.errors == 2
    assert (
        a.failure
        == "baseline error rate 22.2% is over max_error_rate 5.0% (2 of 9 evaluations errored after retries)"
    )


def test_errors_are_counted_not_dropped_from_the_pass_rate() -> None:
    a = assess(GateSpec(max_error_rate=0.5), Outcomes.of({"a": "1e1", "b": "101"}), "ab", power=False)
    assert (a.runs, a.errors) == (6, 1)
    assert a.pass_rate == pytest.approx(4 / 5)
    assert a.error_rate == pytest.approx(1 / 6)


def test_strict_with_no_consistently_passing_sample_fails() -> None:
    a = assess(STRICT, Outcomes.of({"a": "101", "b": "011"}), "ab")
    assert a.failure is not None
    assert a.failure.startswith("no sample passed every baseline run")


def test_decide_refuses_a_failed_assessment() -> None:
    baseline = Outcomes.of({"a": "000"})
    with pytest.raises(NoEvidenceError):
        decide(GateSpec(), assess(GateSpec(), baseline, "a"), baseline, Outcomes())


# -- protected samples ---------------------------------------------------------------------------
def test_protected_sample_by_tag_keeps_the_strict_rule_under_paired() -> None:
    spec = GateSpec(mode="paired", protect=("safety",))
    samples = [
        Sample(id="a", input="x", tags=("safety",)),
        Sample(id="b", input="y"),
        Sample(id="c", input="z"),
    ]
    protected = spec.protected_ids(samples)
    assert protected == {"a"}
    baseline = Outcomes.of({"a": "111", "b": "101", "c": "010"})
    a = assess(spec, baseline, "abc", protected, power=False)
    d = decide(spec, a, baseline, Outcomes.of({"a": "101", "b": "101", "c": "010"}))
    assert d.verdict == "reject"
    assert d.reason == "protected sample(s) regressed: a"
    assert d.stats.protected_regressed == ("a",)


def test_protected_by_id_and_flaky_protected_sample_cannot_regress() -> None:
    spec = GateSpec(mode="strict", protect=("b",))
    assert spec.protected_ids([Sample(id="b", input="")]) == {"b"}
    baseline = Outcomes.of({"a": "111", "b": "101"})
    a = assess(spec, baseline, "ab", {"b"})
    d = decide(spec, a, baseline, Outcomes.of({"a": "111", "b": "000"}))
    assert d.accepted


# -- outcomes and plans ---------------------------------------------------------------------------
def test_outcomes_from_results_keep_run_order_errors_and_gaps() -> None:
    rs = [*results("x", {"a": "1e0"}), EvalResult(experiment_id="x", sample_id="b", run=1, passed=True)]
    o = Outcomes.from_results(reversed(rs), ("a", "b", "c"))
    assert o.runs == {"a": "1e0", "b": ".1", "c": ""}
    assert o.answered("a") == [True, False]
    assert o.scored("a") == [True, False, False]
    assert o.extend(Outcomes.of({"b": "0.1"})).runs["b"] == "011"


def test_outcomes_reject_unknown_marks() -> None:
    with pytest.raises(ValueError, match=r"only '1', '0', 'e' and '\.'"):
        Outcomes.of({"a": "1x"})


def test_baseline_plans_of_candidates_merge_to_the_furthest_run() -> None:
    p1 = RunPlan(baseline=(RunRange(start=3, stop=4, sample_ids=("a", "b")),))
    p2 = RunPlan(baseline=(RunRange(start=3, stop=6, sample_ids=("b",)),))
    assert RunPlan.merge_baseline([p1, p2, RunPlan()]) == (
        RunRange(start=3, stop=4, sample_ids=("a",)),
        RunRange(start=3, stop=6, sample_ids=("b",)),
    )


def test_spec_rejects_a_cap_below_the_first_round() -> None:
    with pytest.raises(ValueError, match="max_runs"):
        GateSpec(first_runs=5, max_runs=3)
