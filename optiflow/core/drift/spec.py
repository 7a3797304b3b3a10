"""What a measure job is told about drift: ``drift: {against: reference}`` (the default)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt, model_validator

from optiflow.core.base import Frozen
from optiflow.core.gate.spec import GateSpec

MAX_FIRST_RUN = 10**9
REFERENCE_RUNS = 12
"""Runs of a reference that ``apply`` (or ``measure --set-reference`` without ``--runs``) measures:
4 nights' worth at 3 runs, so that a drop on the first nights after it is told from the
reference's own noise (bench/drift_results.md compares 3 and 12)."""


class DriftSpec(Frozen):
    """How a measure job compares itself with its prompt's *reference*: the measure recorded when
    the tag was last accepted (``optiflow apply``, ``optiflow measure --set-reference``).

    - ``against``: ``reference`` (default) pairs tonight's per-sample outcomes with the reference's
      and every night since, by sample, and decides whether a drop is shown; when there is no
      reference for this prompt, tag, model, dataset and check (or the prompt, model, dataset or
      check changed since), the job says so and becomes the reference. ``none``: no comparison and
      no reference recorded.
    - ``set_reference``: this measure becomes the reference (no comparison tonight).
    - ``margin``: the drop the detector is powered for (default: the gate's, 10 points); the null
      it tests is *no drop*, so a drop of any size can be shown, one of ``margin`` or more soon.
    - ``alpha``: the chance of ever showing a drop (or a gain) that is not there, over every night
      compared with one reference, however many.
    - ``first_run``: set at submission: the runs continue the reference's run indices, so that no
      run index repeats within a reference's nights (a real model ignores it; the simulated model
      draws a run from its index).
    - ``note``: with ``set_reference``, why (``optiflow apply`` names the version it applied).
    """

    against: Literal["reference", "none"] = "reference"
    set_reference: StrictBool = False
    margin: StrictFloat = Field(default=GateSpec().margin, gt=0.0, le=0.5)
    alpha: StrictFloat = Field(default=0.05, gt=0.0, lt=0.5)
    first_run: StrictInt = Field(default=0, ge=0, le=MAX_FIRST_RUN)
    note: str = Field(default="", max_length=300)
    """Why this measure sets the reference (``apply`` writes which version it measures)."""

    @model_validator(mode="after")
    def _consistent(self) -> DriftSpec:
        if self.set_reference and self.against == "none":
            raise ValueError("set_reference records a reference, and against: none turns drift off")
        return self

    @property
    def off(self) -> bool:
        return self.against == "none"


__all__ = ["MAX_FIRST_RUN", "REFERENCE_RUNS", "DriftSpec"]
