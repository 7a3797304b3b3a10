"""What a gate is told: :class:`GateSpec` (mode, error rates, margin, run budget, protected samples)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import Field, StrictFloat, StrictInt, model_validator

from optiflow.core.base import Frozen
from optiflow.core.dataset import Sample

GateMode = Literal["auto", "strict", "paired"]
GateKind = Literal["strict", "paired"]


class GateSpec(Frozen):
    """How candidate edits are accepted.

    - ``mode``: ``strict`` is seed 000's rule (zero regressions); ``paired`` the sequential paired
      non-inferiority test; ``auto`` (default) picks ``strict`` when the baseline's own runs show the
      model deterministic, else ``paired``.
    - ``alpha``: the consumer's risk, the most a candidate whose true pass rate is ``margin`` or more
      below the baseline's is accepted (guaranteed at any stopping time).
    - ``beta``: the most an edit that changes nothing (no true drop) is rejected early by the test's
      other e-process (guaranteed likewise); undecided-at-the-cap adds to it (the operating curve
      predicts how much).
    - ``margin``: the pass-rate drop (0..1, 0.10 = ten points) that counts as a regression. The
      default comes from the power analysis in the README: on ~50 flaky samples a 10-point drop is
      the smallest told apart from no drop at 5% / 5% within ``max_runs``.
    - ``first_runs``: runs per sample of the first round (the baseline's, and each candidate's);
      under ``strict`` these are all the runs (seed 000's ``eval_runs``).
    - ``round_runs``: runs each later round adds to a still-undecided candidate's samples.
    - ``max_runs``: cap on the runs of any sample, per side; a candidate undecided there is not
      accepted.
    - ``protect``: sample ids or tags that must never regress: they keep seed 000's strict
      per-sample rule whatever the mode.
    - ``min_baseline_pass_rate`` / ``max_error_rate``: a baseline below / above these gives the gate
      nothing to stand on, and the job fails.
    """

    mode: GateMode = "auto"
    alpha: StrictFloat = Field(default=0.05, gt=0.0, lt=0.5)
    beta: StrictFloat = Field(default=0.05, gt=0.0, lt=0.5)
    margin: StrictFloat = Field(default=0.10, gt=0.0, lt=1.0)
    first_runs: StrictInt = Field(default=3, ge=1, le=50)
    round_runs: StrictInt = Field(default=1, ge=1, le=50)
    max_runs: StrictInt = Field(default=24, ge=1, le=200)
    protect: tuple[str, ...] = ()
    min_baseline_pass_rate: StrictFloat = Field(default=0.05, ge=0.0, le=1.0)
    max_error_rate: StrictFloat = Field(default=0.05, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _budget(self) -> GateSpec:
        if self.max_runs < self.first_runs:
            raise ValueError(f"max_runs ({self.max_runs}) is below first_runs ({self.first_runs})")
        return self

    def protected_ids(self, samples: Iterable[Sample]) -> frozenset[str]:
        """The ids of the samples ``protect`` names, by id or by tag."""
        names = frozenset(self.protect)
        return frozenset(s.id for s in samples if s.id in names or names.intersection(s.tags))


__all__ = ["GateKind", "GateMode", "GateSpec"]
