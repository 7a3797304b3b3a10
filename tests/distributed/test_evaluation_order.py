"""The order a step's evaluations are queued in (``driver._evaluation_order``): interleaved when
fail-fast watches samples, grouped by target (one prompt variant after another) otherwise."""

from __future__ import annotations

from optiflow.core.experiment import Experiment
from optiflow.core.step import EvalTarget, Step
from optiflow.distributed.driver import _evaluation_order


def target(name: str, ids: tuple[str, ...], runs: int, guard: frozenset[str] | None = None) -> EvalTarget:
    return EvalTarget(
        experiment=Experiment(id=name, name=name, overrides_tag=f"opt-{name}"),
        sample_ids=ids,
        runs=runs,
        guard=guard,
    )


def order(step: Step) -> list[tuple[str, str, int]]:
    return [(t.experiment.id, sid, run) for t, sid, run in _evaluation_order(step)]


def test_without_fail_fast_each_target_is_queued_together() -> None:
    step = Step(
        index=1,
        name="candidates",
        targets=(target("a", ("x", "y"), 2), target("b", ("x", "y"), 2, frozenset())),
    )
    assert order(step) == [
        ("a", "x", 0), ("a", "y", 0), ("a", "x", 1), ("a", "y", 1),
        ("b", "x", 0), ("b", "y", 0), ("b", "x", 1), ("b", "y", 1),
    ]  # fmt: skip


def test_with_fail_fast_guarded_samples_come_first_interleaved_across_targets() -> None:
    guard = frozenset({"y"})
    step = Step(
        index=1,
        name="candidates",
        targets=(target("a", ("x", "y"), 2, guard), target("b", ("x", "y"), 2, guard)),
    )
    assert order(step) == [
        ("a", "y", 0), ("b", "y", 0), ("a", "x", 0), ("b", "x", 0),
        ("a", "y", 1), ("b", "y", 1), ("a", "x", 1), ("b", "x", 1),
    ]  # fmt: skip


def test_every_evaluation_once_either_way() -> None:
    for guard in (None, frozenset({"x"})):
        step = Step(
            index=2, name="r", targets=(target("a", ("x", "y", "z"), 3, guard), target("b", ("z",), 1, guard))
        )
        got = order(step)
        assert len(got) == len(set(got)) == 3 * 3 + 1
