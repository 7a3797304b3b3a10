"""A step: one unit of distributed work a workflow asks for, and the results it gets back.

The driver (the only code that knows Celery) turns a :class:`Step` into one chord: an evaluation
per (target, sample, run), a proposal per section, a rewrite per request, all in parallel; the
chord's body hands their results back to the workflow as :class:`StepResults`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationError, model_validator

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.budget import BudgetReport
from optiflow.core.evaluation import EvalResult
from optiflow.core.experiment import Experiment
from optiflow.core.faithfulness import Faithfulness
from optiflow.core.model import ModelConfig
from optiflow.core.overrides import SectionOverride
from optiflow.core.sections import SectionPath


class EvalTarget(Frozen):
    """Evaluate ``sample_ids`` x ``runs`` under ``experiment``: run indices ``first_run`` ..
    ``first_run + runs - 1`` (a later round of a gate adds runs after those already made).

    ``overrides`` is what the driver writes under ``experiment.overrides_tag`` before the step
    (and deletes after). ``guard`` enables fail-fast: a failure of one of these samples is a
    regression, after which the experiment's remaining evaluations are skipped. One step may hold
    several targets of the same experiment (different samples, different runs). ``probe`` (of
    ``guard``) names the samples most likely to regress, best first: their first run goes ahead
    of every other evaluation of the target (:mod:`optiflow.core.relevance`).
    """

    experiment: Experiment
    overrides: tuple[SectionOverride, ...] = ()
    model_params: dict[str, JSONValue] = Field(default_factory=dict)
    sample_ids: tuple[str, ...]
    runs: int = Field(ge=1)
    first_run: int = Field(default=0, ge=0)
    guard: frozenset[str] | None = None
    probe: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _probe_is_guarded(self) -> EvalTarget:
        probe = set(self.probe)
        if not probe <= (self.guard or frozenset()) or not probe <= set(self.sample_ids):
            raise ValueError("a target's probe must be guarded samples it evaluates")
        return self

    @property
    def size(self) -> int:
        return len(self.sample_ids) * self.runs

    @property
    def run_indices(self) -> range:
        return range(self.first_run, self.first_run + self.runs)


class Hold(Frozen):
    """An evaluation queued behind its step's probes (:attr:`EvalTarget.probe`): before calling
    the model it waits for the step's ``probes`` probe evaluations to answer, or for its own
    experiment to regress — never more than ``wait`` seconds after the first probe began (or,
    before any has, after the held evaluation itself began), so a lost probe delays it, no more.

    The clock is the probes' own, not the step's publish: publishing a step of a few hundred
    evaluations takes a loaded control worker longer than a fast model's call, and a deadline
    counted from before it had passed by the time the probes answered."""

    step: int = Field(ge=0)
    probes: int = Field(ge=1)
    latency: float = Field(ge=0.0)
    """The model's typical call time (seconds): the probes answer no sooner, no use looking before."""
    wait: float = Field(gt=0.0)

    @classmethod
    def read(cls, raw: object) -> Hold | None:
        """The hold of a queued evaluation, or None when it has none or one this version cannot
        read (queued by an older worker, with absolute deadlines): holding only saves calls, so an
        evaluation whose hold does not read runs at once rather than fail its job."""
        if raw is None:
            return None
        try:
            return cls.model_validate(raw)
        except ValidationError:
            return None


class SectionEdit(Frozen):
    """A proposed new body for one section (seed 000)."""

    path: SectionPath
    original_hash: str
    proposed_body: str
    original_tokens: int
    proposed_tokens: int
    faithfulness: Faithfulness | None = None
    """What the faithfulness check measured (``strategy: {type: llm}``), or None (not checked)."""

    @property
    def token_reduction(self) -> int:
        return self.original_tokens - self.proposed_tokens


class ProposalError(Frozen):
    """A section without a proposal: the strategy failed (``error``), or every proposal it made was
    refused by the faithfulness check (``refused``: ``error`` is the reason, ``proposed_body`` the
    last proposal, never evaluated)."""

    path: SectionPath
    error: str
    refused: bool = False
    proposed_body: str | None = None
    faithfulness: Faithfulness | None = None
    attempts: int = 1


class IterationFeedback(Frozen):
    """One past iteration as a rewrite request shows it (seed 003: the last 3 iterations)."""

    iteration: int = Field(ge=0)
    score: float | None
    success_rate: float | None


class FailingExample(Frozen):
    """A sample the current best configuration fails, shown to the rewriting model."""

    sample_id: str
    input: JSONValue
    expected: JSONValue = None
    reason: str = ""


class RewriteRequest(Frozen):
    """Ask a model for a better body of one section (the LLM rewrite mutator's I/O, as data).

    The driver runs each request as one task (:func:`optiflow.llm.rewrite.run_rewrite`) in the
    step's chord and hands the answers back as :class:`RewriteReply` in ``StepResults.rewrites``;
    the workflow validates the text (non-empty, at most ``max_length`` characters).
    """

    id: str = Field(min_length=1)
    model: ModelConfig
    prompt_id: str = ""
    section: SectionPath
    current: str
    max_length: int = Field(ge=1)
    iterations: tuple[IterationFeedback, ...] = ()
    failing: tuple[FailingExample, ...] = ()
    instructions: str = ""
    variant: int = Field(default=0, ge=0)


class RewriteReply(Frozen):
    """What one rewrite request produced: the model's text, or the error that stopped it."""

    id: str
    text: str | None = None
    error: str | None = None
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    cost: float = Field(default=0.0, ge=0.0)


class Step(Frozen):
    """One unit of distributed work: every target's evaluations, every section proposal and every
    rewrite request run in parallel; ``advance`` is called once with all of their results."""

    type: Literal["step"] = "step"
    index: int = Field(ge=0)
    name: str
    targets: tuple[EvalTarget, ...] = ()
    propose: tuple[SectionPath, ...] = ()
    rewrites: tuple[RewriteRequest, ...] = ()

    @property
    def size(self) -> int:
        return sum(t.size for t in self.targets) + len(self.propose) + len(self.rewrites)


class StepResults(Frozen):
    """What a step's chord produced, with the step it answers. ``budget`` (a job with a budget)
    is the job's spend once the step ended, read by the driver from the job scratch: when it says
    ``exhausted``, evaluations of the step may have been skipped for the budget (reason
    ``budget_exhausted``) and the workflow ends the job with what it has."""

    step: Step
    evals: tuple[EvalResult, ...] = ()
    edits: tuple[SectionEdit, ...] = ()
    proposal_errors: tuple[ProposalError, ...] = ()
    rewrites: tuple[RewriteReply, ...] = ()
    budget: BudgetReport | None = None

    @property
    def budget_exhausted(self) -> bool:
        return self.budget is not None and self.budget.exhausted
