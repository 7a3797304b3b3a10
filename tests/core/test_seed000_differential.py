"""Strict compress jobs decide as seed 000 does: random scenarios through the pure workflow, run as
the driver and the workers run it (evaluation order, probes and holds, evaluations in flight,
fail-fast marks, each process's memory of a tag, the eval cache: ``fleet``), against an
independent reference of seed 000 (``seed000``).

Every decision and figure must be the reference's, except what the README documents: an edit
that saves no tokens is not evaluated (the reference drops it too), a baseline that gives the gate
nothing to stand on fails the job, and under fail-fast a rejected set's regression count is a
lower bound (flagged ``regression_count_is_lower_bound``). ``auto`` (drawn when the model is deterministic)
must pick ``strict`` and decide the same, at most one baseline run dearer at ``eval_runs: 1``.

This is what a change to ids, ordering, probes, holds or chains must keep green: it fails on the
greedy chain's reused ids of commit f88de80. ``OPTIFLOW_SEED000_EXAMPLES`` sets the scenarios per
run (``make check-deep`` raises it).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from optiflow.core.actions import Fail
from optiflow.core.compress.report import OptimizationReport
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.dataset import Dataset, Sample
from optiflow.core.prompt import Prompt, Section
from optiflow.core.sections import SectionPath

from . import seed000
from .fleet import Bodies, Run, run_job, words

EXAMPLES = int(os.environ.get("OPTIFLOW_SEED000_EXAMPLES", "500"))
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
RULES = 3
KINDS = ("rule", "rule", "rule", "rule", "both", "both", "always", "never", "fragile", "flaky", "erratic")
RUN_DEPENDENT = frozenset({"flaky", "erratic"})


@dataclass(frozen=True)
class SectionPlan:
    rules: tuple[int, ...]
    filler: int
    frozen: bool
    kept: tuple[int, ...]
    kept_filler: int


@dataclass(frozen=True)
class SamplePlan:
    kind: str
    rules: tuple[int, ...]


@dataclass(frozen=True)
class Scenario:
    sections: tuple[SectionPlan, ...]
    samples: tuple[SamplePlan, ...]
    eval_runs: int
    fail_fast: bool
    min_section_tokens: int
    mode: str
    inflight: int
    processes: int


def body(rules: tuple[int, ...], filler: int) -> str:
    return " ".join([*(f"Mention r{k}." for k in rules), *(["pad"] * filler)])


def digest(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:4], "big")


@st.composite
def section_plans(draw: st.DrawFn) -> SectionPlan:
    rules = tuple(draw(st.lists(st.integers(0, RULES - 1), min_size=1, max_size=3, unique=True)))
    filler = draw(st.integers(0, 12))
    kept = () if draw(st.booleans()) else tuple(k for k in rules if draw(st.booleans()))
    return SectionPlan(
        rules=rules,
        filler=filler,
        frozen=draw(st.integers(0, 5)) == 5,
        kept=kept,
        kept_filler=draw(st.integers(0, filler + 2)),
    )


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    sections = tuple(draw(st.lists(section_plans(), min_size=2, max_size=6)))
    present = sorted({k for s in sections for k in s.rules})  # samples mostly need rules the prompt has
    rule = st.sampled_from(present) | st.integers(0, RULES - 1) if present else st.integers(0, RULES - 1)
    samples = tuple(
        SamplePlan(kind=draw(st.sampled_from(KINDS)), rules=(draw(rule), draw(rule)))
        for _ in range(draw(st.integers(1, 12)))
    )
    deterministic = not any(s.kind in RUN_DEPENDENT for s in samples)
    mode = draw(st.sampled_from(("strict", "auto"))) if deterministic else "strict"
    eval_runs = draw(st.integers(1, 3))
    return Scenario(
        sections=sections,
        samples=samples,
        eval_runs=eval_runs,
        fail_fast=draw(st.booleans()),
        min_section_tokens=draw(st.sampled_from((0, 0, 1, 3, 5))),
        mode=mode,
        inflight=draw(st.sampled_from((1, 1, 2, 4, 16))),
        processes=draw(st.integers(1, 3)),
    )


def paths(sc: Scenario) -> list[SectionPath]:
    return [(f"p{i}",) for i in range(len(sc.sections))]


def model(sc: Scenario):  # type: ignore[no-untyped-def]
    """The scenario's model: a pure function of the rendered bodies, the sample and the run."""
    plans = {f"s{i}": s for i, s in enumerate(sc.samples)}

    def has(bodies: Bodies, k: int) -> bool:
        return any(f"r{k}." in b.split() for b in bodies.values())

    def answer(bodies: Bodies, sid: str, run: int) -> bool | None:
        plan = plans[sid]
        a, b = plan.rules
        key = tuple(sorted(bodies.items()))
        if plan.kind == "rule":
            return has(bodies, a)
        if plan.kind == "both":
            return has(bodies, a) and has(bodies, b)
        if plan.kind == "always":
            return True
        if plan.kind == "never":
            return False
        if plan.kind == "fragile":  # any edit may break it, a rule it needs or not
            return has(bodies, a) and digest(key, sid) % 7 != 0
        if plan.kind == "flaky":
            return digest(key, sid, run) % 2 == 0
        if digest(key, sid, run) % 25 == 0:  # erratic: the provider fails now and then
            return None
        return has(bodies, a)

    return answer


