"""Samples and datasets (pure; file loading lives in :mod:`optiflow.files`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Literal

from pydantic import Field, model_validator

from optiflow.core.base import MAX_NAME_LENGTH, Frozen, JSONValue

Split = Literal["train", "val", "test"]


class Sample(Frozen):
    """One case: ``input`` (text, or a mapping of template params) and what is ``expected``."""

    id: str = Field(min_length=1, max_length=MAX_NAME_LENGTH)
    input: JSONValue
    expected: JSONValue = None
    tags: tuple[str, ...] = ()
    split: Split | None = None


class Dataset(Frozen):
    name: str = "dataset"
    samples: tuple[Sample, ...] = ()

    @model_validator(mode="after")
    def _unique_ids(self) -> Dataset:
        seen: set[str] = set()
        for s in self.samples:
            if s.id in seen:
                raise ValueError(f"duplicate sample id {s.id!r}")
            seen.add(s.id)
        return self

    def __len__(self) -> int:
        return len(self.samples)

    def __iter__(self) -> Iterator[Sample]:  # type: ignore[override]
        return iter(self.samples)

    def ids(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.samples)

    def by_id(self, sample_id: str) -> Sample:
        for s in self.samples:
            if s.id == sample_id:
                return s
        raise KeyError(sample_id)

    def split(self, name: Split) -> Dataset:
        """Samples of one split. Samples without a ``split`` belong to ``train``."""
        chosen = tuple(s for s in self.samples if (s.split or "train") == name)
        return Dataset(name=f"{self.name}[{name}]", samples=chosen)

    def with_ratio_split(self, ratios: Sequence[float], *, seed: int = 0) -> Dataset:
        """Assign train/val/test by seeded hash of the id (stable under reordering)."""
        if len(ratios) not in (2, 3) or abs(sum(ratios) - 1.0) > 1e-9 or any(r < 0 for r in ratios):
            raise ValueError("ratios must be 2 or 3 non-negative numbers summing to 1")
        names: tuple[Split, ...] = ("train", "val", "test") if len(ratios) == 3 else ("train", "test")
        out = []
        for s in self.samples:
            h = int(hashlib.sha256(f"{seed}:{s.id}".encode()).hexdigest()[:12], 16) / 16**12
            acc = 0.0
            chosen = names[-1]
            for name, r in zip(names, ratios, strict=True):
                acc += r
                if h < acc:
                    chosen = name
                    break
            out.append(s.model_copy(update={"split": chosen}))
        return self.model_copy(update={"samples": tuple(out)})
