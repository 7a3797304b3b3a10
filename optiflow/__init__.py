"""optiflow: distributed prompt optimization on Celery.

Finds prompt changes that cut tokens or raise success rate without regressions, proves each by
evaluation spread over Celery workers, and writes the validated changes as overrides into a
store that production prompt rendering reads.

The public API is imported lazily so ``import optiflow`` (and the CLI) start fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from optiflow.errors import (
    ConfigError,
    JobError,
    ModelProviderError,
    NotFoundError,
    OptiflowError,
    PromptChangedError,
    StaleOverrideError,
    StoreError,
    ValidationError,
)

if TYPE_CHECKING:
    from optiflow.core.checks import Score
    from optiflow.core.compress.report import Modification, OptimizationReport, RejectedModification
    from optiflow.core.compress.spec import CompressSpec
    from optiflow.core.dataset import Dataset, Sample
    from optiflow.core.experiment import Experiment
    from optiflow.core.model import ModelConfig
    from optiflow.core.overrides import Applied, PromptOverrides, SectionOverride, Version
    from optiflow.core.prompt import Prompt, Section
    from optiflow.core.result import OptimizeResult
    from optiflow.core.sections import PromptDescriptor
    from optiflow.interfaces.client import Client, JobHandle
    from optiflow.settings import Settings

_LAZY = {
    "Client": "optiflow.interfaces.client",
    "JobHandle": "optiflow.interfaces.client",
    "Settings": "optiflow.settings",
    "Prompt": "optiflow.core.prompt",
    "Section": "optiflow.core.prompt",
    "PromptDescriptor": "optiflow.core.prompt",
    "SectionOverride": "optiflow.core.overrides",
    "PromptOverrides": "optiflow.core.overrides",
    "Version": "optiflow.core.overrides",
    "Applied": "optiflow.core.overrides",
    "Dataset": "optiflow.core.dataset",
    "Sample": "optiflow.core.dataset",
    "Experiment": "optiflow.core.experiment",
    "ModelConfig": "optiflow.core.model",
    "Score": "optiflow.core.checks",
    "CompressSpec": "optiflow.core.compress",
    "Modification": "optiflow.core.compress",
    "RejectedModification": "optiflow.core.compress",
    "OptimizationReport": "optiflow.core.compress",
    "OptimizeResult": "optiflow.core.result",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'optiflow' has no attribute {name!r}")
    return getattr(import_module(module), name)


__all__ = [
    "Applied",
    "Client",
    "CompressSpec",
    "ConfigError",
    "Dataset",
    "Experiment",
    "JobError",
    "JobHandle",
    "ModelConfig",
    "ModelProviderError",
    "Modification",
    "NotFoundError",
    "OptiflowError",
    "OptimizationReport",
    "OptimizeResult",
    "Prompt",
    "PromptChangedError",
    "PromptDescriptor",
    "PromptOverrides",
    "RejectedModification",
    "Sample",
    "Score",
    "Section",
    "SectionOverride",
    "Settings",
    "StaleOverrideError",
    "StoreError",
    "ValidationError",
    "Version",
]