def build(sc: Scenario) -> tuple[CompressSpec, dict[SectionPath, str]]:
    sections = tuple(
        Section(path=p, body=body(s.rules, s.filler), frozen=s.frozen)
        for p, s in zip(paths(sc), sc.sections, strict=True)
    )
    samples = tuple(
        Sample(id=f"s{i}", input=f"Tell me about r{s.rules[0]}", expected="x")
        for i, s in enumerate(sc.samples)
    )
    spec = CompressSpec.model_validate(
        {
            "prompt": Prompt(ns="t", key="p", sections=sections),
            "dataset": Dataset(samples=samples),
            "check": {"type": "contains"},
            "model": {"model": "optiflow/sim"},
            "strategy": {"type": "rule"},
            "eval_runs": sc.eval_runs,
            "min_section_tokens": sc.min_section_tokens,
            "fail_fast": sc.fail_fast,
            "gate": {"mode": sc.mode},
            "require_sensitivity": False,  # seed 000 exactly: no ablation step
        }
    )
    edits = {p: body(s.kept, s.kept_filler) for p, s in zip(paths(sc), sc.sections, strict=True)}
    return spec, edits


def reference(sc: Scenario, spec: CompressSpec, edits: dict[SectionPath, str]) -> seed000.RefReport:
    return seed000.optimize(
        [seed000.RefSection(s.path, s.body, s.frozen) for s in spec.prompt.sections],
        edits,
        spec.dataset.ids(),
        model(sc),
        eval_runs=sc.eval_runs,
        min_section_tokens=sc.min_section_tokens,
        count_tokens=words,
    )


def no_evidence(ref: seed000.RefReport, gate: CompressSpec) -> bool:
    """README (Gates): a baseline over ``max_error_rate`` errors, under ``min_baseline_pass_rate``
    (over answered runs), or, strict, with no sample passing every run, fails the job."""
    answers = [ok for run in ref.baseline for ok in run]
    errors = sum(1 for ok in answers if ok is None)
    answered = len(answers) - errors
    passed = sum(1 for ok in answers if ok is True)
    consistently = [all(run[i] is True for run in ref.baseline) for i in range(len(ref.baseline[0]))]
    g = gate.gate_spec
    return (
        errors / len(answers) > g.max_error_rate
        or (passed / answered if answered else 0.0) < g.min_baseline_pass_rate
        or not any(consistently)
    )


def check_against_seed(run: Run, ref: seed000.RefReport, spec: CompressSpec) -> None:
    assert run.outcome is not None, f"the job never ended: still going after {len(run.steps)} steps"
    if no_evidence(ref, spec):
        assert isinstance(run.outcome, Fail), "a baseline with no evidence must fail the job"
        assert run.outcome.error.startswith("the baseline gives the gate nothing to stand on"), (
            run.outcome.error
        )
        return
    assert not isinstance(run.outcome, Fail), run.outcome.error
    report: OptimizationReport = run.outcome
    assert report.gate == "strict"
    assert report.baseline_pass_rate == pytest.approx(ref.baseline_pass_rate, rel=1e-12, abs=1e-12)
    got_mods = [
        (m.section_path, m.original_hash, m.proposed_body, m.token_reduction) for m in report.modifications
    ]
    want_mods = [
        (m.section_path, m.original_hash, m.proposed_body, m.token_reduction) for m in ref.modifications
    ]
    assert got_mods == want_mods, "modifications differ"
    for got, want in zip(report.modifications, ref.modifications, strict=True):
        assert got.baseline_pass_rate == pytest.approx(want.baseline_pass_rate, rel=1e-12, abs=1e-12)
        assert got.candidate_pass_rate == pytest.approx(want.candidate_pass_rate, rel=1e-12, abs=1e-12)
    got_rej = [(r.section_path, r.token_reduction) for r in report.rejected]
    want_rej = [(r.section_path, r.token_reduction) for r in ref.rejected]
    assert got_rej == want_rej, "rejections differ"
    for got_r, want_r in zip(report.rejected, ref.rejected, strict=True):
        if got_r.regression_count_is_lower_bound:
            assert 1 <= got_r.regression_count <= want_r.regression_count, (got_r, want_r)
        else:
            assert got_r.regression_count == want_r.regression_count, (got_r, want_r)
    assert report.total_token_reduction == sum(m.token_reduction for m in ref.modifications)


