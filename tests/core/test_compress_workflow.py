"""Every branch of the compress workflow, with hand-made model answers (no Celery, no I/O)."""

from __future__ import annotations

import pytest

from optiflow.core.compress.report import Modification, OptimizationReport, RejectedModification
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.compress.workflow import CompressWorkflow
from optiflow.core.dataset import Dataset, Sample
from optiflow.core.prompt import Prompt, Section

from .compress_harness import Bodies, run_workflow, seed_reference, words

FILLER = " ".join(["filler"] * 30)
# rule_x: samples about x pass only when "rule_x" is in some section
PROMPT = Prompt(
    ns="t",
    key="p",
    sections=(
        Section(path=("intro",), body="You are a bot. " + FILLER, frozen=True),
        Section(path=("a",), body="rule_a rule_shared " + FILLER + " " + FILLER),
        Section(path=("b",), body="rule_b rule_shared " + FILLER),
        Section(path=("c",), body="rule_c " + " ".join(["pad"] * 20)),
        Section(path=("tiny",), body="rule_t"),
    ),
)
SAMPLES = ("a", "b", "c", "shared", "t", "never")


def answer(bodies: Bodies, sid: str, run: int) -> bool:
    if sid == "never":
        return False
    return any(f"rule_{sid}" in body for body in bodies.values())


def make_spec(**kw: object) -> CompressSpec:
    data: dict[str, object] = {
        "prompt": PROMPT,
        "dataset": Dataset(samples=tuple(Sample(id=s, input=s, expected=s) for s in SAMPLES)),
        "check": {"type": "contains"},
        "model": {"model": "optiflow/sim"},
        "strategy": {"type": "rule"},
        "eval_runs": 2,
        "min_section_tokens": 5,
        "fail_fast": False,
        "require_sensitivity": False,
    }
    data.update(kw)
    return CompressSpec.model_validate(data)


def keep(body: str, *rules: str) -> str:
    return " ".join(rules) + " short"


def report_of(spec: CompressSpec, edits: dict[tuple[str, ...], str]) -> tuple[OptimizationReport, list[str]]:
    report, steps = run_workflow(spec, answer, edits)
    assert isinstance(report, OptimizationReport), report
    return report, [s.name for s in steps]


def assert_matches_seed(
    spec: CompressSpec, edits: dict[tuple[str, ...], str], report: OptimizationReport
) -> None:
    rate, mods, rejected, _ = seed_reference(spec, answer, edits)
    assert report.baseline_pass_rate == rate
    assert [seed_fields(m) for m in report.modifications] == [seed_fields(m) for m in mods]
    assert [seed_fields(r) for r in report.rejected] == [seed_fields(r) for r in rejected]


SEED = {
    "section_path",
    "original_hash",
    "proposed_body",
    "token_reduction",
    "baseline_pass_rate",
    "candidate_pass_rate",
    "regression_count",
    "regression_count_is_lower_bound",
    "stage",
}


def seed_fields(model: Modification | RejectedModification) -> dict[str, object]:
    """What seed 000 reports of a decision (the gate's statistics come on top)."""
    return {
        k: v
        for k, v in model.model_dump().items()
        if k in SEED and not (k == "proposed_body" and isinstance(model, RejectedModification))
    }


def test_sections_proposed_largest_first_skipping_frozen_and_small() -> None:
    wf = CompressWorkflow(make_spec(), "j")
    assert wf.proposable_sections(words) == (("a",), ("b",), ("c",))
    assert CompressWorkflow(make_spec(min_section_tokens=30), "j").proposable_sections(words) == (
        ("a",),
        ("b",),
    )


def test_no_edit_proposed_finishes_after_baseline() -> None:
    report, steps = report_of(make_spec(min_section_tokens=10_000), {})
    assert steps == ["baseline"]
    assert report.modifications == () and report.rejected == ()
    assert report.baseline_pass_rate == pytest.approx(5 / 6)


def test_edits_that_save_nothing_are_not_evaluated() -> None:
    report, steps = report_of(make_spec(), {})  # every proposal returns the same body
    assert steps == ["baseline"]
    assert report.total_token_reduction == 0


