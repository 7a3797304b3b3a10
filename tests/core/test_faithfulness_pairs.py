"""The faithfulness check on its labelled suite of issue 31: accuracy and the confusion table on
every set, printed. The sets, in the order they were written:

- ``tune`` (65) and ``held-out`` (95), ``faithfulness_pairs.jsonl``: written alongside the check;
  held-out gave 86.3% on its first run, then the rules were corrected after reading both.
- ``held-out-2`` (39): written after the rules were frozen, committed before they ran: 79.5%.
- ``held-out-3`` (60), ``held-out-4`` (70), ``held-out-5`` (80), ``held-out-6`` (90) and
  ``held-out-7`` (100; -6 and -7 half honest, half meaning changes), the last four in new domains:
  each written and labelled by a session that never read the check (nor, from -4 on, the earlier
  pairs), committed before the check first ran on it. Their first runs are each round's
  independent estimate: held-out-3 80.0% on the check of 6168341; held-out-4 67.1% on the third
  round's check; held-out-5 72.5% on the fourth round's; held-out-6 62.2% on the fifth round's;
  held-out-7 66.0% on the sixth round's (30 of 50 honest accepted, 36 of 50 meaning changes
  refused).
- ``held-out-8`` (100, half honest, half meaning changes, new domains), written the same way after
  the sixth round: 61.0% on the sixth round's check (22 of 50 honest accepted, 39 of 50 meaning
  changes refused); 64.0% on the seventh round's (25 / 39), whose rules were corrected on
  held-out-7's errors only (ranges and units as quantities, "$500k", an arrow binding a condition
  to its code, "neither ... nor" one negation, a threshold matched by its number, merged sentences
  stating a number found by it). After each first run the rules were corrected on that set's
  errors too (held-out-8's: three, "else" for "if not", "$500,000" as "$500k", "degrees Celsius"),
  then on held-out-8's (db595e1: "may" -> "must", "unoccupied", "under code X", "no later than", a
  negation told in the next sentence, "10 m").
- ``held-out-9`` (100, half honest, half meaning changes, 100 new domains), written the same way,
  committed before any check ran on it: 61.0% on the sixth round's check (25 / 36), 63.0% on the
  seventh round's (26 / 37), 64.0% on db595e1's (27 of 50 honest accepted, 37 of 50 meaning changes
  refused). Then corrected on held-out-9's errors (9c87d04: arrows and mapping lines, an example's
  clauses and its arrow answer, a code spelled as a source word, an example's input unquoted).
- ``held-out-10`` (100, half honest, half meaning changes, 19 kinds), written by a session that
  never opened the repository, committed (0eab36d) before any check ran on it: 63.0% on the check
  this round started from (caa59c9), 65.0% on 9c87d04's (25 of 50 honest accepted, 40 of 50
  meaning changes refused), the last first run: no number printed here but that one is
  independent. Then corrected on held-out-10's errors too (a negated permission is a prohibition,
  "allowed only in X", units, ages, "if relevant", "after" for "before", opposites, one-word
  negations).
- ``held-out-11`` (100, half honest, half meaning changes, 28 kinds), written the same way,
  committed (5aacff1) before any check ran on it: 63.0% on caa59c9's check, 70.0% on 81e7884's
  (29 of 50 honest accepted, 41 of 50 meaning changes refused), the last first run. Then
  corrected on its errors (a sentence whose words one proposal sentence states is merged there;
  "no more than" a bound; "Min age"; "two times" for "twice"; "accept" for "decline").
- ``held-out-12`` (100, half honest, half meaning changes, 28 kinds), written the same way,
  committed (6b1ce58) before any check ran on it: 61.0% on caa59c9's check, 64.0% on
  5f78f51's (25 of 50 honest accepted, 39 of 50 meaning changes refused). Then corrected on its
  errors (units, "hold off on", a limit keeping a permission, "only within" for "not after",
  "annual" for "per year").
- ``held-out-13`` (100, half honest, half meaning changes, 28 kinds), written the same way,
  committed (e291e27) before any check ran on it: 63.0% on caa59c9's check, 69.0% on 00ad374's
  (30 of 50 honest accepted, 39 of 50 meaning changes refused), the last first run: the number
  printed here is that independent one.

Labels follow issue 31's rules, which the default check enforces: three pairs of the first suite
were relabelled to them after the second round (#72 drops a sentence stating a number, #82 drops
the scope "that cannot be delivered", #108 drops a placeholder). The issue's targets (>= 95%
accuracy, no meaning-changing pair of the listed kinds accepted, >= 90% of honest compressions
accepted) are not met on pairs the rules were not shaped on: ``test_the_issues_targets`` says so as
an expected failure, and the floors below keep what was reached.
"""

