"""A compress report names every mutable section: the ones edited (accepted or rejected), the ones
whose proposal failed, and the ones no edit of was evaluated, with the reason (issue 22)."""

from __future__ import annotations

from optiflow.core.compress.output import render, statistic
from optiflow.core.gate.decision import GateStats
from optiflow.core.sections import path_str

from .test_compress_workflow import keep, make_spec, report_of


def test_every_mutable_section_is_named_and_the_untried_say_why() -> None:
    spec = make_spec()
    report, _ = report_of(spec, {("a",): keep("", "rule_a", "rule_shared")})
    edited = {m.section_path for m in report.modifications} | {r.section_path for r in report.rejected}
    untried = {u.path: u.reason for u in report.untried}
    mutable = {s.path for s in spec.prompt.sections if not s.frozen}
    assert edited == {("a",)}
    assert edited | set(untried) == mutable
    assert untried[("b",)].startswith("not evaluated: the proposal saved no tokens")
    assert untried[("tiny",)] == "not proposed: under min_section_tokens (5)"
    text = render(report)
    for path, reason in untried.items():
        assert f"{path_str(path)}" in text and reason in text
    assert "untried" in report.model_dump(mode="json")


def test_a_paired_decision_prints_the_baseline_it_compares_against() -> None:
    stats = GateStats(
        gate="paired", gate_reason="auto", margin=0.1, alpha=0.05, beta=0.2, samples=44,
        baseline_pass_rate=0.739, candidate_pass_rate=0.723, drop=0.015, drop_low=-0.03, drop_high=0.08,
        pairs=6, baseline_runs=264, candidate_runs=264, evidence_accept=20.0, evidence_reject=1.0,
        regressed=(), fixed=(),
    )  # fmt: skip
    line = statistic(stats)
    assert line.startswith("paired: vs baseline 73.9% over 6 run(s): drop +1.5%"), line
