"""The contract between a job kind's workflow and the driver (pure).

A workflow is a state machine over a frozen, JSON round-trippable state (the checkpoint):
``start(count_tokens)`` and ``advance(state, results)`` each return a :class:`Transition`: the
new state, the next action, and what the step produced (trials, rejections, events). The driver
persists a transition in one transaction and launches its action; it never looks inside a state.

Every kind's state extends :class:`~optiflow.core.checkpoint.JobState`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from optiflow.core import progress
from optiflow.core.actions import Action, Fail, Finish
from optiflow.core.budget import BUDGET_EXHAUSTED, BudgetReport, budget_line
from optiflow.core.checkpoint import JobState
from optiflow.core.records import Event, Rejection, Trial
from optiflow.core.step import Step, StepResults
from optiflow.errors import JobError

TokenCounter = Callable[[str], int]


S = TypeVar("S", bound=JobState)
S_co = TypeVar("S_co", bound=JobState, covariant=True)


@dataclass(frozen=True)
class Transition(Generic[S]):
    """A workflow's answer to ``start`` or ``advance``: everything the driver writes and runs."""

    state: S
    action: Action
    trials: tuple[Trial, ...] = ()
    rejections: tuple[Rejection, ...] = ()
    events: tuple[Event, ...] = ()

    @property
    def step_index(self) -> int:
        """The job's step after this transition: the next step's index, or the steps done."""
        return self.action.index if isinstance(self.action, Step) else self.state.step_index

    @property
    def ends(self) -> bool:
        return isinstance(self.action, Finish | Fail)


class Workflow(Protocol[S]):
    """What the driver needs of a job kind's workflow."""

    def start(self, count_tokens: TokenCounter) -> Transition[S]: ...

    def advance(self, state: S, results: StepResults) -> Transition[S]: ...

    def load_state(self, data: Mapping[str, Any]) -> S: ...


def started(state: S, action: Action, *, events: Sequence[Event] = ()) -> Transition[S]:
    """The transition of ``start``: the first action, and the progress before any step."""
    counts = progress.counts_after(_next_step(action), completed=0, failed=0, rejected=0, evaluations_done=0)
    return Transition(state, action, events=(*events, progress.progress_event(0, counts)))


def advanced(
    state: S,
    results: StepResults,
    action: Action,
    *,
    rejected: int,
    trials: Sequence[Trial] | None = None,
    rejections: Sequence[Rejection] = (),
    events: Sequence[Event] = (),
) -> Transition[S]:
    """The transition of ``advance``: the step's trials (one per target, unless the workflow
    gives richer ones), the trial counts carried in the state, and the events a watcher sees —
    the trials, the progress counts, then the workflow's own (iterations, a new best), and
    ``budget_exhausted`` when the step ran out of the job's budget."""
    made = tuple(progress.step_trials(results.step, results) if trials is None else trials)
    state = state.model_copy(
        update={
            "trials_completed": state.trials_completed + sum(1 for t in made if t.status == "completed"),
            "trials_failed": state.trials_failed + sum(1 for t in made if t.status == "failed"),
        }
    )
    counts = progress.counts_after(
        _next_step(action),
        completed=state.trials_completed,
        failed=state.trials_failed,
        rejected=rejected,
        evaluations_done=state.stats.evaluations,
    )
    return Transition(
        state,
        action,
        trials=made,
        rejections=tuple(rejections),
        events=(
            *progress.trial_events(made),
            progress.progress_event(results.step.index + 1, counts),
            *events,
            *((exhausted_event(results.budget),) if results.budget and results.budget.exhausted else ()),
        ),
    )


def exhausted_event(report: BudgetReport) -> Event:
    """The job's budget ran out (stored once per job: a stable key); the payload is the
    :class:`~optiflow.core.budget.BudgetReport` and its ``line`` (what the page shows)."""
    payload = {**report.model_dump(mode="json"), "line": budget_line(report)}
    return Event(type=BUDGET_EXHAUSTED, key=BUDGET_EXHAUSTED, payload=payload)


def noted(state: S, results: StepResults) -> S:
    """``state`` with the job's budget and spend after this step (a job without a budget: as it
    is). A workflow calls it first in ``advance``, so the report it may build carries them."""
    return state if results.budget is None else state.model_copy(update={"budget": results.budget})


class StepBoundError(JobError):
    """A job reached the bound on its steps that its workflow computes from its spec (every job
    ends: a workflow that would go past it has a bug, and the job fails instead of looping)."""

    code = "step_bound_exceeded"


class StalledStepError(JobError):
    """A step every evaluation of which fail-fast would skip (each of its experiments already
    regressed): it could decide nothing, so the job fails instead of launching it."""

    code = "step_all_skipped"


def failure(error: JobError) -> Fail:
    """The action that ends a job with ``error``: its text starts with the error's stable code."""
    return Fail(error=f"{error.code}: {error}", code=error.code)


def bounded(action: Action, bound: int, why: str) -> Action:
    """``action``, unless it is a step at or past ``bound`` (the most steps the job's spec allows;
    ``why`` says how the bound is computed): then the job fails with :class:`StepBoundError`."""
    if not isinstance(action, Step) or action.index < bound:
        return action
    error = StepBoundError(
        f"the job would start step {action.index + 1} ({action.name}) but its spec allows at most "
        f"{bound} ({why}); it fails instead of looping"
    )
    return failure(error)


def _next_step(action: Action) -> Step | None:
    return action if isinstance(action, Step) else None


__all__ = [
    "StalledStepError",
    "StepBoundError",
    "TokenCounter",
    "Transition",
    "Workflow",
    "advanced",
    "bounded",
    "exhausted_event",
    "failure",
    "noted",
    "started",
]
