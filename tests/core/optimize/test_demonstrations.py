"""The demonstrations optimizer: k labeled train examples into a section, random and bootstrapped,
never a validation or test sample."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from optiflow.core.actions import Finish
from optiflow.core.dataset import Dataset, Sample
from optiflow.core.optimize.configuration import config_sections
from optiflow.core.optimize.demonstrations import demonstration_ids
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.core.prompt import Prompt, Section

from .conftest import spec_of
from .harness import Bodies, Params, run_optimize

PROMPT = Prompt(
    ns="t",
    key="demo",
    sections=(
        Section(path=("task",), body="Label the review.", frozen=True),
        Section(path=("examples",), body=""),
    ),
    user="${question}",
)
SAMPLES = tuple(
    Sample(
        id=f"{split}{i}", input={"question": f"review-{split}-{i}"}, expected=f"label-{i % 2}", split=split
    )  # type: ignore[arg-type]
    for split, n in (("train", 12), ("val", 6), ("test", 6))
    for i in range(n)
)
TRAIN = [s for s in SAMPLES if s.split == "train"]


def spec(**changes: Any) -> Any:
    data: dict[str, Any] = {
        "prompt": PROMPT,
        "dataset": Dataset(name="reviews", samples=SAMPLES),
        "treatment": {"sections": ["examples"]},
        "optimizer": {"type": "demonstrations", "section": "examples", "k": 3, "candidates": 6},
        "splits": True,
        "acceptance": {"test": "none"},
        "max_candidates_per_step": 2,
        "termination": {"max_iterations": 10},
    }
    data.update(changes)
    return spec_of(**data)


def by_shots(bodies: Bodies, params: Params, sid: str, run: int) -> bool:
    """More demonstrations of even-numbered train samples: more samples pass (deterministic)."""
    shown = demonstration_ids(bodies[("examples",)], TRAIN)
    return int(sid[-1]) < 1 + sum(1 for s in shown if int(s[-1]) % 2 == 0)


def test_candidates_show_only_train_samples_random_and_bootstrapped() -> None:
    run = run_optimize(spec(), by_shots)
    assert isinstance(run.action, Finish) and isinstance(run.action.report, OptimizationHistory)
    h = run.action.report
    candidates = [t for t in h.trials if t.candidate_id != "c0"]
    assert len(candidates) == 6
    held_out = [s for s in SAMPLES if s.split != "train"]
    for t in candidates:
        body = config_sections(t.configuration)[("examples",)]
        assert body.startswith("Examples:") and body.count("Input: ") == 3
        assert demonstration_ids(body, held_out) == []  # never a val or test sample
        assert all(f"review-{s.split}-" not in body for s in held_out)
        assert len(demonstration_ids(body, TRAIN)) == 3
    kinds = [str(t.rationale).split(" demonstrations")[0] for t in candidates]
    assert "random" in kinds and "bootstrapped (passed by the best)" in kinds
    # a bootstrapped subset holds train samples the best it was built from passed in every run
    for t in candidates:
        if str(t.rationale).startswith("bootstrapped"):
            best = h.trial(h.iterations[t.iteration - 1].best_candidate_so_far)
            assert best is not None
            shown = demonstration_ids(config_sections(t.configuration)[("examples",)], TRAIN)
            assert not set(shown) & {f.sample_id for f in best.failing}


def test_demonstrations_need_splits_and_a_treatment_section() -> None:
    with pytest.raises(ValidationError, match="needs splits: true"):
        spec(splits=False)
    with pytest.raises(ValidationError, match="not in the treatment"):
        spec(optimizer={"type": "demonstrations", "section": "task"})
