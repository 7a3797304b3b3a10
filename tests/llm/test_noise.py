"""The simulated model's noise mode: seeded per-sample pass probabilities, independent runs."""

from __future__ import annotations

from statistics import mean

import pytest

from optiflow.llm.noise import SMOLLM2_LIKE, parse_pass_dist, pass_probability, passes, prompt_digest
from optiflow.llm.simulated import GENERIC_ANSWER, SimulatedError, SimulatedModel

RULES = (
    "When a customer asks about refunds, reply with code RFD-201. "
    "When a customer asks about shipping delays, reply with code SHP-404."
)
FILLER = "We value every customer and answer with care."
SIM = SimulatedModel()


def answer(system: str, user: str, sample: str, run: int, **params: object) -> str:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    params = {"sim_pass_dist": "beta(3.3,3.3)", "sim_seed": 5, **params}
    return SIM.reply(messages, params, {"sample_id": sample, "run": run}, sleep=False).text


def right(text: str) -> bool:
    return "RFD-201" in text


def test_distribution_parsing_and_errors() -> None:
    mix = parse_pass_dist("0.9*beta(3.3,3.3) + 0.1*fixed(1)")
    assert [(c.kind, c.params) for c in mix] == [("beta", (3.3, 3.3)), ("fixed", (1.0,))]
    assert sum(c.weight for c in mix) == pytest.approx(1.0)
    for bad, msg in [
        ("gamma(1)", "is not beta"),
        ("beta(1)", "two positive shapes"),
        ("fixed(2)", r"in \[0, 1\]"),
    ]:
        with pytest.raises(ValueError, match=msg):
            parse_pass_dist(bad)


def test_pass_probabilities_are_seeded_and_spread_like_smollm2() -> None:
    probs = [pass_probability(SMOLLM2_LIKE, 1, f"s{i}") for i in range(2000)]
    assert probs[:5] == [pass_probability(SMOLLM2_LIKE, 1, f"s{i}") for i in range(5)]
    assert probs[:5] != [pass_probability(SMOLLM2_LIKE, 2, f"s{i}") for i in range(5)]
    assert mean(probs) == pytest.approx(0.5, abs=0.02)
    spread = mean((p - 0.5) ** 2 for p in probs) ** 0.5
    assert spread == pytest.approx(0.18, abs=0.02)
    # like the measured SmolLM2 set: in 9 runs almost every sample is flaky
    unflaky = mean(p**9 + (1 - p) ** 9 for p in probs)
    assert 0.02 < unflaky < 0.1
    assert pass_probability("fixed(1)", 1, "x") == 1.0


def test_runs_are_independent_across_prompts_and_repeat_for_the_same_prompt() -> None:
    a, b = prompt_digest("prompt A"), prompt_digest("prompt A, reworded")
    same = mean(passes(0.5, 0, a, "s", run) == passes(0.5, 0, a, "s", run) for run in range(2000))
    other = mean(passes(0.5, 0, a, "s", run) == passes(0.5, 0, b, "s", run) for run in range(2000))
    assert same == 1.0
    assert other == pytest.approx(0.5, abs=0.05)


def test_provider_answers_right_with_the_sample_probability() -> None:
    p = pass_probability("beta(3.3,3.3)", 5, "q1")
    hits = [right(answer(RULES, "Where are my refunds?", "q1", run)) for run in range(600)]
    assert mean(hits) == pytest.approx(p, abs=0.07)
    assert 0 < mean(hits) < 1
    assert not all(t == hits[0] for t in hits)


def test_provider_is_deterministic_and_a_no_op_edit_draws_anew() -> None:
    user = "Where are my refunds?"
    base = [right(answer(RULES + " " + FILLER, user, "q1", run)) for run in range(200)]
    assert base == [right(answer(RULES + " " + FILLER, user, "q1", run)) for run in range(200)]
    reworded = [right(answer(RULES + " We care.", user, "q1", run)) for run in range(200)]
    assert reworded != base  # independent draws, not the same flips (unlike sim_noise)
    assert mean(reworded) == pytest.approx(mean(base), abs=0.15)


def test_a_removed_instruction_fails_every_run() -> None:
    without = "When a customer asks about shipping delays, reply with code SHP-404."
    assert all(answer(without, "Where are my refunds?", "q1", run) == GENERIC_ANSWER for run in range(50))


def test_unknown_distribution_is_a_bad_request() -> None:
    with pytest.raises(SimulatedError, match="sim_pass_dist"):
        answer(RULES, "refunds?", "q1", 0, sim_pass_dist="normal(0,1)")