from __future__ import annotations

from collections import Counter

import pytest

from optiflow.core import faithfulness as F

from .faithfulness_pairs import Pair, accuracy, confusion, pairs, table, verdict

PAIRS = pairs()
TUNE = tuple(p for p in PAIRS if p.split == "tune")
HELD_OUT = tuple(p for p in PAIRS if p.split == "held-out")
HELD_OUT_2 = tuple(p for p in PAIRS if p.split == "held-out-2")
HELD_OUT_3 = tuple(p for p in PAIRS if p.split == "held-out-3")
HELD_OUT_4 = tuple(p for p in PAIRS if p.split == "held-out-4")
HELD_OUT_5 = tuple(p for p in PAIRS if p.split == "held-out-5")
HELD_OUT_6 = tuple(p for p in PAIRS if p.split == "held-out-6")
HELD_OUT_7 = tuple(p for p in PAIRS if p.split == "held-out-7")
HELD_OUT_8 = tuple(p for p in PAIRS if p.split == "held-out-8")
HELD_OUT_9 = tuple(p for p in PAIRS if p.split == "held-out-9")
HELD_OUT_10 = tuple(p for p in PAIRS if p.split == "held-out-10")
HELD_OUT_11 = tuple(p for p in PAIRS if p.split == "held-out-11")
HELD_OUT_12 = tuple(p for p in PAIRS if p.split == "held-out-12")
HELD_OUT_13 = tuple(p for p in PAIRS if p.split == "held-out-13")
ISSUE_KINDS = (
    "negation dropped",
    "negation added",
    "number changed",
    "code changed",
    "codes swapped",
    "unit changed",
    "labels swapped",
    "condition inverted",
    "prohibition inverted",
    "exception dropped",
    "scope dropped",
    "dropped rule",
    "dropped prohibition",
    "garbled",
    "answer",
    "chat",
    "preamble",
)


def _report(name: str, ps: tuple[Pair, ...]) -> Counter[str]:
    c = confusion(ps)
    wrong = [f"#{p.id} {p.kind}" for p in ps if verdict(p).faithful != p.faithful]
    print(f"\n{name}: {len(ps)} pairs, accuracy {accuracy(c):.1%}\n{table(c)}\nwrong: {', '.join(wrong)}")
    return c


def test_the_suite_is_large_and_holds_every_kind() -> None:
    assert len(PAIRS) >= 150
    kinds = {p.kind for p in PAIRS}
    assert set(ISSUE_KINDS) <= kinds, set(ISSUE_KINDS) - kinds
    assert {"honest", "extreme", "paraphrase", "dropped filler", "dropped example"} <= kinds
    first = [p for p in PAIRS if p.split in ("tune", "held-out")]
    real = [p for p in first if p.source.startswith(("real", "derived-real"))]
    assert len(first) >= 150 and len(real) >= 0.4 * len(first)
    assert {p.source for p in real} >= {"real-llm", "real-extractive"}
    assert 0.4 <= len(HELD_OUT) / len(first) <= 0.6


