"""The ``demonstrations`` optimizer: ``k`` labeled train examples written into a section.

No strong proposer needed (DESIGN §2a; DSPy's LabeledFewShot / BootstrapFewShot with random
search): every candidate is the baseline configuration whose ``section`` body gets, after its own
text, ``header`` and ``k`` demonstrations rendered by ``template`` (``{input}``, ``{expected}``).
Candidates alternate between

- **random** subsets of the train split, and
- **bootstrapped** subsets: train samples the current best already passes in every run (what the
  model can do, shown back to it). The workflow's evaluations carry no model output (chord results
  stay small), so a bootstrapped demonstration shows the sample's labeled answer, which its check
  accepted from the best's own output.

The pool is the train split only, fixed when the optimizer is built (``splits: true`` is required):
a validation or test sample is never shown as a demonstration, so selection and the held-out
confirmation stay honest. Generation ``g`` proposes candidates ``g m .. g m + m - 1`` (``m`` =
``max_candidates_per_step``), candidate ``i`` drawn from ``random.Random(f"{seed}:{i}")``: deterministic
and resumable; after ``candidates`` proposals the optimizer proposes nothing (``exhausted``).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, StrictBool, StrictInt, field_validator

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.dataset import Sample
from optiflow.core.optimize.configuration import (
    TreatmentFactor,
    config_hash,
    config_params,
    config_sections,
    make_config,
)
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
from optiflow.core.sections import SectionPath, parse_path, path_str


class DemonstrationsSpec(Frozen):
    type: Literal["demonstrations"] = "demonstrations"
    section: SectionPath
    """The section the demonstrations are written into (in the treatment factor)."""
    k: StrictInt = Field(default=4, ge=1, le=32)
    candidates: StrictInt = Field(default=8, ge=1, le=200)
    """Proposals in all (random and bootstrapped alternate)."""
    bootstrapped: StrictBool = True
    seed: StrictInt = 0
    header: str = "Examples:"
    template: str = "Input: {input}\nOutput: {expected}"

    @field_validator("section", mode="before")
    @classmethod
    def _path(cls, value: Any) -> Any:
        return parse_path(value) if isinstance(value, str) else value

    @field_validator("template")
    @classmethod
    def _template(cls, value: str) -> str:
        try:
            value.format(input="", expected="")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"template: only {{input}} and {{expected}} may be used ({exc})") from None
        return value

    def default_treatment(self) -> TreatmentFactor | None:
        return TreatmentFactor(sections=(self.section,))

    def description(self) -> str:
        kinds = "random and bootstrapped" if self.bootstrapped else "random"
        return (
            f"Demonstrations: {self.k} labeled train examples in {path_str(self.section)} "
            f"({kinds} subsets, {self.candidates} candidates, seed {self.seed})"
        )


def _text(value: JSONValue) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        return _text(next(iter(value.values())))
    if isinstance(value, dict):
        return "\n".join(f"{k}: {_text(v)}" for k, v in value.items())
    return json.dumps(value, ensure_ascii=False)


def render_demonstrations(spec: DemonstrationsSpec, samples: Sequence[Sample]) -> str:
    shots = [spec.template.format(input=_text(s.input), expected=_text(s.expected)) for s in samples]
    return "\n\n".join(x for x in (spec.header.strip(), *shots) if x)


class DemonstrationsOptimizer:
    def __init__(self, spec: DemonstrationsSpec, train: Sequence[Sample]) -> None:
        self.spec = spec
        self.train = tuple(train)
        self.by_id = {s.id: s for s in self.train}

    def description(self) -> str:
        return self.spec.description()

    def initialize(self, context: RunContext) -> OptimizerState:
        return OptimizerState(
            best_candidate_id=context.baseline_candidate_id,
            best_score=context.baseline_score,
            algorithm_data={"baseline_candidate_id": context.baseline_candidate_id},
        )

    def _passed_by_best(self, state: OptimizerState, history: TrialHistory) -> list[Sample]:
        best = history.trial(state.best_candidate_id or "")
        if best is None:
            return []
        failing = {f.sample_id for f in best.failing}
        return [s for s in self.train if s.id not in failing]

    def propose(
        self, state: OptimizerState, history: TrialHistory, max_candidates: int
    ) -> list[CandidateProposal]:
        base = history.trial(str(state.algorithm_data.get("baseline_candidate_id", "")))
        if base is None or not self.train:
            return []
        spec = self.spec
        body = config_sections(base.configuration).get(spec.section, "").rstrip()
        passed = self._passed_by_best(state, history) if spec.bootstrapped else []
        seen = set(history.seen_hashes())
        out: list[CandidateProposal] = []
        i = state.generation * max_candidates  # generation g proposes candidates g*m .. g*m + m - 1
        stop = min(spec.candidates, i + max_candidates)
        while i < stop:
            rng = random.Random(f"{spec.seed}:{i}")
            boot = spec.bootstrapped and i % 2 == 1 and len(passed) >= spec.k
            pool = passed if boot else list(self.train)
            chosen = rng.sample(pool, min(spec.k, len(pool)))
            demos = render_demonstrations(spec, chosen)
            sections = config_sections(base.configuration)
            sections[spec.section] = f"{body}\n\n{demos}" if body else demos
            config = make_config(sections, config_params(base.configuration))
            i += 1
            digest = config_hash(config)
            if digest in seen:
                continue
            seen.add(digest)
            kind = "bootstrapped (passed by the best)" if boot else "random"
            out.append(
                CandidateProposal(
                    configuration=config,
                    parent_candidate_ids=(base.candidate_id,),
                    rationale=f"{kind} demonstrations {i - 1}: {', '.join(s.id for s in chosen)}",
                )
            )
        return out

    def observe(self, state: OptimizerState, trial_results: list[TrialResult]) -> OptimizerState:
        return observe_best(state, trial_results)

    def should_stop(self, state: OptimizerState, history: TrialHistory) -> StopDecision:
        return CONTINUE


def demonstration_ids(body: str, train: Sequence[Sample]) -> list[str]:
    """Which train samples a rendered body shows (for tests and reports)."""
    return [s.id for s in train if re.search(r"(^|\s)" + re.escape(_text(s.input)) + "$", body, re.M)]


__all__ = ["DemonstrationsOptimizer", "DemonstrationsSpec", "demonstration_ids", "render_demonstrations"]
