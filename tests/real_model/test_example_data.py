"""The real-model example's data and its recorded runs (no model needed: these always run).

``examples/review-sentiment`` must stay honest (balanced labels, each product once each way and
both reviews of a product in the same split, no text shared between splits), and
``bench/real_runs.json`` must be a recording *of this example*: once the prompt, the dataset or
the harmful edit changes, the recording is stale and ``python -m bench.record_runs`` must be run
again.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest

from bench.record_runs import HARMFUL_PATH, OUT, Recording, harmful_overrides, load
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.overrides import PromptOverrides
from optiflow.jobfile import load_job
from tests.support.workers import ROOT

EXAMPLE = ROOT / "examples" / "review-sentiment"


@pytest.fixture(scope="module")
def spec() -> CompressSpec:
    loaded = load_job(EXAMPLE / "job.yaml")
    assert isinstance(loaded, CompressSpec)
    return loaded


def test_dataset_is_balanced_paired_and_split_without_leakage(spec: CompressSpec) -> None:
    samples = list(spec.dataset)
    assert Counter(s.expected for s in samples) == {"positive": 42, "negative": 42}
    by_split = {split: spec.dataset.split(split) for split in ("train", "test")}
    assert (len(by_split["train"]), len(by_split["test"])) == (48, 36)
    for part in by_split.values():
        labels = Counter(s.expected for s in part)
        assert labels["positive"] == labels["negative"]
    # one product per number: its positive and its negative review sit in the same split
    split_of = {s.id: s.split for s in samples}
    for s in samples:
        label, number = s.id.split("-")
        other = f"{'neg' if label == 'pos' else 'pos'}-{number}"
        assert split_of[other] == s.split, s.id
    texts = [str(s.input["review"]) for s in samples if isinstance(s.input, dict)]
    assert len(set(texts)) == len(samples)  # no review twice, so none in both splits
    # labels that do not contain each other, so `contains` reads one label
    a, b = sorted({str(s.expected) for s in samples})
    assert a not in b and b not in a


def test_harmful_edit_applies_to_the_example(spec: CompressSpec) -> None:
    prompt = spec.prompt
    edit = PromptOverrides(
        ns=prompt.ns, key=prompt.key, tag="bench-harmful", sections=harmful_overrides(prompt)
    )
    assert [o.path for o in prompt.fresh_overrides(edit)] == [HARMFUL_PATH]  # not stale
    sample = next(iter(spec.dataset))
    examples = prompt.render(sample.input, overrides=edit).system.split("# Examples\n")[1].split("\n\n# ")[0]
    assert examples.count("Answer: The sentiment of this review is neutral.") == 6
    assert "is positive" not in examples and "is negative" not in examples


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_recorded_runs_are_of_this_example(spec: CompressSpec) -> None:
    rec = load(OUT)
    s = rec.settings
    assert s["prompt_sha256"] == _sha(EXAMPLE / "prompt.yaml"), (
        "prompt changed: run python -m bench.record_runs"
    )
    assert s["dataset_sha256"] == _sha(EXAMPLE / "dataset.jsonl"), (
        "dataset changed: run python -m bench.record_runs"
    )
    assert s["harmful_edit"]["body"] == harmful_overrides(spec.prompt)[0].body
    assert s["params"]["temperature"] == spec.model.params["temperature"] > 0
    assert s["params"]["max_tokens"] == spec.model.params["max_tokens"]
    train, test = set(spec.dataset.split("train").ids()), set(spec.dataset.split("test").ids())
    assert set(rec.arms["baseline"]) == set(rec.arms["harmful"]) == train
    assert set(rec.arms["baseline-test"]) == test
    assert rec.runs("baseline") >= 24 and rec.runs("harmful") >= 24
    for arm in rec.arms.values():
        assert len({len(runs) for runs in arm.values()}) == 1  # every sample has every run
        assert all(set(runs) <= {"0", "1", "e"} for runs in arm.values())


def test_groups_are_disjoint_runs_in_order() -> None:
    rec = Recording(settings={}, arms={"a": {"x": "1101101", "y": "0010011"}})
    assert rec.passes("a")["x"] == [True, True, False, True, True, False, True]
    groups = rec.groups("a", 3)
    assert groups == [
        {"x": [True, True, False], "y": [False, False, True]},
        {"x": [True, True, False], "y": [False, False, True]},
    ]
    assert rec.groups("a", 4) == [{"x": [True, True, False, True], "y": [False, False, True, False]}]


def test_recording_is_valid_json_with_a_summary() -> None:
    data = json.loads(OUT.read_text())
    assert {"settings", "summary", "harmful_effect", "chunks", "arms"} <= set(data)
