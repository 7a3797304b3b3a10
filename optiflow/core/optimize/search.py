"""Grid and random search over model params (temperature, top_p, ``model`` ...).

Both propose points of a space, ``max_candidates`` per step, each as the baseline configuration
with the point's params (parent: the baseline), skipping points already evaluated or rejected.
They are deterministic and resumable without extra state: grid search walks the product of the
value lists in the order given; random search draws point ``i`` from ``random.Random(f"{seed}:{i}")``
for ``i < samples``. When every point is used the optimizer proposes nothing and the run ends
(``exhausted``).
"""

from __future__ import annotations

import itertools
import random
from typing import Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt, model_validator

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.optimize.configuration import ParamDomain, TreatmentFactor, config_hash, with_params
from optiflow.core.optimize.history import TrialHistory
from optiflow.core.optimize.protocol import (
    CONTINUE,
    CandidateProposal,
    OptimizerState,
    RunContext,
    StopDecision,
    observe_best,
)
from optiflow.core.optimize.trial import TrialResult

Point = dict[str, JSONValue]


class GridSearchSpec(Frozen):
    type: Literal["grid"] = "grid"
    space: dict[str, tuple[JSONValue, ...]] = Field(min_length=1)

    @model_validator(mode="after")
    def _values(self) -> GridSearchSpec:
        empty = [k for k, v in self.space.items() if not v]
        if empty:
            raise ValueError(f"no value to search for {empty}")
        return self

    def points(self) -> list[Point]:
        names = list(self.space)
        return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*self.space.values())]

    def default_treatment(self) -> TreatmentFactor | None:
        return TreatmentFactor(model_params={k: ParamDomain(choices=v) for k, v in self.space.items()})

    def description(self) -> str:
        return f"Grid search over {', '.join(self.space)} ({len(self.points())} points)"


class SearchDimension(Frozen):
    """Choices, or a ``[min, max]`` range (``integer`` draws whole numbers; floats are rounded to
    ``digits`` decimals)."""

    choices: tuple[JSONValue, ...] | None = None
    min: StrictFloat | None = None
    max: StrictFloat | None = None
    integer: StrictBool = False
    digits: StrictInt = Field(default=3, ge=0, le=12)

    @model_validator(mode="after")
    def _shape(self) -> SearchDimension:
        if self.choices is not None:
            if not self.choices:
                raise ValueError("choices is empty")
            return self
        if self.min is None or self.max is None or self.min > self.max:
            raise ValueError("give choices, or min <= max")
        return self

    def draw(self, rng: random.Random) -> JSONValue:
        if self.choices is not None:
            return rng.choice(self.choices)
        assert self.min is not None and self.max is not None
        if self.integer:
            return rng.randint(int(self.min), int(self.max))
        return round(rng.uniform(self.min, self.max), self.digits)

    def domain(self) -> ParamDomain:
        if self.choices is not None:
            return ParamDomain(choices=self.choices)
        return ParamDomain(min=self.min, max=self.max)


class RandomSearchSpec(Frozen):
    type: Literal["random"] = "random"
    space: dict[str, SearchDimension] = Field(min_length=1)
    samples: StrictInt = Field(default=20, ge=1, le=10_000)
    seed: StrictInt = 0

    def point(self, index: int) -> Point:
        rng = random.Random(f"{self.seed}:{index}")
        return {name: dim.draw(rng) for name, dim in self.space.items()}

    def points(self) -> list[Point]:
        return [self.point(i) for i in range(self.samples)]

    def default_treatment(self) -> TreatmentFactor | None:
        return TreatmentFactor(model_params={k: d.domain() for k, d in self.space.items()})

    def description(self) -> str:
        return f"Random search over {', '.join(self.space)} ({self.samples} draws, seed {self.seed})"


class SearchOptimizer:
    def __init__(self, spec: GridSearchSpec | RandomSearchSpec) -> None:
        self.spec = spec

    def description(self) -> str:
        return self.spec.description()

    def initialize(self, context: RunContext) -> OptimizerState:
        return OptimizerState(
            best_candidate_id=context.baseline_candidate_id,
            best_score=context.baseline_score,
            algorithm_data={"baseline_candidate_id": context.baseline_candidate_id},
        )

    def propose(
        self, state: OptimizerState, history: TrialHistory, max_candidates: int
    ) -> list[CandidateProposal]:
        base_id = str(state.algorithm_data.get("baseline_candidate_id", ""))
        base = history.trial(base_id)
        if base is None:
            return []
        seen = set(history.seen_hashes())
        out: list[CandidateProposal] = []
        for index, point in enumerate(self.spec.points()):
            config = with_params(base.configuration, point)
            digest = config_hash(config)
            if digest in seen:
                continue
            seen.add(digest)
            shown = ", ".join(f"{k}={v}" for k, v in point.items())
            out.append(
                CandidateProposal(
                    configuration=config,
                    parent_candidate_ids=(base.candidate_id,),
                    rationale=f"{self.spec.type} point {index}: {shown}",
                )
            )
            if len(out) >= max_candidates:
                break
        return out

    def observe(self, state: OptimizerState, trial_results: list[TrialResult]) -> OptimizerState:
        return observe_best(state, trial_results)

    def should_stop(self, state: OptimizerState, history: TrialHistory) -> StopDecision:
        return CONTINUE


__all__ = ["GridSearchSpec", "RandomSearchSpec", "SearchDimension", "SearchOptimizer"]
