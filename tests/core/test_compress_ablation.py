"""The ablation (issue 23): every mutable section emptied, judged by the job's gate, before candidates."""

from __future__ import annotations

from optiflow.core.compress.output import render
from optiflow.core.compress.report import OptimizationReport
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.dataset import Dataset, Sample

from .compress_harness import Bodies, run_workflow
from .test_compress_workflow import PROMPT, SAMPLES, answer, keep

EDITS = {("a",): keep("", "rule_a", "rule_shared"), ("b",): keep("", "rule_b")}


def make_spec(**kw: object) -> CompressSpec:
    data: dict[str, object] = {
        "prompt": PROMPT,
        "dataset": Dataset(samples=tuple(Sample(id=s, input=s, expected=s) for s in SAMPLES)),
        "check": {"type": "contains"},
        "model": {"model": "optiflow/sim"},
        "strategy": {"type": "rule"},
        "eval_runs": 2,
        "min_section_tokens": 5,
    }
    data.update(kw)
    return CompressSpec.model_validate(data)


def any_answer_passes(bodies: Bodies, sid: str, run: int) -> bool:
    """A check any answer passes: the prompt's sections do not matter to it."""
    return True


def test_the_ablation_is_on_by_default_and_runs_before_candidates() -> None:
    report, steps = run_workflow(make_spec(), answer, EDITS)
    assert isinstance(report, OptimizationReport), report
    assert [s.name for s in steps][:3] == ["baseline", "ablation", "candidates"]
    ablation = steps[1].targets[0]
    assert {o.path: o.body for o in ablation.overrides} == {
        ("a",): "",
        ("b",): "",
        ("c",): "",
        ("tiny",): "",
    }  # every mutable section, the frozen one kept
    assert report.ablation is not None and report.ablation.noticed
    assert report.ablation.stats is not None and report.ablation.stats.regressed
    assert report.ablation.tokens == sum(len(PROMPT.section((p,)).body.split()) for p in "abc") + 1
    text = render(report)
    assert "ablation: 4 mutable section(s) emptied" in text and "noticed (rejected)" in text
    # the decisions are those of the job without the ablation
    plain, _ = run_workflow(make_spec(require_sensitivity=False), answer, EDITS)
    assert isinstance(plain, OptimizationReport)
    assert plain.modifications == report.modifications and plain.rejected == report.rejected


def test_a_dataset_that_does_not_notice_fails_the_job_with_one_line() -> None:
    error, steps = run_workflow(make_spec(), any_answer_passes, EDITS)
    assert isinstance(error, str)
    assert [s.name for s in steps] == ["baseline", "ablation"]  # no candidate is paid for
    assert "\n" not in error
    assert error.startswith("the dataset does not notice the mutable sections: with all of them emptied")
    assert "require_sensitivity: false" in error


def test_the_paired_gate_decides_the_ablation_with_its_interval() -> None:
    error, _ = run_workflow(make_spec(gate={"mode": "paired"}), any_answer_passes, EDITS)
    assert isinstance(error, str) and "[paired: drop +0.0%, interval [" in error


def test_without_require_sensitivity_every_decision_says_unchecked() -> None:
    report, steps = run_workflow(make_spec(require_sensitivity=False), any_answer_passes, EDITS)
    assert isinstance(report, OptimizationReport)
    assert "ablation" not in [s.name for s in steps]
    assert report.ablation is None and report.sensitivity_unchecked
    decisions = [line for line in render(report).splitlines() if line.strip().startswith(("+ ", "- "))]
    assert decisions and all(
        "sensitivity unchecked (require_sensitivity: false)" in line for line in decisions
    )


def test_refused_proposals_are_reported_never_evaluated_and_do_not_fail_the_job() -> None:
    from optiflow.core.actions import Finish
    from optiflow.core.compress.workflow import CompressWorkflow
    from optiflow.core.evaluation import EvalResult
    from optiflow.core.step import ProposalError, StepResults

    from .compress_harness import words

    spec = make_spec(require_sensitivity=False)
    wf = CompressWorkflow(spec, "j")
    tr = wf.start(words)
    step = tr.action
    assert not isinstance(step, Finish) and hasattr(step, "targets")
    (target,) = step.targets
    evals = tuple(
        EvalResult(experiment_id=target.experiment.id, sample_id=sid, run=run, passed=sid != "never")
        for run in target.run_indices
        for sid in target.sample_ids
    )
    errors = tuple(
        ProposalError(
            path=p, error="refused: reads as a chat reply", refused=True, proposed_body="Hi!", attempts=3
        )
        for p in step.propose
    )
    tr = wf.advance(tr.state, StepResults(step=step, evals=evals, proposal_errors=errors))
    assert isinstance(tr.action, Finish)
    report = tr.action.report
    assert isinstance(report, OptimizationReport)
    assert report.proposal_errors == errors and not report.modifications and not report.rejected
    text = render(report)
    assert "proposal refused: reads as a chat reply (3 attempt(s), not evaluated)" in text
    assert "last proposal: 'Hi!'" in text


def test_refused_proposals_are_in_the_history_as_rejections() -> None:
    from optiflow.core.compress.workflow import CompressWorkflow
    from optiflow.core.evaluation import EvalResult
    from optiflow.core.step import ProposalError, Step, StepResults

    from .compress_harness import words

    wf = CompressWorkflow(make_spec(require_sensitivity=False), "j")
    tr = wf.start(words)
    step = tr.action
    assert isinstance(step, Step)
    (target,) = step.targets
    evals = tuple(
        EvalResult(experiment_id=target.experiment.id, sample_id=sid, run=run, passed=True)
        for run in target.run_indices
        for sid in target.sample_ids
    )
    refused = ProposalError(path=step.propose[0], error="refused: x", refused=True, proposed_body="Hi!")
    tr = wf.advance(tr.state, StepResults(step=step, evals=evals, proposal_errors=(refused,)))
    (r,) = tr.rejections
    assert (r.reason_code, r.message, r.rationale, r.step_index) == ("unfaithful", "refused: x", "Hi!", 0)


def test_a_job_with_no_edit_to_try_reports_no_ablation_rather_than_not_noticed() -> None:
    """Every section under min_section_tokens: the job ends after the baseline, and its report has
    no ablation (its placeholder would read "NOT noticed", the failure verdict)."""
    report, steps = run_workflow(make_spec(min_section_tokens=10_000), answer, EDITS)
    assert isinstance(report, OptimizationReport), report
    assert [s.name for s in steps] == ["baseline"]
    assert report.ablation is None
    assert "NOT noticed" not in render(report)
