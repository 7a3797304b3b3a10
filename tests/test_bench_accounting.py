"""The bench's model-call accounting: what seed 000 spends for a report, and the fewest calls any
run can spend for it (the numbers bench/results.md is judged by)."""

from __future__ import annotations

import pytest

from bench.compress import EXAMPLE, fewest_calls, seed_calls
from optiflow.core.compress.report import Modification, OptimizationReport, RejectedModification
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.sections import parse_path
from optiflow.jobfile import load_job

UNIT = 44 * 3  # the example: 44 samples, eval_runs 3
GUARDED = 39  # samples that passed in every baseline run
G = GUARDED * 3


@pytest.fixture(scope="module")
def spec() -> CompressSpec:
    loaded = load_job(EXAMPLE)
    assert isinstance(loaded, CompressSpec)
    assert (len(loaded.dataset), loaded.eval_runs) == (44, 3)
    return loaded


def kept(path: str, reduction: int) -> Modification:
    return Modification(
        section_path=parse_path(path),
        original_hash="h",
        proposed_body="b",
        token_reduction=reduction,
        baseline_pass_rate=0.9,
        candidate_pass_rate=0.9,
    )


def dropped(path: str, reduction: int, stage: str = "candidate") -> RejectedModification:
    return RejectedModification(
        section_path=parse_path(path),
        token_reduction=reduction,
        regression_count=1,
        stage=stage,  # type: ignore[arg-type]
    )


def report(mods: list[Modification], rejected: list[RejectedModification]) -> OptimizationReport:
    return OptimizationReport(
        experiment_id="x",
        prompt_ns="support",
        prompt_key="bot",
        baseline_pass_rate=0.9,
        modifications=tuple(mods),
        rejected=tuple(rejected),
    )


@pytest.mark.parametrize(
    ("mods", "rejected", "seed", "fewest"),
    [
        # every candidate regresses: the baseline, then one call each
        ([], [dropped("a", 30), dropped("b", 20), dropped("c", 10)], UNIT * 4, UNIT + 3),
        # exactly one accepted: no combined step
        ([kept("a", 30)], [dropped("b", 20), dropped("c", 10)], UNIT * 4, UNIT * 2 + 2),
        # the combination passes: its guarded evaluations
        ([kept("a", 30), kept("b", 20), kept("c", 10)], [], UNIT * 5, UNIT * 4 + G),
        # the example's shape: greedy drops the smallest, whose set is the combination;
        # 881 of 1452 calls = 0.607x, above the 0.6x whatever a run does
        (
            [kept("a", 40), kept("b", 30), kept("c", 20)],
            [dropped("d", 10, "greedy"), dropped("e", 5)],
            UNIT * 11,
            UNIT * 4 + G + 1 + 1 + 2 * G,
        ),
        # greedy drops the middle one: {a, b} regresses (1 call), {a, c} is new (guarded)
        (
            [kept("a", 40), kept("c", 20)],
            [dropped("b", 30, "greedy")],
            UNIT * 8,
            UNIT * 3 + G + 1 + 1 + G,
        ),
    ],
)
def test_seed_and_fewest_calls(
    spec: CompressSpec,
    mods: list[Modification],
    rejected: list[RejectedModification],
    seed: int,
    fewest: int,
) -> None:
    r = report(mods, rejected)
    assert seed_calls(r, spec) == seed
    assert fewest_calls(r, spec, GUARDED) == fewest