def test_all_rejected() -> None:
    edits = {("a",): "short", ("b",): "short", ("c",): "short"}
    spec = make_spec()
    report, steps = report_of(spec, edits)
    assert steps == ["baseline", "candidates"]
    assert report.modifications == ()
    assert [r.section_path for r in report.rejected] == [("a",), ("b",), ("c",)]
    assert [r.regression_count for r in report.rejected] == [1, 1, 1]
    assert_matches_seed(spec, edits, report)


def test_exactly_one_accepted_has_no_combined_step() -> None:
    edits = {("a",): keep("", "rule_a", "rule_shared"), ("b",): "short"}
    spec = make_spec()
    report, steps = report_of(spec, edits)
    assert steps == ["baseline", "candidates"]
    assert [m.section_path for m in report.modifications] == [("a",)]
    assert report.total_token_reduction == words(PROMPT.section(("a",)).body) - 3
    assert_matches_seed(spec, edits, report)


def test_combined_passes() -> None:
    edits = {
        ("a",): keep("", "rule_a", "rule_shared"),
        ("b",): keep("", "rule_b", "rule_shared"),
        ("c",): "rule_c",
    }
    spec = make_spec()
    report, steps = report_of(spec, edits)
    assert steps == ["baseline", "candidates", "combined"]
    assert {m.section_path for m in report.modifications} == {("a",), ("b",), ("c",)}
    assert_matches_seed(spec, edits, report)


def test_combined_regresses_and_greedy_keeps_strict_subset() -> None:
    # each drops one copy of rule_shared: fine alone, a regression together
    edits = {("a",): keep("", "rule_a"), ("b",): keep("", "rule_b"), ("c",): "rule_c"}
    spec = make_spec()
    report, steps = report_of(spec, edits)
    # greedy-0 ({a}) is the first candidate alone: decided from memory, no evaluation
    assert steps == ["baseline", "candidates", "combined", "greedy-1", "greedy-2"]
    assert [m.section_path for m in report.modifications] == [("a",), ("c",)]
    greedy_rejected = [r for r in report.rejected if r.stage == "greedy"]
    assert [r.section_path for r in greedy_rejected] == [("b",)]
    assert greedy_rejected[0].regression_count == 1
    assert_matches_seed(spec, edits, report)


def test_regression_only_steps_evaluate_baseline_passed_samples_only() -> None:
    edits = {("a",): keep("", "rule_a"), ("b",): keep("", "rule_b"), ("c",): "rule_c"}
    _, steps = run_workflow(make_spec(), answer, edits)
    combined = steps[2].targets[0]
    assert "never" not in combined.sample_ids and len(combined.sample_ids) == 5


def test_fail_fast_skips_and_marks_lower_bound_with_same_decisions() -> None:
    edits = {("a",): keep("", "rule_a"), ("b",): keep("", "rule_b"), ("c",): "short"}
    slow, _ = report_of(make_spec(fail_fast=False), edits)
    fast, _ = report_of(make_spec(fail_fast=True), edits)
    assert fast.modifications == slow.modifications
    assert [r.section_path for r in fast.rejected] == [r.section_path for r in slow.rejected]
    assert all(r.regression_count_is_lower_bound for r in fast.rejected)
    assert fast.stats.fail_fast_skipped > 0
    assert fast.stats.model_calls < slow.stats.model_calls


def test_model_calls_well_below_seed_algorithm() -> None:
    edits = {("a",): keep("", "rule_a"), ("b",): keep("", "rule_b"), ("c",): "rule_c"}
    spec = make_spec(fail_fast=True)
    report, _ = report_of(spec, edits)
    *_, seed_calls = seed_reference(spec, answer, edits)
    assert report.stats.model_calls <= 0.8 * seed_calls


def test_baseline_all_errors_fails_job() -> None:
    wf = CompressWorkflow(make_spec(), "j")
    started = wf.start(words)
    from optiflow.core.actions import Fail
    from optiflow.core.evaluation import EvalResult
    from optiflow.core.step import Step, StepResults

    errs = tuple(
        EvalResult(experiment_id="j-baseline", sample_id=s, run=0, error="AuthenticationError: bad key")
        for s in SAMPLES
    )
    assert isinstance(started.action, Step)
    action = wf.advance(started.state, StepResults(step=started.action, evals=errs)).action
    assert isinstance(action, Fail)
    assert "bad key" in action.error


