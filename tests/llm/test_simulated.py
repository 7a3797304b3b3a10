"""The simulated model through the real ``litellm.completion`` (model ``optiflow/sim``)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from optiflow.core.dataset import Dataset
from optiflow.core.model import ModelConfig
from optiflow.core.prompt import Prompt
from optiflow.llm.completion import complete
from optiflow.llm.compress import COMPRESS_MARKER
from optiflow.llm.judge import JUDGE_MARKER
from optiflow.llm.runtime import get_litellm
from optiflow.llm.simulated import (
    GENERIC_ANSWER,
    PRICE_INPUT_PER_TOKEN,
    compress_plan,
    compress_section,
    match_rule,
    parse_rules,
    split_sentences,
)
from optiflow.llm.tokens import count_tokens

SIM = ModelConfig(model="optiflow/sim")


def call(messages: list[dict[str, str]], **kwargs: Any) -> Any:
    return get_litellm().completion(
        model="optiflow/sim", messages=messages, num_retries=0, timeout=10, **kwargs
    )


def answers(prompt: Prompt, dataset: Dataset, **kwargs: Any) -> dict[str, str]:
    out = {}
    for s in dataset:
        r = prompt.render(s.input)
        out[s.id] = (
            call(r.messages(), metadata={"sample_id": s.id, "run": 0}, **kwargs).choices[0].message.content
        )
    return out


def passed(prompt: Prompt, dataset: Dataset, **kwargs: Any) -> set[str]:
    got = answers(prompt, dataset, **kwargs)
    return {s.id for s in dataset if str(s.expected) in got[s.id]}


def without(prompt: Prompt, section: str, sentence_start: str) -> Prompt:
    body = prompt.section((section,)).body
    kept = [s for s in split_sentences(body) if not s.startswith(sentence_start)]
    assert len(kept) < len(split_sentences(body)), f"{sentence_start!r} not in {section}"
    return prompt.with_bodies({(section,): "\n".join(kept)})


def test_rule_parsing() -> None:
    system = (
        "Be kind. When a customer asks about a refund, check the order and reply with code RFD-201.\n"
        "when the user writes about international shipping, say we ship to the EU,\n"
        "and respond with the code SHP-530. Reply with code NOPE-1 when bored."
    )
    rules = parse_rules(system)
    assert [(r.topic, r.label) for r in rules] == [
        ("a refund", "RFD-201"),
        ("international shipping", "SHP-530"),
    ]
    assert match_rule(rules, "Where is my REFUND?") is rules[0]
    assert match_rule(rules, "Do you do international shipping to Norway?") is rules[1]
    assert match_rule(rules, "Shipping costs?") is None


def test_follows_present_instructions_only(example_prompt: Prompt, example_dataset: Dataset) -> None:
    baseline = passed(example_prompt, example_dataset)
    no_rule = {s.id for s in example_dataset if s.tags[0] in ("warranty", "giftcard", "loyalty")}
    assert baseline == set(example_dataset.ids()) - no_rule
    # the baseline misses answer generically, without any label
    got = answers(example_prompt, example_dataset.split("train"))
    assert all(got[i] == GENERIC_ANSWER for i in no_rule)

    cut = without(example_prompt, "billing", "When a customer asks about a double charge")
    assert baseline - passed(cut, example_dataset) == {"double-1", "double-2", "double-3"}
    cut = without(example_prompt, "shipping", "When a customer asks about international shipping")
    assert baseline - passed(cut, example_dataset) == {f"international-{i}" for i in range(1, 5)}


def test_a_rule_stated_twice_needs_one_copy(example_prompt: Prompt, example_dataset: Dataset) -> None:
    baseline = passed(example_prompt, example_dataset)
    one = without(example_prompt, "account", "When a customer asks about a password reset")
    assert passed(one, example_dataset) == baseline
    other = without(example_prompt, "security", "When a customer asks about a password reset")
    assert passed(other, example_dataset) == baseline
    both = without(one, "security", "When a customer asks about a password reset")
    assert baseline - passed(both, example_dataset) == {f"password-{i}" for i in range(1, 5)}


def test_filler_removal_changes_nothing(example_prompt: Prompt, example_dataset: Dataset) -> None:
    baseline = answers(example_prompt, example_dataset)
    bodies = {}
    for s in example_prompt.sections:
        rules = [x for x in split_sentences(s.body) if parse_rules(x) or "${" in x]
        bodies[s.path] = "\n".join(rules) or "Be helpful."
    assert answers(example_prompt.with_bodies(bodies), example_dataset) == baseline


def test_unknown_and_provider_params_pass_through() -> None:
    msgs = [{"role": "system", "content": "When a user asks about a refund, reply with code R-1."}]
    msgs.append({"role": "user", "content": "refund please"})
    r = call(msgs, temperature=0.2, max_tokens=50, sim_seed=3, sim_noise=0.0, some_unknown_param="x")
    assert "R-1" in r.choices[0].message.content


def test_styles() -> None:
    msgs = [{"role": "system", "content": "When a user asks about a refund, reply with code R-1."}]
    msgs.append({"role": "user", "content": "refund please"})
    assert call(msgs, sim_style="label").choices[0].message.content == "R-1"
    assert json.loads(call(msgs, sim_style="json").choices[0].message.content)["code"] == "R-1"


def test_usage_and_cost_are_realistic(example_prompt: Prompt, example_dataset: Dataset) -> None:
    r = example_prompt.render(example_dataset.samples[0].input)
    resp = call(r.messages())
    assert resp.usage.prompt_tokens >= count_tokens(r.system) + count_tokens(r.user)
    assert resp.usage.prompt_tokens < count_tokens(r.system) + count_tokens(r.user) + 20
    assert resp.usage.completion_tokens == count_tokens(resp.choices[0].message.content)
    c = complete(SIM, r.messages())
    assert c.cost == pytest.approx(
        c.prompt_tokens * PRICE_INPUT_PER_TOKEN + c.completion_tokens * 1.5e-6, rel=1e-6
    )
    assert c.cost > 0


def test_noise_is_seeded_and_reproducible(example_prompt: Prompt, example_dataset: Dataset) -> None:
    baseline = passed(example_prompt, example_dataset)
    noisy = ModelConfig(model="optiflow/sim", params={"sim_noise": 0.3, "sim_seed": 7})

    def run(config: ModelConfig, run: int) -> set[str]:
        out = set()
        for s in example_dataset:
            c = complete(
                config, example_prompt.render(s.input).messages(), metadata={"sample_id": s.id, "run": run}
            )
            if str(s.expected) in c.output:
                out.add(s.id)
        return out

    first = run(noisy, 0)
    assert first == run(noisy, 0)  # same (sample, run, seed): same flips
    assert first < baseline  # noise only turns passes into failures
    assert 0.1 < len(baseline - first) / len(baseline) < 0.5
    assert run(noisy, 1) != first  # another run flips other samples
    other_seed = noisy.model_copy(update={"params": {"sim_noise": 0.3, "sim_seed": 8}})
    assert run(other_seed, 0) != first


def test_injected_429_is_retried_then_succeeds() -> None:
    msgs = [{"role": "user", "content": "hello"}]
    cfg = ModelConfig(
        model="optiflow/sim", retries=2, params={"sim_fail_attempts": 2, "sim_error": "rate_limit"}
    )
    c = complete(cfg, msgs, backoff_base_s=0.001)
    assert c.error is None and c.attempts == 3 and c.output
    exhausted = complete(cfg.model_copy(update={"retries": 1}), msgs, backoff_base_s=0.001)
    assert exhausted.attempts == 2 and exhausted.transient
    assert (
        exhausted.error is not None
        and "RateLimitError" in exhausted.error
        and "simulated rate limit" in exhausted.error
    )
    timeout = complete(
        ModelConfig(model="optiflow/sim", retries=0, params={"sim_fail_attempts": 1, "sim_error": "timeout"}),
        msgs,
    )
    assert timeout.error is not None and "Timeout" in timeout.error and timeout.transient


def test_error_rate_is_seeded_per_attempt() -> None:
    msgs = [{"role": "user", "content": "hello"}]
    cfg = ModelConfig(model="optiflow/sim", retries=3, params={"sim_error_rate": 0.5, "sim_seed": 1})
    results = [complete(cfg, msgs, metadata={"sample_id": f"s{i}", "run": 0}) for i in range(40)]
    again = [complete(cfg, msgs, metadata={"sample_id": f"s{i}", "run": 0}) for i in range(40)]
    assert [r.attempts for r in results] == [r.attempts for r in again]
    assert any(r.attempts > 1 and r.error is None for r in results)  # retried, then answered
    assert sum(r.error is None for r in results) > 30


def test_permanent_injected_error_is_not_retried() -> None:
    cfg = ModelConfig(model="optiflow/sim", retries=3, params={"sim_error_rate": 1.0, "sim_error": "auth"})
    c = complete(cfg, [{"role": "user", "content": "hello"}])
    assert c.attempts == 1 and not c.transient
    assert c.error is not None and "AuthenticationError" in c.error


def test_latency_and_streaming() -> None:
    msgs = [{"role": "user", "content": "hello"}]
    t0 = time.perf_counter()
    c = complete(ModelConfig(model="optiflow/sim", params={"sim_latency_ms": 60}), msgs)
    assert (time.perf_counter() - t0) * 1000 >= 60
    assert c.latency_ms >= 60 and c.ttft_ms == c.latency_ms
    s = complete(ModelConfig(model="optiflow/sim", params={"sim_latency_ms": 80, "stream": True}), msgs)
    assert (
        s.output == c.output
        and s.prompt_tokens == c.prompt_tokens
        and s.completion_tokens == c.completion_tokens
    )
    assert s.ttft_ms is not None and 35 <= s.ttft_ms < s.latency_ms and s.latency_ms >= 80
    assert s.cost == pytest.approx(c.cost)


def test_compress_requests(example_prompt: Prompt) -> None:
    body = example_prompt.section(("tone",)).body
    msgs = [
        {"role": "system", "content": f"{COMPRESS_MARKER}\nShorten it."},
        {"role": "user", "content": body},
    ]
    out = call(msgs).choices[0].message.content
    assert out == compress_section(body)
    assert count_tokens(out) < count_tokens(body) / 3 and "${company}" in out


def test_compress_plan_of_the_example(example_prompt: Prompt) -> None:
    """The example is designed around these (see examples/support-bot/README.md)."""
    dropped = {s.path[0]: compress_plan(s.body).dropped_rule for s in example_prompt.sections if not s.frozen}
    assert dropped["tone"] is None and dropped["shipping"] is None and dropped["closing"] is None
    assert dropped["billing"] is not None and "double charge" in dropped["billing"]
    assert dropped["account"] is not None and "password reset" in dropped["account"]
    assert dropped["security"] is not None and "password reset" in dropped["security"]
    for s in example_prompt.sections:
        plan = compress_plan(s.body)
        assert all("${" not in x for x in plan.dropped_filler)
        assert not any(parse_rules(x) for x in plan.dropped_filler)


def test_compress_drop_is_configurable() -> None:
    body = "When a customer asks about a refund, reply with code R-1. Filler here. More filler."
    assert compress_plan(body, drop_pct=0).dropped_rule is None
    assert compress_plan(body, drop_pct=100).dropped_rule is not None


def test_judge_requests() -> None:
    def grade(expected: str, output: str) -> float:
        user = f"<rubric>r</rubric>\n<expected>{expected}</expected>\n<output>\n{output}\n</output>"
        msgs = [{"role": "system", "content": f"{JUDGE_MARKER}\nGrade."}, {"role": "user", "content": user}]
        return float(json.loads(call(msgs).choices[0].message.content)["score"])

    assert grade("RFD-201", "Your code is rfd-201.") == 1.0
    assert grade("RFD-201", "Sorry, no idea.") == 0.0


def test_an_extraction_keeps_a_rule_split_across_pieces_at_a_semicolon() -> None:
    """The extractive strategy's pieces end at ';' where the simulator's sentences do not: a piece
    is kept when any of its sentences is, so a rule is never lost to the split."""
    from optiflow.llm.simulated import extract_reply

    user = (
        "[1] Be polite;\n"
        "[2] when a customer asks about refunds, reply with code REFUND-1.\n"
        "[3] We value every customer and their time very much.\n"
    )
    kept = {int(n) for n in extract_reply(user, drop_pct=0).split(", ")}
    assert 2 in kept