def test_accuracy_on_each_half() -> None:
    tune = _report("tune", TUNE)
    held = _report("held-out", HELD_OUT)
    fresh = _report("held-out-2 (written after the check was frozen)", HELD_OUT_2)
    third = _report("held-out-3 (written by a session that never read the check)", HELD_OUT_3)
    assert accuracy(fresh) >= 0.97
    fourth = _report("held-out-4 (new domains, written by a session that never read the check)", HELD_OUT_4)
    assert accuracy(third) >= 0.93
    fifth = _report("held-out-5 (new domains, written by a session that never read the check)", HELD_OUT_5)
    assert accuracy(fourth) >= 0.84
    sixth = _report("held-out-6 (18 new domains, written by a session that never read the check)", HELD_OUT_6)
    assert accuracy(fifth) >= 0.85
    seventh = _report(
        "held-out-7 (20 new domains, written by a session that never read the check)", HELD_OUT_7
    )
    eighth = _report("held-out-8 (new domains, written by a session that never read the check)", HELD_OUT_8)
    ninth = _report(
        "held-out-9 (100 new domains, written by a session that never read the check)", HELD_OUT_9
    )
    tenth = _report(
        "held-out-10 (19 kinds, written by a session that never opened the repository)", HELD_OUT_10
    )
    eleventh = _report(
        "held-out-11 (28 kinds, written by a session that never opened the repository)", HELD_OUT_11
    )
    twelfth = _report(
        "held-out-12 (28 kinds, written by a session that never opened the repository)", HELD_OUT_12
    )
    thirteenth = _report(
        "held-out-13 (28 kinds, written by a session that never opened the repository)", HELD_OUT_13
    )
    assert accuracy(sixth) >= 0.76
    assert accuracy(seventh) >= 0.85
    assert accuracy(eighth) >= 0.72
    assert accuracy(ninth) >= 0.73  # #962 was refused for a name it did not add ("PRs")
    assert accuracy(tenth) >= 0.76
    assert accuracy(eleventh) >= 0.77
    assert accuracy(twelfth) >= 0.68
    assert accuracy(thirteenth) >= 0.69
    assert accuracy(tune) >= 0.95
    assert accuracy(held) >= 0.94
    assert held["honest accepted"] / (held["honest accepted"] + held["honest refused"]) >= 0.90


def test_the_thresholds_are_where_the_tune_half_puts_them() -> None:
    best = max(accuracy(confusion(TUNE, t, s)) for t in (0.3, 0.45, 0.55, 0.65) for s in (0.0, 0.3, 0.5, 0.7))
    assert accuracy(confusion(TUNE)) == best


@pytest.mark.xfail(strict=True, reason="issue 31's targets are not met yet: see the module docstring")
def test_the_issues_targets() -> None:
    held = confusion(HELD_OUT)
    passed = [p.id for p in HELD_OUT if p.kind in ISSUE_KINDS and not p.faithful and verdict(p).faithful]
    assert accuracy(held) >= 0.95
    assert passed == []


def test_the_issues_four_examples_are_refused_naming_what_changed() -> None:
    by_note = {p.proposal: verdict(p) for p in PAIRS if p.source == "written-issue"}
    reasons = {k: v.reason for k, v in by_note.items()}
    assert not any(v.faithful for v in by_note.values())
    assert "negation 'not'" in reasons["Share order numbers in the reply."]
    assert "changes the number '14' to '4'" in reasons["Offer a refund within 4 days of delivery."]
    swapped = "Mentions of delays are positive; mentions of fast delivery are negative."
    assert reasons[swapped].startswith("swaps labels: 'delay' goes with 'positive'")
    inverted = reasons["Ask for the order number when the customer has given it."]
    assert "'only'" in inverted or "negation 'not' of 'given'" in inverted  # both were dropped
    assert reasons["Escalate chargebacks with code CHB-310."].startswith(
        "drops the rule 'Never promise a delivery date.'"
    )


