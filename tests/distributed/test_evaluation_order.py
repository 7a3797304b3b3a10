"""The order a step's evaluations are queued in (``driver._evaluation_order``): the probes first,
then interleaved when fail-fast watches samples, grouped by target (one prompt variant after
another) otherwise."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from optiflow.core.experiment import Experiment
from optiflow.core.step import EvalTarget, Step
from optiflow.distributed.driver import _evaluation_order, _held


def target(
    name: str,
    ids: tuple[str, ...],
    runs: int,
    guard: frozenset[str] | None = None,
    probe: tuple[str, ...] = (),
) -> EvalTarget:
    return EvalTarget(
        experiment=Experiment(id=name, name=name, overrides_tag=f"opt-{name}"),
        sample_ids=ids,
        runs=runs,
        guard=guard,
        probe=probe,
    )


def order(step: Step) -> list[tuple[str, str, int]]:
    first, rest = _evaluation_order(step)
    return [(t.experiment.id, sid, run) for t, sid, run in (*first, *rest)]


def probes(step: Step) -> list[tuple[str, str, int]]:
    return [(t.experiment.id, sid, run) for t, sid, run in _evaluation_order(step)[0]]


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


def test_probes_go_first_best_suspect_of_every_target_then_the_second() -> None:
    guard = frozenset({"x", "y", "z"})
    step = Step(
        index=1,
        name="candidates",
        targets=(
            target("a", ("x", "y", "z"), 2, guard, probe=("z", "y")),
            target("b", ("x", "y", "z"), 2, guard, probe=("x",)),
            target("c", ("x", "y", "z"), 2, guard),
        ),
    )
    assert probes(step) == [("a", "z", 0), ("b", "x", 0), ("a", "y", 0)]
    got = order(step)
    assert got[:3] == probes(step)
    assert got[3:10] == [
        ("a", "x", 0), ("c", "x", 0), ("b", "y", 0), ("c", "y", 0), ("b", "z", 0), ("c", "z", 0),
        ("a", "x", 1),
    ]  # fmt: skip
    assert ("a", "z", 1) in got[3:]  # a probe is its target's first run only
    assert len(got) == len(set(got)) == 3 * 3 * 2


def test_a_probe_is_guarded_samples_of_its_target() -> None:
    with pytest.raises(ValidationError, match="probe"):
        target("a", ("x", "y"), 1, frozenset({"x"}), probe=("y",))
    with pytest.raises(ValidationError, match="probe"):
        target("a", ("x",), 1, frozenset({"x", "q"}), probe=("q",))


def test_a_probed_target_is_held_only_when_it_owns_at_least_half_of_its_step() -> None:
    guard = frozenset({"x", "y"})
    alone = target("a", ("x", "y"), 3, guard, probe=("x",))
    assert _held(Step(index=1, name="combined", targets=(alone,))) == {id(alone)}
    pair = (target("a", ("x", "y"), 3, guard, probe=("x",)), target("b", ("x", "y"), 3, guard, probe=("y",)))
    assert _held(Step(index=1, name="greedy", targets=pair)) == {id(pair[0]), id(pair[1])}
    many = tuple(target(n, ("x", "y"), 3, guard, probe=("x",)) for n in "abcde")
    assert _held(Step(index=1, name="candidates", targets=many)) == set()  # interleaving spreads the wave
    unprobed = target("a", ("x", "y"), 3, guard)
    assert _held(Step(index=1, name="combined", targets=(unprobed,))) == set()
