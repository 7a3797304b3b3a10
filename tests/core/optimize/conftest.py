"""A small prompt and dataset for the optimize tests: a frozen intro, two mutable sections."""

from __future__ import annotations

from typing import Any

import pytest

from optiflow.core.dataset import Dataset, Sample
from optiflow.core.optimize.spec import OptimizeSpec
from optiflow.core.prompt import Prompt, Section

PROMPT = Prompt(
    ns="t",
    key="p",
    sections=(
        Section(path=("intro",), body="You are a bot for ${company}.", frozen=True),
        Section(path=("rules",), body="rule_a"),
        Section(path=("style",), body="Be brief."),
    ),
    user="${question}",
)
SAMPLES = tuple(
    Sample(id=f"s{i}", input={"question": f"q{i}", "company": "Acme"}, expected="x", tags=("t",))
    for i in range(10)
)
DATASET = Dataset(name="ds", samples=SAMPLES)


def spec_of(**changes: Any) -> OptimizeSpec:
    data: dict[str, Any] = {
        "name": "uc",
        "experiment": "exp",
        "prompt": PROMPT,
        "dataset": DATASET,
        "check": {"type": "contains"},
        "model": {"model": "optiflow/sim", "params": {"temperature": 0.7}},
        "treatment": {"sections": ["rules"], "model_params": {"temperature": {"min": 0, "max": 2}}},
        "optimizer": {"type": "grid", "space": {"temperature": [0.0, 0.2, 0.7, 1.0]}},
        "max_candidates_per_step": 2,
        "termination": {"max_iterations": 10, "no_improvement": 3},
    }
    data.update(changes)
    return OptimizeSpec.model_validate(data)


@pytest.fixture
def spec() -> OptimizeSpec:
    return spec_of()


def rules_passing(body: str) -> int:
    """How many samples a ``rules`` body passes: the count of ``rule_`` words, capped at 10."""
    return min(10, body.count("rule_"))