@pytest.mark.timeout(max(300, EXAMPLES // 5))
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=IN_CI,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
@given(sc=scenarios())
def test_strict_compress_decides_as_seed_000(sc: Scenario) -> None:
    spec, edits = build(sc)
    note(f"scenario: {sc}")
    run = run_job(spec, model(sc), edits, inflight=sc.inflight, processes=sc.processes)
    names = [s.name for s in run.steps]
    note(f"steps ({len(names)}): {names[:12]}{' ...' if len(names) > 12 else ''}")
    ref = reference(sc, spec, edits)
    if sc.mode == "auto":  # the same job under strict: auto costs at most one baseline run more
        strict = run_job(
            spec.model_copy(update={"gate": spec.gate.model_copy(update={"mode": "strict"})}),
            model(sc),
            edits,
            inflight=sc.inflight,
            processes=sc.processes,
        )
        extra = len(spec.dataset) if sc.eval_runs == 1 else 0
        assert run.calls <= strict.calls + extra
    event(
        f"phases: {'greedy' if any(n.startswith('greedy') for n in names) else names[-1] if names else '-'}"
    )
    event(f"fail_fast={sc.fail_fast}, failed={isinstance(run.outcome, Fail)}")
    check_against_seed(run, ref, spec)


@settings(
    max_examples=max(EXAMPLES // 5, 50),
    deadline=None,
    derandomize=IN_CI,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
@given(
    sc=scenarios(),
    gate=st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {
                "mode": st.sampled_from(("paired", "auto")),
                "max_runs": st.integers(3, 6),
                "round_runs": st.integers(1, 2),
                "protect": st.lists(st.sampled_from([f"s{i}" for i in range(12)]), max_size=3),
            }
        ),
    ),
    ablation=st.booleans(),
)
def test_no_compress_job_exceeds_its_step_bound(
    sc: Scenario, gate: dict[str, object] | None, ablation: bool
) -> None:
    """Under any gate: the scenario's (strict, or auto on a deterministic model), or paired / auto
    on any model, with protected samples (fail-fast watches them) and a small run cap; with the
    ablation step (issue 23's default) or without."""
    spec, edits = build(sc)
    update: dict[str, object] = {"require_sensitivity": ablation}
    if gate is not None:
        update["gate"] = {**gate, "min_baseline_pass_rate": 0.0, "max_error_rate": 0.2}
    spec = CompressSpec.model_validate({**spec.model_dump(), **update})
    run = run_job(spec, model(sc), edits, inflight=sc.inflight, processes=sc.processes)
    event(f"gate: {gate['mode'] if gate else sc.mode}, steps: {len(run.steps)} of {run.max_steps}")
    assert run.outcome is not None
    assert len(run.steps) <= run.max_steps
    if isinstance(run.outcome, Fail):
        assert run.outcome.code not in ("step_bound_exceeded", "step_all_skipped"), run.outcome.error


@pytest.mark.parametrize("fail_fast", [False, True])
def test_a_greedy_chain_cut_by_a_rejection_hands_its_ids_to_no_other_set(fail_fast: bool) -> None:
    """Issue 19's reproduction: p3 and p4 each keep the refunds rule one sample needs; the chain
    {p3,p4}, {p3,p4,p2} is cut by the first's rejection, and the next chain's {p3,p2} once took
    the id (and tag) of {p3,p4,p2}: its stale overrides (fail-fast off) or its regression mark
    (fail-fast on: every evaluation skipped, a job that never ended)."""

    def pad(n: int) -> str:
        return " ".join(["pad"] * n)

    prompt = Prompt(
        ns="t",
        key="p",
        sections=(
            Section(path=("intro",), body="Answer politely. Mention tone.", frozen=True),
            Section(path=("p1",), body="Mention greet. " + pad(10)),
            Section(path=("p2",), body="Mention bye. " + pad(20)),
            Section(path=("p3",), body="Mention refunds. " + pad(40)),
            Section(path=("p4",), body="Mention refunds. " + pad(30)),
        ),
    )
    needs = {"refund": "refunds", "greet": "greet", "bye": "bye", **{f"tone{i}": "tone" for i in range(8)}}
    samples = tuple(
        Sample(id=sid, input=f"Tell me about {rule}", expected="x") for sid, rule in needs.items()
    )
    spec = CompressSpec.model_validate(
        {
            "prompt": prompt,
            "dataset": Dataset(samples=samples),
            "check": {"type": "contains"},
            "model": {"model": "optiflow/sim"},
            "strategy": {"type": "rule"},
            "eval_runs": 1,
            "min_section_tokens": 0,
            "fail_fast": fail_fast,
            "gate": {"mode": "strict"},
            "require_sensitivity": False,
        }
    )
    edits = {("p1",): "Mention greet.", ("p2",): "Mention bye.", ("p3",): "Short.", ("p4",): "Short."}

    def answer(bodies: Bodies, sid: str, run: int) -> bool:
        return any(f"{needs[sid]}." in b.split() for b in bodies.values())

    run = run_job(spec, answer, edits)
    ref = seed000.optimize(
        [seed000.RefSection(s.path, s.body, s.frozen) for s in prompt.sections],
        edits,
        spec.dataset.ids(),
        answer,
        eval_runs=1,
        min_section_tokens=0,
        count_tokens=words,
    )
    assert [m.section_path for m in ref.modifications] == [("p3",), ("p2",), ("p1",)]
    assert [r.section_path for r in ref.rejected] == [("p4",)]
    assert len(run.steps) <= run.max_steps
    check_against_seed(run, ref, spec)
    assert [s.name for s in run.steps] == ["baseline", "candidates", "combined", "greedy-1", "greedy-2"]
    sets = {t.experiment.id: t.overrides for s in run.steps[3:] for t in s.targets}
    assert len(sets) == len(set(sets.values())) == 4  # {p3,p4}, {p3,p4,p2}, {p3,p2}, {p3,p2,p1}


def test_a_paired_candidate_fail_fast_stopped_is_rejected_not_run_again() -> None:
    """Paired, fail-fast watching protected samples (found by the step-bound property): s0 passed
    every baseline run of the first round, failed p2's candidate run of the second and a baseline
    run added in the same step. The gate no longer counts s0 a regression and would ask for more
    runs, but fail-fast marked p2: every further evaluation would be skipped (a job that failed at
    its step bound, or before it went round after round until the baseline's cap). It is rejected."""
    sc = Scenario(
        sections=(
            SectionPlan(rules=(0,), filler=0, frozen=False, kept=(), kept_filler=2),
            SectionPlan(rules=(0, 1, 2), filler=5, frozen=False, kept=(1, 2), kept_filler=4),
            SectionPlan(rules=(0,), filler=5, frozen=False, kept=(), kept_filler=1),
            SectionPlan(rules=(0, 1, 2), filler=3, frozen=False, kept=(), kept_filler=5),
            SectionPlan(rules=(1,), filler=5, frozen=False, kept=(), kept_filler=6),
        ),
        samples=(
            SamplePlan(kind="flaky", rules=(0, 0)),
            SamplePlan(kind="rule", rules=(0, 0)),
            SamplePlan(kind="both", rules=(2, 1)),
        ),
        eval_runs=3,
        fail_fast=True,
        min_section_tokens=0,
        mode="strict",
        inflight=16,
        processes=1,
    )
    spec, edits = build(sc)
    gate = {"mode": "paired", "max_runs": 5, "protect": ["s0", "s2"], "min_baseline_pass_rate": 0.0}
    spec = CompressSpec.model_validate({**spec.model_dump(), "gate": gate})
    run = run_job(spec, model(sc), edits, inflight=sc.inflight, processes=sc.processes)
    assert isinstance(run.outcome, OptimizationReport), run.outcome
    assert [s.name for s in run.steps] == ["baseline", "candidates", "candidates-2"]
    (p2,) = [r for r in run.outcome.rejected if r.section_path == ("p2",)]
    assert p2.reason.startswith("fail-fast: a protected sample failed")
