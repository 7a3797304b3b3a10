"""Determinism, tested when it matters: ``auto``'s deterministic rule crowns nothing on one run.

``auto`` calls a model deterministic when every selection sample's baseline runs agree; a sampled
model whose samples are mostly sure (pass probability 0 or 1) passes that test often, and then a
strictly better score on one run crowns noise. So before a crowning under that rule the contender
and the best are run once more on the selection samples (one more run each, a new run index, so
no cached answer): when every sample answers as before the contender is crowned as today's rule
decided; when any sample flips, the job switches to the paired selection: this iteration's
candidates are decided by the paired race (their runs so far, the reproduction's included) and
so is every later one. On a truly deterministic model this costs one run of two candidates on
the selection samples per crowning, and the decisions are today's rule's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime

from optiflow.core.actions import Action
from optiflow.core.evaluation import EvalResult
from optiflow.core.gate.outcomes import Outcomes
from optiflow.core.optimize.base import BASELINE_ID
from optiflow.core.optimize.race import RaceMixin
from optiflow.core.optimize.state import OptimizeState
from optiflow.core.optimize.trial import Candidate
from optiflow.core.step import EvalTarget, Step


def flipped(outcomes: Sequence[Outcomes], ids: Sequence[str]) -> list[str]:
    """The samples whose answered runs disagree in any of ``outcomes``."""
    return [s for s in ids if any(len(set(o.answered(s))) > 1 for o in outcomes)]


class ReproduceMixin(RaceMixin):
    """The reproduction step before a crowning under ``auto``'s deterministic rule."""

    def _once_more(self, candidate: Candidate, outcomes: Outcomes, ids: Sequence[str]) -> EvalTarget:
        """One more run of ``candidate`` on ``ids``, at the first run index none of them has."""
        first = max((outcomes.next_run(s) for s in ids), default=0)
        return self.target(candidate, ids, runs=1, first_run=first)

    def _decide_once(
        self, state: OptimizeState, by_exp: Mapping[str, list[EvalResult]], at: datetime
    ) -> tuple[OptimizeState, Action]:
        """Today's rule on the iteration's evaluation; a crowning waits for its reproduction."""
        trials = [self._trial(state.candidate(cid), by_exp) for cid in state.pending]
        decision = self._acceptance(state, trials)
        if decision.accepted is None:
            return self._record_iteration(state, trials, at, step_index=state.step_index - 1)
        ids = self.selection_ids()
        sel = set(ids)
        best_id = state.best_candidate_id or BASELINE_ID
        outcomes, costs = dict(state.outcomes), dict(state.costs)
        racing: list[EvalResult] = []
        for cid in state.pending:
            rs = by_exp.get(state.candidate(cid).experiment_id, [])
            racing.extend(r.compact() for r in rs)
            picked = [r for r in rs if r.sample_id in sel]
            outcomes[cid] = Outcomes.from_results(picked)
            if self.cost_type:
                costs[cid] = self._costs({}, picked)
        best_outcomes = outcomes.get(best_id, Outcomes())
        targets = (
            self._once_more(state.candidate(decision.accepted), outcomes[decision.accepted], ids),
            self._once_more(state.candidate(best_id), best_outcomes, ids),
        )
        state = state.model_copy(
            update={
                "outcomes": outcomes,
                "costs": costs,
                "racing": tuple(racing),
                "reproducing": decision.accepted,
            }
        )
        name = f"iteration-{len(state.iterations)}-reproduce"
        return state, Step(index=state.step_index, name=name, targets=targets)

    def _after_reproduce(
        self, state: OptimizeState, by_exp: Mapping[str, list[EvalResult]], at: datetime
    ) -> tuple[OptimizeState, Action]:
        """Crown as decided when every sample answered as before, else switch to paired."""
        cid = state.reproducing
        assert cid is not None
        ids = self.selection_ids()
        sel = set(ids)
        best_id = state.best_candidate_id or BASELINE_ID
        outcomes, costs, racing = dict(state.outcomes), dict(state.costs), list(state.racing)
        for c in (cid, best_id):
            rs = [r for r in by_exp.get(state.candidate(c).experiment_id, []) if r.sample_id in sel]
            outcomes[c] = outcomes.get(c, Outcomes()).extend(Outcomes.from_results(rs))
            if self.cost_type:
                costs[c] = self._costs(costs.get(c, {}), rs)
            if c == cid:
                racing.extend(r.compact() for r in rs)
        flips = flipped([outcomes[cid], outcomes[best_id]], ids)
        step_index = state.candidate(state.pending[0]).step_index
        if not flips:
            grouped: dict[str, list[EvalResult]] = defaultdict(list)
            for r in state.racing:  # the iteration's own evaluation: the trials today's rule read
                grouped[r.experiment_id].append(r)
            trials = [self._trial(state.candidate(p), grouped) for p in state.pending]
            state = state.model_copy(update={"reproducing": None, "racing": ()})
            state = self._recorded(state, trials, at, step_index=step_index, chosen=(cid,))
            state = state.model_copy(
                update={
                    "outcomes": {cid: outcomes[cid]},
                    "costs": {cid: costs[cid]} if cid in costs else {},
                }
            )
            return self._after_iteration(state, at)
        number = len(state.iterations)
        why = (
            f"{state.rule_reason}; iteration {number}: {len(flips)} of {len(ids)} selection samples "
            "answered differently when run once more (the model is not deterministic), so paired "
            "selection from that iteration on"
        )
        state = state.model_copy(
            update={
                "rule": "paired",
                "rule_reason": why,
                "rule_switched_at": number,
                "reproducing": None,
                "outcomes": outcomes,
                "costs": costs,
                "racing": tuple(racing),
                "race_round": 1,
            }
        )
        return self._race(state, {}, at)


__all__ = ["ReproduceMixin", "flipped"]
