"""Compression strategies: rule-based (pure) and LLM (through the simulated model)."""

from __future__ import annotations

import pickle

import pytest

from optiflow.core.compress.rules import compress_text
from optiflow.core.model import ModelConfig
from optiflow.core.prompt import Prompt, Section
from optiflow.core.strategy import LLMStrategySpec, RuleStrategySpec
from optiflow.errors import ModelProviderError, ValidationError
from optiflow.llm import completion
from optiflow.llm.completion import Completion
from optiflow.llm.compress import (
    COMPRESS_MARKER,
    CompressStrategy,
    LLMCompressStrategy,
    RuleCompressStrategy,
    build_strategy,
    clean_output,
    guard_placeholders,
)
from optiflow.llm.simulated import compress_section
from optiflow.llm.tokens import count_tokens

SIM = ModelConfig(model="optiflow/sim")


def test_rule_compression_is_pure_and_safe() -> None:
    body = (
        "Please note that we open at 9.  In order to help, ask for the ${company} order id.\n"
        "It is important to be kind. In order to help, ask for the ${company} order id.\n"
        "- Basically, answer fast.\n\n\n"
        "Due to the fact that stock is limited, we cannot hold items."
    )
    out = compress_text(body)
    assert out == (
        "We open at 9. To help, ask for the ${company} order id.\n"
        "Be kind.\n"
        "- Answer fast.\n\n"
        "Because stock is limited, we cannot hold items."
    )
    assert compress_text(out) == out  # idempotent
    assert compress_text("Just a rule.") == "Just a rule."


def test_rule_strategy_on_the_example(example_prompt: Prompt) -> None:
    strategy = RuleCompressStrategy()
    assert strategy.name == "rule" and isinstance(strategy, CompressStrategy)
    for section in example_prompt.sections:
        out = strategy.compress(example_prompt, section)
        assert count_tokens(out) <= count_tokens(section.body)
        assert out.count("reply with code") == section.body.count("reply with code")
    tone = example_prompt.section(("tone",))
    assert count_tokens(strategy.compress(example_prompt, tone)) < count_tokens(tone.body)


def test_llm_strategy_through_the_simulated_model(example_prompt: Prompt) -> None:
    strategy = LLMCompressStrategy(model=SIM)
    assert strategy.name == "llm:optiflow/sim" and isinstance(strategy, CompressStrategy)
    for name in ("tone", "billing", "shipping", "account", "security"):
        section = example_prompt.section((name,))
        out = strategy.compress(example_prompt, section)
        assert out == compress_section(section.body)
        assert count_tokens(out) < count_tokens(section.body) * 0.6
    tone = strategy.compress(example_prompt, example_prompt.section(("tone",)))
    assert "${company}" in tone


def test_llm_strategy_prompt(example_prompt: Prompt) -> None:
    msgs = LLMCompressStrategy(model=SIM).messages(example_prompt, example_prompt.section(("tone",)))
    system, user = msgs[0]["content"], msgs[1]["content"]
    assert system.startswith(COMPRESS_MARKER)
    assert "${company}" in system and "Return only the new section text" in system
    assert "keep every rule and instruction" in system
    assert user == example_prompt.section(("tone",)).body


def _fake(monkeypatch: pytest.MonkeyPatch, result: Completion) -> None:
    monkeypatch.setattr(completion, "complete", lambda *a, **k: result)


PROMPT = Prompt(
    ns="t", key="k", sections=(Section(path=("a",), body="Hello ${name}. Please note that we are nice."),)
)


def test_llm_output_losing_a_placeholder_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    section = PROMPT.sections[0]
    _fake(monkeypatch, Completion(output="Hello. We are nice."))
    assert LLMCompressStrategy(model=SIM).compress(PROMPT, section) == section.body
    _fake(monkeypatch, Completion(output="Hello ${name} ${extra}."))
    assert LLMCompressStrategy(model=SIM).compress(PROMPT, section) == section.body
    _fake(monkeypatch, Completion(output="```\nHello ${name}, we are nice.\n```"))
    assert LLMCompressStrategy(model=SIM).compress(PROMPT, section) == "Hello ${name}, we are nice."
    _fake(monkeypatch, Completion(output="   "))
    assert LLMCompressStrategy(model=SIM).compress(PROMPT, section) == section.body


def test_llm_provider_error_raises_with_the_message(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(monkeypatch, Completion(error="litellm.AuthenticationError: invalid key"))
    with pytest.raises(ModelProviderError, match="invalid key") as err:
        LLMCompressStrategy(model=SIM).compress(PROMPT, PROMPT.sections[0])
    assert "'a'" in str(err.value)


def test_llm_provider_error_through_litellm() -> None:
    broken = ModelConfig(
        model="optiflow/sim", retries=0, params={"sim_error": "rate_limit", "sim_error_rate": 1}
    )
    with pytest.raises(ModelProviderError, match="simulated rate limit"):
        LLMCompressStrategy(model=broken).compress(PROMPT, PROMPT.sections[0])


def test_guards() -> None:
    assert guard_placeholders("a ${x}", "b ${x}") == "b ${x}"
    assert guard_placeholders("a ${x}", "b") == "a ${x}"
    assert guard_placeholders("costs 5 euros", "costs $5") == "costs 5 euros"  # invalid template
    assert clean_output('"short text"') == "short text"
    assert clean_output("```markdown\nline one\nline two\n```") == "line one\nline two"


def test_build_strategy() -> None:
    assert isinstance(build_strategy(RuleStrategySpec()), RuleCompressStrategy)
    assert isinstance(build_strategy({"type": "rule"}), RuleCompressStrategy)
    llm = build_strategy({"type": "llm", "model": {"model": "optiflow/sim"}})
    assert isinstance(llm, LLMCompressStrategy) and llm.model == SIM
    assert build_strategy(LLMStrategySpec(model=SIM)) == llm
    pickle.loads(pickle.dumps(llm))  # cheap and plain, though tasks rebuild it from the spec
    with pytest.raises(ValidationError) as err:
        build_strategy({"type": "magic"})
    assert err.value.field is not None and err.value.field.startswith("strategy")
    with pytest.raises(ValidationError, match="model"):
        build_strategy({"type": "llm"})
