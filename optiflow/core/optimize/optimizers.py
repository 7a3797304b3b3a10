"""The shipped optimizers, chosen by a JSON spec (``optimizer: {type: ...}`` in a job file)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from pydantic import Field

from optiflow.core.dataset import Sample
from optiflow.core.optimize.configuration import TreatmentFactor
from optiflow.core.optimize.demonstrations import DemonstrationsOptimizer, DemonstrationsSpec
from optiflow.core.optimize.protocol import Optimizer
from optiflow.core.optimize.rewrite import LLMRewriteOptimizer, RewriteOptimizerSpec
from optiflow.core.optimize.search import GridSearchSpec, RandomSearchSpec, SearchOptimizer
from optiflow.core.optimize.structured import StructuredMutationOptimizer, StructuredOptimizerSpec

OptimizerSpec = Annotated[
    RewriteOptimizerSpec | StructuredOptimizerSpec | GridSearchSpec | RandomSearchSpec | DemonstrationsSpec,
    Field(discriminator="type"),
]


def build_optimizer(
    spec: OptimizerSpec, treatment: TreatmentFactor, train: Sequence[Sample] = ()
) -> Optimizer:
    """A fresh (stateless) optimizer for ``spec``; its state lives in the workflow's checkpoint.
    ``train``: the train split's samples (the only ones ``demonstrations`` may show)."""
    if isinstance(spec, DemonstrationsSpec):
        return DemonstrationsOptimizer(spec, train)
    if isinstance(spec, RewriteOptimizerSpec):
        return LLMRewriteOptimizer(spec, treatment.sections)
    if isinstance(spec, StructuredOptimizerSpec):
        return StructuredMutationOptimizer(spec)
    return SearchOptimizer(spec)


__all__ = ["OptimizerSpec", "build_optimizer"]