def test_state_round_trips_through_json_midway() -> None:
    from optiflow.core.compress.workflow import CompressState

    edits = {("a",): keep("", "rule_a"), ("b",): keep("", "rule_b"), ("c",): "rule_c"}
    spec = make_spec()
    wf = CompressWorkflow(spec, "job1")
    _, steps = run_workflow(spec, answer, edits)
    state = wf.start(words).state
    again = CompressState.model_validate_json(state.model_dump_json())
    assert again == state
    assert len(steps) == 5


def test_a_guarded_set_is_probed_first_on_the_samples_its_removed_sentences_concern() -> None:
    """Fail-fast sets carry a probe: the watched samples whose questions share the most rare
    words with a sentence the set removes (``core.relevance``); without fail-fast, none."""
    help_ = (
        "Be kind and brief in every answer. When asked about a refund, promise the money within five days. "
        "When asked about a lost parcel, open a carrier claim. Sign every answer with the team name."
    )
    prompt = Prompt(ns="t", key="p", sections=(Section(path=("help",), body=help_),))
    questions = {
        "refund-1": "Where is my refund?",
        "parcel-1": "My parcel got lost on the way",
        "refund-2": "How many days until the refund arrives?",
        "hello": "Hello there",
    }
    samples = tuple(Sample(id=k, input=v, expected=k) for k, v in questions.items())
    dropped_refund = (
        "Be kind and brief in every answer. When asked about a lost parcel, open a carrier claim."
    )

    def by_rule(bodies: Bodies, sid: str, run: int) -> bool:
        topic = sid.split("-", maxsplit=1)[0]
        return sid == "hello" or f"about a {'lost ' if topic == 'parcel' else ''}{topic}" in bodies[("help",)]

    for fail_fast in (True, False):
        spec = make_spec(
            prompt=prompt, dataset=Dataset(samples=samples), fail_fast=fail_fast, min_section_tokens=1
        )
        report, steps = run_workflow(spec, by_rule, {("help",): dropped_refund})
        assert isinstance(report, OptimizationReport) and len(report.rejected) == 1
        (target,) = steps[1].targets
        if fail_fast:
            assert target.probe == ("refund-2", "refund-1")  # "days" and "refund", then "refund"
        else:
            assert target.probe == ()


def test_strict_greedy_evaluates_the_chain_of_sets_it_would_keep_in_one_step() -> None:
    """Greedy after a rejected combination: the sets it would evaluate next if each is kept
    share one step (strict); a rejection in the chain makes the rest moot, and the decisions
    are seed 000's."""
    filler = " ".join(["filler"] * 40)
    prompt = Prompt(
        ns="t",
        key="p",
        sections=(
            Section(path=("a",), body="rule_a rule_x " + filler + " " + filler),
            Section(path=("b",), body="rule_b rule_y " + filler + " pad pad pad"),
            Section(path=("c",), body="rule_c rule_x " + filler),
            Section(path=("d",), body="rule_d rule_y " + " ".join(["pad"] * 20)),
        ),
    )
    samples = ("a", "b", "c", "d", "x", "y")
    spec = make_spec(
        prompt=prompt, dataset=Dataset(samples=tuple(Sample(id=s, input=s, expected=s) for s in samples))
    )
    # each drops its copy of rule_x or rule_y: fine alone, x or y lost when both copies go
    edits = {("a",): "rule_a", ("b",): "rule_b", ("c",): "rule_c", ("d",): "rule_d"}
    report, steps = run_workflow(spec, answer, edits)
    assert isinstance(report, OptimizationReport)
    names = [s.name for s in steps]
    assert names == ["baseline", "candidates", "combined", "greedy-1", "greedy-3"]
    chain = steps[3]
    assert [t.experiment.name for t in chain.targets] == ["greedy-1", "greedy-2"]  # {a,b} and {a,b,c}
    assert [m.section_path for m in report.modifications] == [("a",), ("b",)]
    assert [r.section_path for r in report.rejected if r.stage == "greedy"] == [("c",), ("d",)]
    assert_matches_seed(spec, edits, report)
