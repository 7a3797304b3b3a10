"""Actions a workflow asks the driver to run, and the results it gets back.

Workflows are pure state machines: ``start(...) -> (state, action)`` and
``advance(state, results) -> (state, action)``. The driver (the only code that knows Celery) turns
a :class:`Step` into one chord and calls ``advance`` with its results.
"""

from __future__ import annotations

from pydantic import Field, SerializeAsAny

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.evaluation import EvalResult
from optiflow.core.experiment import Experiment
from optiflow.core.overrides import SectionOverride
from optiflow.core.prompt import SectionPath


class EvalTarget(Frozen):
    """Evaluate ``sample_ids`` x ``runs`` under ``experiment``.

    ``overrides`` is what the driver writes under ``experiment.overrides_tag`` before the step
    (and deletes after). ``guard`` enables fail-fast: a failure of one of these samples is a
    regression, after which the experiment's remaining evaluations are skipped.
    """

    experiment: Experiment
    overrides: tuple[SectionOverride, ...] = ()
    model_params: dict[str, JSONValue] = Field(default_factory=dict)
    sample_ids: tuple[str, ...]
    runs: int = Field(ge=1)
    guard: frozenset[str] | None = None

    @property
    def size(self) -> int:
        return len(self.sample_ids) * self.runs


class SectionEdit(Frozen):
    """A proposed new body for one section (seed 000)."""

    path: SectionPath
    original_hash: str
    proposed_body: str
    original_tokens: int
    proposed_tokens: int

    @property
    def token_reduction(self) -> int:
        return self.original_tokens - self.proposed_tokens


class ProposalError(Frozen):
    path: SectionPath
    error: str


class Step(Frozen):
    """One unit of distributed work: every target's evaluations and every section proposal run
    in parallel; ``advance`` is called once with all of their results."""

    index: int = Field(ge=0)
    name: str
    targets: tuple[EvalTarget, ...] = ()
    propose: tuple[SectionPath, ...] = ()

    @property
    def size(self) -> int:
        return sum(t.size for t in self.targets) + len(self.propose)


class StepResults(Frozen):
    evals: tuple[EvalResult, ...] = ()
    edits: tuple[SectionEdit, ...] = ()
    proposal_errors: tuple[ProposalError, ...] = ()


class Finish(Frozen):
    report: SerializeAsAny[Frozen]  # the workflow's report model


class Fail(Frozen):
    error: str


Action = Step | Finish | Fail
