"""What a finished measure does with drift: identity (what makes measures comparable), settle
(new reference or the next night), the text and exit code, and replay of a recorded history."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from optiflow.core import kinds
from optiflow.core.dataset import Dataset, Sample
from optiflow.core.drift.identity import identity
from optiflow.core.drift.output import headline, verdict
from optiflow.core.drift.replay import history_document, replay
from optiflow.core.drift.report import Night, Reference
from optiflow.core.drift.settle import first_run, settle
from optiflow.core.measure.report import Interval, MeasureDocument
from optiflow.core.measure.spec import MeasureSpec
from optiflow.core.overrides import SectionOverride
from optiflow.core.prompt import Prompt, Section

N = 30
T0 = datetime(2025, 1, 1, 2, 30, tzinfo=UTC)


def spec(**changes: object) -> MeasureSpec:
    base = MeasureSpec(
        prompt=Prompt(ns="support", key="bot", sections=(Section(path=("task",), body="Answer."),)),
        dataset=Dataset(samples=tuple(Sample(id=f"s{i:02d}", input=f"q{i}", expected="A") for i in range(N))),
        check={"type": "contains"},
        model={"model": "optiflow/sim", "params": {"sim_pass_dist": "beta(3.3,3.3)", "temperature": 0.7}},
        runs=3,
    )
    return MeasureSpec.model_validate({**base.model_dump(), **changes})


def document(
    s: MeasureSpec, outcomes: dict[str, str], job: str, at: datetime, first: int = 0
) -> MeasureDocument:
    passed = sum(o.count("1") for o in outcomes.values())
    made = sum(len(o) for o in outcomes.values())
    return MeasureDocument(
        job_id=job,
        name=s.name,
        prompt_ns="support",
        prompt_key="bot",
        tag=s.tag,
        model="optiflow/sim",
        runs=s.runs,
        samples=N,
        evaluations=made,
        passed=passed,
        errors=0,
        pass_rate=passed / made,
        wilson=Interval(lower=0, upper=1, confidence=0.95),
        measured_at=at,
        outcomes=outcomes,
        first_run=first,
    )


def outcomes(rng: random.Random, probs: list[float], runs: int) -> dict[str, str]:
    return {
        f"s{i:02d}": "".join("1" if rng.random() < p else "0" for _ in range(runs))
        for i, p in enumerate(probs)
    }


def test_identity_names_what_changed_and_ignores_the_simulators_knobs_and_credentials() -> None:
    a = identity(spec())
    sim = spec(model={"model": "optiflow/sim", "params": {"sim_pass_dist": "beta(1,1)", "temperature": 0.7}})
    assert identity(sim) == a  # the provider's behaviour behind the name: a drift to find
    keyed = spec(model={"model": "optiflow/sim", "params": {"temperature": 0.7, "api_key": "x"}})
    assert identity(keyed).model == a.model
    hotter = spec(model={"model": "optiflow/sim", "params": {"temperature": 1.0}})
    assert identity(hotter).differences(a) == ["the model"]
    applied = spec(
        baseline_overrides=(
            SectionOverride(
                path=("task",), expected_hash=spec().prompt.sections[0].hash, body="Answer briefly."
            ),
        )
    )
    assert identity(applied).differences(a) == ["the prompt"]
    assert identity(spec(check={"type": "exact"})).differences(a) == ["the check"]
    fewer = spec(dataset=Dataset(samples=spec().dataset.samples[:10]))
    assert identity(fewer).differences(a) == ["the dataset"]
    assert identity(applied).config == a.config != identity(hotter).config


def test_settle_starts_a_reference_then_numbers_the_nights_and_says_why_a_new_one_starts() -> None:
    rng = random.Random(1)
    probs = [rng.betavariate(3.3, 3.3) for _ in range(N)]
    s = spec()
    first = settle(
        s,
        document(s, outcomes(rng, probs, 12), "j0", T0),
        current=None,
        latest=None,
        nights=[],
        reference_id="r1",
    )
    assert first.report.status == "reference" and first.night is None
    assert "no reference for support/bot@stable" in first.report.reason
    ref = first.reference
    assert ref is not None and ref.next_run == 3  # runs 0..2 (this test's spec has 3 runs)
    assert "this measure is the reference from now on" in headline(first.report)
    nights: list[Night] = []
    for k in range(1, 4):
        start = first_run(ref, s)
        got = settle(
            s,
            document(s, outcomes(rng, probs, 3), f"j{k}", T0 + timedelta(days=k), start),
            current=ref,
            latest=ref,
            nights=nights,
            reference_id="unused",
        )
        assert got.night is not None and got.night.night == k and got.report.status == "compared"
        assert got.reference is not None and got.reference.next_run == start + 3
        ref, nights = got.reference, [*nights, got.night]
        assert headline(got.report).startswith("no drift shown (drop < ")
        assert verdict(got.report) is None
    # the prompt changed (an apply): a new reference, and the job says so
    changed = spec(
        baseline_overrides=(
            SectionOverride(
                path=("task",), expected_hash=s.prompt.sections[0].hash, body="Answer in one word."
            ),
        )
    )
    assert first_run(ref, changed) == 0
    got = settle(
        changed,
        document(changed, outcomes(rng, probs, 3), "j9", T0 + timedelta(days=9)),
        current=ref,
        latest=ref,
        nights=nights,
        reference_id="r2",
    )
    assert got.report.status == "reference" and got.reference is not None and got.reference.id == "r2"
    assert got.report.reason.startswith("the prompt changed since the reference of 2025-01-01 02:30")
    # another model: no reference of its own yet, and the model is named
    hotter = spec(model={"model": "optiflow/sim", "params": {"temperature": 1.0}})
    got = settle(
        hotter,
        document(hotter, outcomes(rng, probs, 3), "j10", T0),
        current=None,
        latest=ref,
        nights=[],
        reference_id="r3",
    )
    assert got.report.reason.startswith("the model changed since the reference")
    # drift off: nothing recorded
    off = spec(drift={"against": "none"})
    got = settle(
        off,
        document(off, outcomes(rng, probs, 3), "j11", T0),
        current=ref,
        latest=ref,
        nights=nights,
        reference_id="r4",
    )
    assert got.report.status == "off" and got.reference is None and got.night is None


def test_a_broken_provider_exits_4_and_the_floor_still_wins_as_3() -> None:
    rng = random.Random(2)
    probs = [rng.betavariate(3.3, 3.3) for _ in range(N)]
    s = spec()
    ref = settle(
        s,
        document(s, outcomes(rng, probs, 12), "j0", T0),
        current=None,
        latest=None,
        nights=[],
        reference_id="r1",
    ).reference
    assert ref is not None
    broken = [0.0 if i % 3 == 0 else p for i, p in enumerate(probs)]
    nights: list[Night] = []
    got = None
    for k in range(1, 6):
        doc = document(s, outcomes(rng, broken, 3), f"j{k}", T0 + timedelta(days=k))
        got = settle(s, doc, current=ref, latest=ref, nights=nights, reference_id="x")
        assert got.night is not None and got.reference is not None
        ref, nights = got.reference, [*nights, got.night]
        if got.report.drop_shown:
            break
    assert got is not None and got.report.drop_shown, [n.evidence.log_drop for n in nights]
    code, message = verdict(got.report) or (0, "")
    assert code == 4 and message.startswith("drift: \N{MINUS SIGN}") and "a drop shown tonight" in message
    doc = document(s, nights[-1].outcomes, "jx", T0).model_copy(update={"drift": got.report})
    assert kinds.verdict(doc) == (4, message)
    floor = doc.model_copy(update={"fail_below": 0.99})
    code, message = kinds.verdict(floor) or (0, "")
    assert code == 3 and "; and drift: " in message
    # replay re-decides every night from the history; a tampered decision is named
    history = history_document(ref, nights)
    assert replay(history).ok
    history["nights"][-1]["evidence"]["shown"] = "none"
    again = replay(history)
    assert (
        not again.ok and again.differences[0].field == "shown" and again.differences[0].night == len(nights)
    )
    with pytest.raises(ValueError, match="not a drift history"):
        replay({"kind": "optimize"})
    assert isinstance(Reference.model_validate(history["reference"]), Reference)