def test_the_honest_paraphrase_is_accepted() -> None:
    original = (
        "Please note that it is very important that you never share the order number of a customer "
        "in your reply, for privacy reasons."
    )
    ctx = F.FaithfulnessContext(labels=("negative", "positive"))
    v = F.check(original, "Don't reveal customer order numbers in replies (privacy).", ctx)
    assert v.faithful, v.reason


def test_a_dropped_rule_is_allowed_by_the_job_and_listed() -> None:
    ctx = F.FaithfulnessContext(allow_dropped_rules=True)
    original = "Never promise a delivery date. Escalate chargebacks with code CHB-310."
    v = F.check(original, "Escalate chargebacks with code CHB-310.", ctx)
    assert v.faithful and v.dropped_rules == ("'Never promise a delivery date.' ('Never')",)
    assert "not verified by the dataset: 'Never promise a delivery date.' ('Never')" in v.map_lines()
    assert v.sentences is not None
    assert [o.status for o in v.sentences.original] == ["dropped", "kept"]
    assert v.sentences.proposal[0].sources == (1,)


def test_the_report_shows_the_sentence_map_of_an_accepted_edit() -> None:
    from optiflow.core.compress.output import edit_lines
    from optiflow.core.compress.report import Modification

    original = "We love our customers. Reply with code RFD-201 for refunds."
    proposal = "Reply RFD-201 for refunds."
    f = F.check(original, proposal, F.FaithfulnessContext())
    assert f.faithful
    m = Modification(
        section_path=("billing",),
        original_hash="h",
        proposed_body=proposal,
        token_reduction=5,
        baseline_pass_rate=1.0,
        candidate_pass_rate=1.0,
        original_body=original,
        faithfulness=f,
    )
    text = "\n".join(edit_lines(m))
    assert "dropped  o1: We love our customers." in text
    assert "p1 <- o2 (support 100%): Reply RFD-201 for refunds." in text


def test_a_dropped_rule_the_gate_saw_lose_something_is_not_unverified() -> None:
    """Issue 31: every dropped rule is listed as "not verified by the dataset" unless the gate saw
    the edit lose something: then the report says what it saw."""
    from optiflow.core.compress.output import edit_lines, seen_loss
    from optiflow.core.compress.report import Modification
    from optiflow.core.gate.decision import GateStats

    ctx = F.FaithfulnessContext(allow_dropped_rules=True)
    original = "Never promise a delivery date. Escalate chargebacks with code CHB-310."
    f = F.check(original, "Escalate chargebacks with code CHB-310.", ctx)

    def gate(regressed: tuple[str, ...], low: float) -> GateStats:
        return GateStats(
            gate="paired", gate_reason="", margin=0.1, alpha=0.05, beta=0.05, samples=20,
            baseline_pass_rate=0.9, candidate_pass_rate=0.85, drop=0.05, drop_low=low, drop_high=0.08,
            pairs=3, baseline_runs=60, candidate_runs=60, evidence_accept=20.0, evidence_reject=1.0,
            regressed=regressed, fixed=(),
        )  # fmt: skip

    def text(g: GateStats | None) -> str:
        m = Modification(
            section_path=("rules",), original_hash="h", proposed_body="x", token_reduction=5,
            baseline_pass_rate=0.9, candidate_pass_rate=0.85, gate=g, faithfulness=f,
        )  # fmt: skip
        return "\n".join(edit_lines(m))

    rule = "'Never promise a delivery date.' ('Never')"
    assert f"not verified by the dataset: {rule}" in text(None)
    assert f"not verified by the dataset: {rule}" in text(gate((), -0.01))
    lost = text(gate(("billing-3", "billing-7"), -0.01))
    assert (
        f"dropped, and the gate saw the edit lose 2 sample(s) it passed every time (billing-3, billing-7): {rule}"
        in lost
    )
    assert seen_loss(gate((), 0.02)) == "a drop of +5.0% (bounds +2.0% to +8.0%) within the margin"
