"""The faithfulness check on its labelled suite (issue 23): accuracy, and the threshold's evidence."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from optiflow.core import faithfulness as F
from optiflow.core.compress.spec import CompressSpec
from optiflow.jobfile import load_job

from .faithfulness_suite import PAIRS, Pair

ROOT = Path(__file__).resolve().parents[2]
OBSERVED_KINDS = ("observed", "answer", "chat")  # an answer, a label, a greeting in place of a section


@cache
def job(example: str) -> tuple[CompressSpec, F.FaithfulnessContext]:
    spec = load_job(ROOT / "examples" / example / "job.yaml")
    assert isinstance(spec, CompressSpec)
    ctx = F.context_for(
        [s.body for s in spec.prompt.sections],
        [s.input for s in spec.dataset.samples],
        [s.expected for s in spec.dataset.samples],
    )
    return spec, ctx


def verdict(p: Pair, threshold: float = F.SUPPORT_THRESHOLD) -> F.Faithfulness:
    spec, ctx = job(p.example)
    return F.check(spec.prompt.section((p.section,)).body, p.proposal, ctx, threshold)


def accuracy(threshold: float = F.SUPPORT_THRESHOLD) -> float:
    return sum(verdict(p, threshold).faithful == p.faithful for p in PAIRS) / len(PAIRS)


def test_the_suite_is_large_and_holds_the_required_kinds() -> None:
    assert len(PAIRS) >= 40
    kinds = {p.kind for p in PAIRS}
    assert {"observed", "extreme", "paraphrase", "dropped examples"} <= kinds
    proposals = {p.proposal for p in PAIRS}
    assert {
        "The sentiment of this review is positive.",
        "I'm ready to help. What's your next question?",
        "I'm ready to help. What's your task?",
        "Answer with one word: positive, negative or neutral.",
    } <= proposals


def test_accuracy_on_the_labelled_suite_is_at_least_90_percent() -> None:
    acc = accuracy()
    wrong = [(p.kind, p.section, p.proposal[:60]) for p in PAIRS if verdict(p).faithful != p.faithful]
    print(f"\nfaithfulness check: accuracy {acc:.1%} on {len(PAIRS)} labelled pairs; wrong: {wrong}")
    assert acc >= 0.90, wrong


def test_no_unfaithful_pair_of_the_observed_kinds_passes() -> None:
    passing = [
        p.proposal for p in PAIRS if p.kind in OBSERVED_KINDS and not p.faithful and verdict(p).faithful
    ]
    assert passing == []
    assert all(verdict(p).reason for p in PAIRS if p.kind == "observed")


def test_the_threshold_is_where_the_suite_puts_it() -> None:
    """Support decides only pairs that pass the other rules: the threshold lies between the
    faithful pairs' lowest support and the highest of the unfaithful ones it alone refuses."""
    loose = [verdict(p, threshold=0.0) for p in PAIRS]
    faithful_min = min(v.support for v, p in zip(loose, PAIRS, strict=True) if p.faithful)
    caught = [v.support for v, p in zip(loose, PAIRS, strict=True) if not p.faithful and v.faithful]
    only_support = [s for s in caught if s < faithful_min]
    print(f"\nsupport: faithful >= {faithful_min:.2f}; unfaithful left to support <= {max(only_support):.2f}")
    assert max(only_support) < F.SUPPORT_THRESHOLD <= faithful_min
    assert accuracy() >= max(accuracy(t) for t in (0.3, 0.45, 0.65, 0.75, 0.85))


def test_the_reasons_name_what_was_wrong() -> None:
    spec, ctx = job("review-sentiment")
    output = spec.prompt.section(("output",)).body
    r = F.check(output, "The sentiment of this review is positive.", ctx)
    assert (
        r.reason == "states the answer 'positive' where the original listed 2 labels ('negative', 'positive')"
    )
    r = F.check(spec.prompt.section(("task",)).body, "I'm ready to help. What's your next question?", ctx)
    assert r.reason.startswith("reads as a chat reply, not an instruction: an offer of help")
    r = F.check("Summarize the text.", "Answer positive.", ctx)
    assert r.reason == "states the answer 'positive', which the original did not state"
    assert F.check(output, output, ctx).faithful and F.check(output, output, ctx).coverage == 1.0


def test_labels_are_a_small_set_of_short_expected_strings() -> None:
    assert F.labels_of(["positive", "negative", "positive"]) == ("negative", "positive")
    assert F.labels_of(["positive"]) == ()  # one value is no choice
    assert F.labels_of([{"code": "A"}, 3, None, "a very long expected answer of many words"]) == ()
    assert F.labels_of([f"L{i}" for i in range(F.MAX_LABELS + 1)]) == ()
