"""The budget cut: a step that ran out of the job's hard budget ends the run there.

The baseline is recorded over what was evaluated; the iteration's candidates evaluated in full are
decided as usual, those cut short are ``cancelled`` trials, never accepted nor observed; no test
step is started.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime

from optiflow.core.actions import Action, Fail
from optiflow.core.budget import budget_line
from optiflow.core.evaluation import EvalResult
from optiflow.core.optimize.base import BASELINE_ID
from optiflow.core.optimize.race import RaceMixin
from optiflow.core.optimize.state import OptimizeState
from optiflow.core.optimize.termination import TerminationCause, TerminationReason
from optiflow.core.optimize.trial import TrialResult
from optiflow.core.step import StepResults


class BudgetCutMixin(RaceMixin):
    """``budget_exhausted``: record what the step evaluated and finish."""

    def _out_of_budget(
        self,
        state: OptimizeState,
        results: StepResults,
        by_exp: Mapping[str, list[EvalResult]],
        at: datetime,
    ) -> tuple[OptimizeState, Action]:
        """The step ran out of the job's budget: record what it evaluated and end the run with
        termination reason ``budget_exhausted`` (no further step, no test step)."""
        assert state.budget is not None
        line = budget_line(state.budget)
        if state.phase == "baseline":
            trial = self._trial(state.candidate(BASELINE_ID), by_exp)
            if not trial.completed or trial.acceptance_score is None:
                failed = state.model_copy(update={"phase": "done", "ended_at": at, "trials": (trial,)})
                return failed, Fail(error=f"the budget ran out before the baseline was evaluated: {line}")
            state = self._baseline_recorded(state, trial, at)
        elif state.phase == "propose":  # the rewrites are not evaluated: no iteration
            errors = tuple(f"{r.id}: {r.error}" for r in results.rewrites if r.error is not None)
            state = state.model_copy(update={"proposal_errors": state.proposal_errors + errors})
        elif state.phase == "trials" and state.reproducing is not None:
            # the reproduction was cut short: the contender is not crowned on one run
            grouped: dict[str, list[EvalResult]] = defaultdict(list)
            for r in state.racing:
                grouped[r.experiment_id].append(r)
            trials = [self._trial(state.candidate(cid), grouped) for cid in state.pending]
            first = state.candidate(state.pending[0]).step_index
            state = self._recorded(state, trials, at, step_index=first, chosen=(None,))
            state = state.model_copy(update={"reproducing": None, "racing": ()})
        elif state.phase == "trials" and state.rule == "paired":
            state, figures = self._race_update(state, by_exp)
            racing: dict[str, list[EvalResult]] = defaultdict(list)
            for r in state.racing:
                racing[r.experiment_id].append(r)
            state = self._race_close(state, figures, at, cut=lambda t: self._cut(t, racing))
            closed = state.iterations[-1]
            if not any(t.completed for t in state.trials if t.candidate_id in closed.candidate_ids):
                last = closed.model_copy(update={"status": "budget_exhausted"})
                state = state.model_copy(update={"iterations": (*state.iterations[:-1], last)})
        elif state.phase == "trials":
            trials = [self._cut(self._trial(state.candidate(cid), by_exp), by_exp) for cid in state.pending]
            # auto's deterministic rule crowns nothing it could not reproduce
            unreproduced: tuple[str | None] | None = (None,) if self._reproduces(state) else None
            state = self._recorded(state, trials, at, step_index=state.step_index - 1, chosen=unreproduced)
            if not any(t.completed for t in trials):
                last = state.iterations[-1].model_copy(update={"status": "budget_exhausted"})
                state = state.model_copy(update={"iterations": (*state.iterations[:-1], last)})
        reason = TerminationReason(
            cause=TerminationCause.BUDGET_EXHAUSTED, message=line[0].upper() + line[1:]
        )
        return self._finish(state.model_copy(update={"termination": reason, "pending": ()}), at)

    @staticmethod
    def _cut(trial: TrialResult, by_exp: Mapping[str, list[EvalResult]]) -> TrialResult:
        """A trial whose evaluations the budget cut short is ``cancelled``: its score is over a
        part of the samples, so it is neither accepted nor shown to the optimizer."""
        rs = by_exp.get(trial.experiment_id, [])
        skipped = sum(1 for r in rs if r.budget_skipped)
        if not skipped:
            return trial
        error = f"budget exhausted: {len(rs) - skipped} of {len(rs)} evaluations made"
        return trial.model_copy(update={"status": "cancelled", "error": error})
