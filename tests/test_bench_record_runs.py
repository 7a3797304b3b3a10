"""bench/record_runs without the model: its chunks, real measure jobs (embedded client, simulated
model), each make the runs of its own range, and their results land at their run index, however
many measures of the tag came before (drift would continue a tag's run numbering)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import record_runs
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.drift.spec import DriftSpec
from optiflow.core.model import ModelConfig
from optiflow.jobfile import load_job


def test_plan_alternates_the_arms_in_chunks() -> None:
    assert record_runs.plan({"baseline": 5, "harmful": 4, "baseline-test": 2}, 2) == [
        ("baseline", 0, 2),
        ("harmful", 0, 2),
        ("baseline-test", 0, 2),
        ("baseline", 2, 2),
        ("harmful", 2, 2),
        ("baseline", 4, 1),
    ]


def test_chunks_record_every_run_at_its_index(tmp_path: Path) -> None:
    """Two chunks of each arm, the second starting at run 2: every sample ends with four results
    and no drift reference is left behind (one would offset a later chunk's run indices)."""
    from optiflow.distributed.drift import repository
    from optiflow.interfaces.client import Client
    from tests.support.workers import embedded_settings

    base = load_job(record_runs.EXAMPLE)
    assert isinstance(base, CompressSpec)
    keep = {*base.dataset.split("train").ids()[:3], *base.dataset.split("test").ids()[:3]}
    full = base.dataset.model_copy(update={"samples": tuple(x for x in base.dataset if x.id in keep)})
    model = ModelConfig(model="optiflow/sim")
    arms: dict[str, dict[str, str]] = {a: {} for a in record_runs.ARMS}
    with Client(embedded_settings(tmp_path)) as client:
        chunks = []
        for arm, first, runs in record_runs.plan(dict.fromkeys(record_runs.ARMS, 4), 2):
            spec = record_runs.chunk_spec(base, model, full, arm, first, runs, "train")
            assert spec.drift.off and spec.drift.first_run == first
            chunks.append(record_runs.measure_chunk(client, spec, arms[arm]))
        spec = record_runs.chunk_spec(base, model, full, "baseline", 2, 2, "train")
        with pytest.raises(RuntimeError, match="do not have 2 runs yet"):
            record_runs.measure_chunk(client, spec, arms["baseline"])
        with pytest.raises(ValueError, match="drift off"):
            record_runs.measure_chunk(client, spec.model_copy(update={"drift": DriftSpec()}), {})
        refs = [
            ref
            for tag in ("stable", "bench-harmful")
            for ref in repository(client.runtime).current_for_tag(base.prompt.ns, base.prompt.key, tag)
        ]
    assert [c["runs"] for c in chunks] == [[0, 1]] * 3 + [[2, 3]] * 3
    assert all(c["evaluations"] == 2 * 3 for c in chunks)
    for arm, got in arms.items():
        assert set(got) == set(full.split("test" if arm == "baseline-test" else "train").ids())
        assert all(len(seq) == 4 and set(seq) <= {"0", "1", "e"} for seq in got.values()), (arm, got)
    assert not refs
