"""What a measure job is given."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt, model_validator

from optiflow.core.base import MAX_NAME_LENGTH, JSONValue
from optiflow.core.budget import JobBudget
from optiflow.core.checks import CheckSpec
from optiflow.core.dataset import Dataset, Split
from optiflow.core.drift.spec import DriftSpec
from optiflow.core.model import ModelConfig
from optiflow.core.overrides import STABLE, SectionOverride
from optiflow.core.prompt import Prompt


class MeasureSpec(JobBudget):
    """One tag measured ``runs`` times; ``max_cost_usd`` / ``max_tokens``: the job's hard budget
    (:class:`JobBudget`): a measurement cut by it reports what was evaluated."""

    kind: Literal["measure"] = "measure"
    name: str = Field(default="measure", min_length=1, max_length=MAX_NAME_LENGTH)
    prompt: Prompt
    dataset: Dataset
    check: CheckSpec
    model: ModelConfig
    tag: str = STABLE
    baseline_overrides: tuple[SectionOverride, ...] = ()
    """The tag's overrides, snapshotted at submission (what is measured)."""
    baseline_model_params: dict[str, JSONValue] = Field(default_factory=dict)
    """Model params of the baseline, on top of ``model.params``. At submission the baseline tag's
    stored model params merge in (unless the document sets ``baseline_overrides``: then it names
    its baseline itself): a key only one side sets is kept, a key both set to the same value is
    kept, a key both set to different values is refused naming both
    (:func:`optiflow.core.overrides.merge_baseline_params`). Every check sees the merged params."""
    runs: StrictInt = Field(default=5, ge=1, le=100)
    split: Split | None = None
    """Measure one split only (train / val / test); default every sample."""
    confidence: StrictFloat = Field(default=0.95, gt=0.0, lt=1.0)
    fail_below: StrictFloat | None = Field(default=None, ge=0.0, le=1.0)
    flags: dict[str, StrictBool] = Field(default_factory=dict)
    drift: DriftSpec = Field(default_factory=DriftSpec)
    """Compare with the reference (the measure of the tag as last accepted): :mod:`optiflow.core.drift`."""

    @model_validator(mode="after")
    def _samples(self) -> MeasureSpec:
        if not self.sample_ids():
            raise ValueError("no sample to measure" + (f" in split {self.split!r}" if self.split else ""))
        return self

    def sample_ids(self) -> tuple[str, ...]:
        return self.dataset.split(self.split).ids() if self.split else self.dataset.ids()
