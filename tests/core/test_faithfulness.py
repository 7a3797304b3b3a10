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
    """The issue-23 verdict: its pairs hold no dropped-rule decisions."""
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


def test_the_old_suite_under_the_new_rules() -> None:
    """The 49 pairs of issue 23 were labelled when coverage was not required: an extreme
    compression that dropped rules was faithful. Issue 31 refuses a dropped rule by default, so
    many of their honest labels now disagree by design; printed, with the floor reached."""
    acc = accuracy()
    print(f"\nissue 23's suite under issue 31's rules: {acc:.1%} of {len(PAIRS)}")
    assert acc >= 0.55


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
