"""The optimize job's spec: self-contained, like the compress job's (workers never re-read files).

It carries what the driver's evaluate task reads (``prompt``, ``dataset``, ``check``, ``model``,
the baseline snapshot) plus the optimization settings: the optimizer, the treatment factor
(default: what the optimizer mutates), the scorer and objective, the termination policies, the
acceptance rule, ``max_candidates_per_step``, ``eval_runs`` per sample and ``splits``.

``splits: true`` uses the dataset's train / val / test splits (seed 004): candidates are
evaluated on train + val in one step, the optimizer sees only the train results, acceptance
compares validation results, and the final best (and the baseline) are evaluated on test at the
end. Samples without a split count as train.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictBool, StrictInt, field_validator, model_validator

from optiflow.core.base import MAX_NAME_LENGTH, JSONValue
from optiflow.core.budget import JobBudget
from optiflow.core.checks import CheckSpec
from optiflow.core.dataset import Dataset
from optiflow.core.model import ModelConfig
from optiflow.core.optimize.acceptance import AcceptanceSpec
from optiflow.core.optimize.configuration import Configuration, TreatmentFactor, make_config
from optiflow.core.optimize.demonstrations import DemonstrationsSpec
from optiflow.core.optimize.optimizers import OptimizerSpec
from optiflow.core.optimize.rewrite import RewriteOptimizerSpec
from optiflow.core.optimize.scoring import Objective, ScorerSpec, SuccessRateScorer, parse_scorer
from optiflow.core.optimize.search import GridSearchSpec, RandomSearchSpec
from optiflow.core.optimize.structured import StructuredOptimizerSpec
from optiflow.core.optimize.termination import CompositePolicy, parse_termination
from optiflow.core.overrides import STABLE, SectionOverride
from optiflow.core.prompt import Prompt
from optiflow.core.sections import SectionPath, path_str


class OptimizeSpec(JobBudget):
    """``max_cost_usd`` / ``max_tokens`` (:class:`JobBudget`) are the hard budget, enforced before
    every model call; the ``token_budget`` / ``cost_budget`` termination policies are the soft one,
    checked between iterations."""

    kind: Literal["optimize"] = "optimize"
    name: str = Field(default="optimize", min_length=1, max_length=MAX_NAME_LENGTH)
    """The use case id (seed 003's ``useCaseId``)."""
    experiment: str = Field(
        default="optimize", min_length=1, max_length=MAX_NAME_LENGTH, pattern=r"^[A-Za-z0-9_.\-]+$"
    )
    """The experiment id: the history file is ``optimizations/<name>/<experiment>_<timestamp>.yaml``."""
    prompt: Prompt
    dataset: Dataset
    check: CheckSpec
    model: ModelConfig
    optimizer: OptimizerSpec
    treatment: TreatmentFactor | None = None
    scorer: ScorerSpec = Field(default_factory=SuccessRateScorer)
    objective: Objective = Objective.MAXIMIZE
    termination: CompositePolicy = Field(default_factory=lambda: parse_termination(None))
    acceptance: AcceptanceSpec = Field(default_factory=AcceptanceSpec)
    max_candidates_per_step: StrictInt = Field(default=3, ge=1, le=50)
    eval_runs: StrictInt = Field(default=1, ge=1, le=50)
    splits: StrictBool = False
    baseline_tag: str = STABLE
    baseline_overrides: tuple[SectionOverride, ...] = ()
    baseline_model_params: dict[str, JSONValue] = Field(default_factory=dict)
    """Model params of the baseline, on top of ``model.params``. At submission the baseline tag's
    stored model params merge in (unless the document sets ``baseline_overrides``: then it names
    its baseline itself): a key only one side sets is kept, a key both set to the same value is
    kept, a key both set to different values is refused naming both
    (:func:`optiflow.core.overrides.merge_baseline_params`). Every check sees the merged params."""
    max_section_chars: StrictInt = Field(default=20_000, ge=1)
    max_failing_examples: StrictInt = Field(default=8, ge=0)
    flags: dict[str, StrictBool] = Field(default_factory=dict)

    @field_validator("scorer", mode="before")
    @classmethod
    def _scorer(cls, value: Any) -> Any:
        return parse_scorer(value) if isinstance(value, str) else value

    @field_validator("termination", mode="before")
    @classmethod
    def _termination(cls, value: Any) -> Any:
        return parse_termination(value)

    @model_validator(mode="after")
    def _consistent(self) -> OptimizeSpec:
        if self.treatment is None:
            treatment = self.optimizer.default_treatment()
            if treatment is None:
                raise ValueError("treatment: name the sections (or model params) to optimize")
            object.__setattr__(self, "treatment", treatment)
        treatment = self.factor
        for path in treatment.sections:
            section = next((s for s in self.prompt.sections if s.path == path), None)
            if section is None:
                raise ValueError(f"treatment: prompt {self.prompt.id} has no section {path_str(path)!r}")
            if section.frozen:
                raise ValueError(f"treatment: section {path_str(path)!r} is frozen")
        self._optimizer_fits(treatment)
        if self.splits:
            counts = {name: len(self.dataset.split(name).samples) for name in ("train", "val", "test")}
            found = ", ".join(f"{name} {n}" for name, n in counts.items())
            for name in ("train", "val"):
                if not counts[name]:
                    raise ValueError(f"splits: the dataset has no {name} sample ({found})")
        if isinstance(self.optimizer, StructuredOptimizerSpec):
            self.optimizer.block.parse(self.effective_body(self.optimizer.block.section))
        return self

    def _optimizer_fits(self, treatment: TreatmentFactor) -> None:
        opt = self.optimizer
        if isinstance(opt, RewriteOptimizerSpec):
            if not treatment.sections:
                raise ValueError("optimizer: llm_rewrite needs treatment sections")
            outside = [path_str(p) for p in opt.sections if p not in treatment.sections]
            if outside:
                raise ValueError(f"optimizer.sections: {outside} not in the treatment factor")
        elif isinstance(opt, StructuredOptimizerSpec):
            if opt.block.section not in treatment.sections:
                raise ValueError(
                    f"optimizer.block.section: {path_str(opt.block.section)!r} not in the treatment"
                )
        elif isinstance(opt, DemonstrationsSpec):
            if opt.section not in treatment.sections:
                raise ValueError(f"optimizer.section: {path_str(opt.section)!r} not in the treatment")
            if not self.splits:
                raise ValueError(
                    "optimizer: demonstrations needs splits: true (demonstrations come from the train split "
                    "only, never from the samples a candidate is selected or confirmed on)"
                )
        elif isinstance(opt, GridSearchSpec | RandomSearchSpec):
            outside = [name for name in opt.space if name not in treatment.model_params]
            if outside:
                raise ValueError(f"optimizer.space: {outside} not in the treatment factor's model_params")

    # -- derived --------------------------------------------------------------------------
    @property
    def factor(self) -> TreatmentFactor:
        assert self.treatment is not None  # set by the validator
        return self.treatment

    def effective_body(self, path: SectionPath) -> str:
        """The body the baseline renders for a section (its baseline override, if any)."""
        for ov in self.baseline_overrides:
            if ov.path == path:
                return ov.body
        return self.prompt.section(path).body

    def baseline_param(self, name: str) -> JSONValue:
        if name in self.baseline_model_params:
            return self.baseline_model_params[name]
        if name == "model":
            return self.model.model
        return self.model.params.get(name)

    def baseline_configuration(self) -> Configuration:
        factor = self.factor
        return make_config(
            {p: self.effective_body(p) for p in factor.sections},
            {name: self.baseline_param(name) for name in factor.model_params},
        )

    def fixed_factors(self) -> dict[str, JSONValue]:
        """Everything held constant: model, params outside the treatment, other sections' hashes."""
        factor = self.factor
        params = {**dict(self.model.params), **self.baseline_model_params}
        fixed: dict[str, JSONValue] = {}
        if "model" not in factor.model_params:
            fixed["model"] = str(params.pop("model", self.model.model))
        for name in sorted(params):
            if name not in factor.model_params and name != "model":
                fixed[name] = params[name]
        fixed["prompt"] = self.prompt.id
        fixed["baseline_tag"] = self.baseline_tag
        fixed["sections"] = {
            path_str(s.path): ("frozen " if s.frozen else "") + _short_hash(self.effective_body(s.path))
            for s in self.prompt.sections
            if s.path not in factor.sections
        }
        return fixed

    def train_ids(self) -> tuple[str, ...]:
        return self.dataset.split("train").ids() if self.splits else self.dataset.ids()

    def validation_ids(self) -> tuple[str, ...] | None:
        return self.dataset.split("val").ids() if self.splits else None

    def test_ids(self) -> tuple[str, ...]:
        return self.dataset.split("test").ids() if self.splits else ()

    def trial_ids(self) -> tuple[str, ...]:
        """The samples every trial is evaluated on (train + val with splits, in dataset order)."""
        if not self.splits:
            return self.dataset.ids()
        keep = set(self.train_ids()) | set(self.validation_ids() or ())
        return tuple(i for i in self.dataset.ids() if i in keep)


def _short_hash(body: str) -> str:
    from optiflow.core.sections import section_hash

    return section_hash(body)[:12]


__all__ = ["OptimizeSpec"]
