"""Issue 23 at the model seam: the faithfulness check with bounded retries, and the extractive
strategy (through the simulated model and with hand-made answers)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from optiflow.core.compress.extract import numbered, pieces, rebuild
from optiflow.core.faithfulness import context_for
from optiflow.core.model import ModelConfig
from optiflow.core.prompt import Prompt, Section
from optiflow.core.strategy import ExtractiveStrategySpec
from optiflow.llm import completion
from optiflow.llm.completion import Completion
from optiflow.llm.compress import LLMCompressStrategy, ProposalRefused, build_strategy
from optiflow.llm.extractive import ExtractiveCompressStrategy

SIM = ModelConfig(model="optiflow/sim")
OUTPUT = (
    'Answer in one short sentence that names the sentiment, for example "The sentiment of this\n'
    'review is positive." or "The sentiment of this review is negative." Do not add a greeting.'
)
PROMPT = Prompt(ns="t", key="k", sections=(Section(path=("output",), body=OUTPUT),))
CTX = context_for([OUTPUT], ["I love it", "It broke"], ["positive", "negative"])


def answers(monkeypatch: pytest.MonkeyPatch, outputs: Sequence[str]) -> list[list[dict[str, str]]]:
    """The model answers ``outputs`` in turn; returns the messages of every request."""
    seen: list[list[dict[str, str]]] = []
    it = iter(outputs)

    def fake(model: Any, messages: list[dict[str, str]], **kw: Any) -> Completion:
        seen.append(messages)
        return Completion(output=next(it))

    monkeypatch.setattr(completion, "complete", fake)
    return seen


def test_a_refused_proposal_is_asked_again_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = answers(
        monkeypatch,
        [
            "The sentiment of this review is positive.",
            "Name the sentiment: positive or negative. Do not add a greeting.",
        ],
    )
    p = LLMCompressStrategy(model=SIM).propose(PROMPT, PROMPT.sections[0], CTX)
    assert p.body == "Name the sentiment: positive or negative. Do not add a greeting."
    assert p.attempts == 2
    assert p.faithfulness is not None and p.faithfulness.faithful
    retry = seen[1][0]["content"]
    assert "refused: it states the answer 'positive' where the original listed 2 labels" in retry
    assert "The sentiment of this review is positive." in retry
    assert "refused" not in seen[0][0]["content"]


def test_every_attempt_refused_is_a_refusal_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = answers(monkeypatch, ["I'm ready to help. What's your next question?"] * 3)
    with pytest.raises(ProposalRefused) as err:
        LLMCompressStrategy(model=SIM, retries=2).propose(PROMPT, PROMPT.sections[0], CTX)
    assert len(seen) == 3  # bounded: one proposal and two retries
    assert err.value.attempts == 3 and err.value.body.startswith("I'm ready")
    assert err.value.reason.startswith("reads as a chat reply")
    assert str(err.value).startswith("refused after 3 proposal(s): reads as a chat reply")


def test_the_check_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    answers(monkeypatch, ["The sentiment of this review is positive."])
    strategy = build_strategy({"type": "llm", "model": {"model": "optiflow/sim"}, "faithfulness": False})
    p = strategy.propose(PROMPT, PROMPT.sections[0], CTX)
    assert p.body == "The sentiment of this review is positive." and p.faithfulness is None


def test_pieces_and_rebuild_keep_the_original_text() -> None:
    ps = pieces(OUTPUT)
    assert [p.text for p in ps] == [
        'Answer in one short sentence that names the sentiment, for example "The sentiment of this '
        'review is positive." or "The sentiment of this review is negative."',
        "Do not add a greeting.",
    ]
    assert rebuild(ps, [2]) == "Do not add a greeting."
    body = "Rules:\n- Be kind; be brief.\n- Use ${name}.\n\nFiller here. More filler."
    ps = pieces(body)
    assert numbered(ps).splitlines() == [
        "[1] Rules:",
        "[2] - Be kind;",
        "[3] be brief.",
        "[4] - Use ${name}.",
        "[5] Filler here.",
        "[6] More filler.",
    ]
    assert rebuild(ps, [1, 3]) == "Rules:\nbe brief.\n- Use ${name}."  # a placeholder is always kept


def test_extractive_strategy_rebuilds_from_the_pieces_the_model_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = answers(monkeypatch, ["Keep 2.", "nothing useful"])
    strategy = build_strategy(ExtractiveStrategySpec(model=SIM))
    assert isinstance(strategy, ExtractiveCompressStrategy)
    assert strategy.compress(PROMPT, PROMPT.sections[0]) == "Do not add a greeting."
    assert "[1] Answer in one short sentence" in seen[0][1]["content"]
    assert strategy.compress(PROMPT, PROMPT.sections[0]) == OUTPUT  # no number: unchanged


def test_extractive_strategy_offline_on_the_simulated_model(example_prompt: Prompt) -> None:
    strategy = ExtractiveCompressStrategy(model=SIM)
    for section in example_prompt.sections:
        out = strategy.compress(example_prompt, section)
        kept = {p.text for p in pieces(section.body)}
        assert all(p.text in kept for p in pieces(out))  # only the original's pieces
        assert out == strategy.compress(example_prompt, section)  # deterministic
        rules = " ".join(section.body.split()).count("reply with code")
        assert rules - 1 <= out.count("reply with code") <= rules  # the simulator drops at most one rule
    tone = example_prompt.section(("tone",))
    assert len(strategy.compress(example_prompt, tone)) < len(tone.body)
