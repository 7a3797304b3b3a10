"""Shared fixtures of the model-seam tests: the shipped example and a fast retry backoff."""

from __future__ import annotations

from pathlib import Path

import pytest

from optiflow.core.dataset import Dataset
from optiflow.core.prompt import Prompt
from optiflow.files import load_dataset, load_prompt

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support-bot"


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPTIFLOW_RETRY_BACKOFF_S", "0.001")


@pytest.fixture(scope="session")
def example_prompt() -> Prompt:
    return load_prompt(EXAMPLE / "prompt.yaml")


@pytest.fixture(scope="session")
def example_dataset() -> Dataset:
    return load_dataset(EXAMPLE / "dataset.jsonl")
