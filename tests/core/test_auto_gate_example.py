"""``auto`` at ``eval_runs: 1`` on the example ``optiflow demo`` runs (examples/support-bot) with the
deterministic simulated model: one more baseline run shows the model deterministic, so the job
decides under ``strict``: its report is seed 000's (``seed000``, the independent reference) and
its model calls are at most the strict job's plus that one baseline run."""

from __future__ import annotations

from optiflow.core.checks import run_check
from optiflow.core.compress.report import OptimizationReport
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.compress.workflow import CompressWorkflow
from optiflow.core.overrides import PromptOverrides, SectionOverride
from optiflow.distributed.work import propose_edit
from optiflow.jobfile import load_job
from optiflow.llm.simulated import SimulatedModel
from optiflow.llm.tokens import count_tokens
from tests.support.workers import ROOT

from . import seed000
from .fleet import Bodies, run_job
from .test_seed000_differential import check_against_seed

EXAMPLE = ROOT / "examples" / "support-bot" / "job.yaml"
SIM = SimulatedModel()


def spec_of(mode: str) -> CompressSpec:
    spec = load_job(EXAMPLE, overrides={"eval_runs": 1, "gate": {"mode": mode}})
    assert isinstance(spec, CompressSpec)
    return spec


def sim_answer(spec: CompressSpec):  # type: ignore[no-untyped-def]
    """The evaluate task's answer for a prompt's bodies: rendered, asked of the simulated model,
    judged by the job's check."""
    samples = {s.id: s for s in spec.dataset.samples}

    def answer(bodies: Bodies, sid: str, run: int) -> bool | None:
        overrides = PromptOverrides(
            ns=spec.prompt.ns,
            key=spec.prompt.key,
            tag="t",
            sections=tuple(
                SectionOverride(path=s.path, expected_hash=s.hash, body=bodies[s.path])
                for s in spec.prompt.sections
                if bodies[s.path] != s.body
            ),
        )
        sample = samples[sid]
        rendered = spec.prompt.render(sample.input, overrides=overrides)
        reply = SIM.reply(
            rendered.messages(), dict(spec.model.params), {"sample_id": sid, "run": run}, sleep=False
        )
        return run_check(spec.check, reply.text, sample.expected, input=sample.input).passed

    return answer


def test_auto_at_one_run_on_the_example_is_seed_000_for_one_baseline_run_more() -> None:
    auto, strict = spec_of("auto"), spec_of("strict")
    assert auto.fail_fast  # as the example ships

    def count(text: str) -> int:
        return count_tokens(text, auto.model.model)

    proposals = {p: propose_edit(auto, p) for p in CompressWorkflow(auto, "j").proposable_sections(count)}
    answer = sim_answer(auto)
    ref = seed000.optimize(
        [seed000.RefSection(s.path, s.body, s.frozen) for s in auto.prompt.sections],
        {p: e.proposed_body for p, e in proposals.items()},
        auto.dataset.ids(),
        answer,
        eval_runs=1,
        min_section_tokens=auto.min_section_tokens,
        count_tokens=count,
    )
    got_auto = run_job(auto, answer, {}, count_tokens=count, proposals=proposals)
    got_strict = run_job(strict, answer, {}, count_tokens=count, proposals=proposals)
    check_against_seed(got_auto, ref, auto)
    check_against_seed(got_strict, ref, strict)
    report = got_auto.outcome
    assert isinstance(report, OptimizationReport) and report.assessment is not None
    assert report.assessment.gate == "strict" and "agreed" in report.assessment.reason
    assert report.assessment.runs == 2 * len(auto.dataset)  # one baseline run more than eval_runs
    # the branches the example exercises: accepted edits, a rejected one, greedy after the combination
    assert report.modifications and any(r.stage == "greedy" for r in report.rejected)
    print(
        f"\nsupport-bot, eval_runs 1: seed 000 {ref.calls} calls, strict {got_strict.calls}, "
        f"auto {got_auto.calls} (baseline run: {len(auto.dataset)} calls)"
    )
    assert got_auto.calls <= got_strict.calls + len(auto.dataset)
