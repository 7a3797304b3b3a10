"""The held-out test (splits): the final best against the baseline on the test split.

Always the paired test, whatever rule selection used (a strictly better score on one run of the
test split is not evidence): "improved" only when it shows the gain above 0 at the job's
``alpha``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime

from optiflow.core.actions import Action
from optiflow.core.evaluation import EvalResult, trial_summary
from optiflow.core.gate.decision import RunPlan
from optiflow.core.gate.outcomes import Outcomes
from optiflow.core.optimize.base import BASELINE_ID, WorkflowBase
from optiflow.core.optimize.selection import (
    SelectionFigures,
    next_runs,
)
from optiflow.core.optimize.state import OptimizeState, TestOutcome, TestReport
from optiflow.core.optimize.termination import TerminationReason
from optiflow.core.optimize.trial import Candidate
from optiflow.core.step import Step


class HeldOutMixin(WorkflowBase):
    """Starting the test step at the end of the run, its rounds, and the test report."""

    def _stop(
        self, state: OptimizeState, reason: TerminationReason, at: datetime
    ) -> tuple[OptimizeState, Action]:
        state = state.model_copy(update={"termination": reason, "pending": ()})
        test_ids = self.spec.test_ids()
        if not test_ids:
            return self._finish(state, at)
        ids = [BASELINE_ID]
        if state.best_candidate_id and state.best_candidate_id != BASELINE_ID:
            ids.append(state.best_candidate_id)
        runs = self.spec.eval_runs
        if len(ids) == 2:  # confirmed by the paired test, whatever rule selection used
            runs = max(runs, self.spec.acceptance.first_runs)
        targets = tuple(
            self.target(self._test_candidate(state.candidate(cid)), test_ids, runs=runs) for cid in ids
        )
        state = state.model_copy(
            update={"phase": "test", "racing": (), "outcomes": {}, "costs": {}, "race_round": 1}
        )
        return state, Step(index=state.step_index, name="test", targets=targets)

    def _test_candidate(self, candidate: Candidate) -> Candidate:
        suffix = f"test-{candidate.candidate_id}"
        return candidate.model_copy(
            update={"mask_id": self.tag(suffix), "experiment_id": f"{self.job_id}-{suffix}"}
        )

    def _after_test(
        self, state: OptimizeState, by_exp: Mapping[str, list[EvalResult]], at: datetime, *, more: bool = True
    ) -> tuple[OptimizeState, Action]:
        best_id = state.best_candidate_id or BASELINE_ID
        base_c = self._test_candidate(state.candidate(BASELINE_ID))
        best_c = self._test_candidate(state.candidate(best_id))
        racing = state.racing + tuple(
            r.compact() for c in {base_c.experiment_id, best_c.experiment_id} for r in by_exp.get(c, [])
        )
        state = state.model_copy(update={"racing": racing})
        grouped: dict[str, list[EvalResult]] = defaultdict(list)
        for r in racing:
            grouped[r.experiment_id].append(r)
        figures: SelectionFigures | None = None
        if best_id != BASELINE_ID:
            figures = self._confirm(grouped[base_c.experiment_id], grouped[best_c.experiment_id])
            if figures.verdict == "continue" and more:
                gate = self._race_gate
                base_o = Outcomes.of(figures.best_outcomes)
                plans, by_cid = next_runs(
                    gate, base_o, {best_id: Outcomes.of(figures.outcomes)}, list(figures.outcomes)
                )
                if by_cid:
                    round_ = state.race_round + 1
                    targets = self._ranges(base_c, RunPlan.merge_baseline(plans))
                    targets += self._ranges(best_c, by_cid[best_id].candidate)
                    step = Step(index=state.step_index, name=f"test-round-{round_}", targets=tuple(targets))
                    return state.model_copy(update={"race_round": round_}), step

        def outcome(cid: str, experiment_id: str) -> TestOutcome:
            rs = grouped.get(experiment_id, [])
            summary = trial_summary(rs)
            ok = [r for r in rs if not r.skipped]
            score = None if not ok or all(r.error for r in ok) else self.spec.scorer.score(summary)
            return TestOutcome(candidate_id=cid, score=score, summary=summary)

        base = outcome(BASELINE_ID, base_c.experiment_id)
        best = base if best_id == BASELINE_ID else outcome(best_id, best_c.experiment_id)
        confirmed: bool | None = None
        if best_id != BASELINE_ID:
            confirmed = figures is not None and figures.accepted and (self.cost_type or figures.gain_low > 0)
        report = TestReport(
            sample_ids=self.spec.test_ids(),
            baseline=base,
            best=best,
            confirmation=figures,
            confirmed=confirmed,
        )
        state = state.model_copy(update={"test": report, "racing": (), "race_round": 0})
        return self._finish(state, at)

    def _confirm(self, base: Sequence[EvalResult], best: Sequence[EvalResult]) -> SelectionFigures:
        """The best against the baseline on the test split: the selection's paired test, at the
        job's ``alpha`` (one claim, not one of many comparisons)."""
        return self._test(
            comparison=1,
            level=self.spec.acceptance.alpha,
            against=BASELINE_ID,
            best=Outcomes.from_results(base),
            contender=Outcomes.from_results(best),
            ids=self.spec.test_ids(),
            best_costs=self._costs({}, base) if self.cost_type else None,
            costs=self._costs({}, best) if self.cost_type else None,
        )
