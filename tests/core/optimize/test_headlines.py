"""Honest headlines (issue 28): on a no-effect grid over a seed in noise mode, the summary box, the
jobs list and the history lead with the selection's own estimate; a score as evaluated (the
winner's curse inflates it) appears only below it, labelled as such."""

from __future__ import annotations

from typing import Any

import pytest

from optiflow.core.actions import Finish
from optiflow.core.optimize.output import summary_box
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.core.outcome import outcome_of
from optiflow.llm.noise import unit

from .conftest import spec_of
from .harness import Bodies, Params, run_optimize


def _job(answer: Any, **changes: Any) -> OptimizationHistory:
    spec = spec_of(
        treatment={"model_params": ["sim_seed"]},
        model={"model": "optiflow/sim", "params": {"sim_seed": 0}},
        optimizer={"type": "grid", "space": {"sim_seed": list(range(1, 7))}},
        max_candidates_per_step=3,
        acceptance={"test": "auto", "max_runs": 8},
        **changes,
    )
    action = run_optimize(spec, answer, max_steps=10_000).action
    assert isinstance(action, Finish) and isinstance(action.report, OptimizationHistory)
    return action.report


def _noise(job: int, gain_seed: int | None = None) -> Any:
    """Every sample passes with its own probability; each sim_seed draws its runs independently;
    ``gain_seed`` (if any) passes every sample."""

    def answer(bodies: Bodies, params: Params, sid: str, run: int) -> bool:
        seed = params.get("sim_seed", 0)  # the baseline's target carries no param change
        if gain_seed is not None and seed == gain_seed:
            return True
        return unit(job, seed, sid, run) < unit(job, "p", sid)

    return answer


def _assert_honest(h: OptimizationHistory) -> None:
    lines = summary_box(h).splitlines()
    gain = next(i for i, line in enumerate(lines) if "Gain:" in line)
    for i, line in enumerate(lines):
        if "→" in line:
            assert i > gain and "Raw" in line, f"a score line above the estimate or unlabelled: {line}"
    assert h.headline == h.headline_text() and "→" not in h.headline
    listed = outcome_of({"report": h.model_dump(mode="json")})
    assert listed is not None and listed["text"] == h.headline


@pytest.mark.parametrize("job", [1, 2, 3, 4])
def test_no_single_run_headline_above_the_paired_estimate(job: int) -> None:
    h = _job(_noise(job))
    assert h.acceptance_rule == "paired"
    _assert_honest(h)


def test_a_real_gain_is_headlined_by_its_paired_interval() -> None:
    h = _job(_noise(7, gain_seed=2))
    assert h.best_model_params == {"sim_seed": 2}
    _assert_honest(h)
    best = h.trial(h.best_candidate_id)
    assert best is not None and best.selection is not None
    assert h.headline.startswith("in-sample gain +") and "] (paired)" in h.headline
