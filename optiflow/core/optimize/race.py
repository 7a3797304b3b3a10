"""The paired selection's race (DESIGN §2a): contenders against the best, round by round.

Each round adds runs only to the contenders still undecided (and the best, shared); a contender
shown better is crowned, one clearly not better drops out, ``max_runs`` caps every sample.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from optiflow.core.actions import Action
from optiflow.core.evaluation import EvalResult
from optiflow.core.gate.decision import RunPlan
from optiflow.core.gate.outcomes import Outcomes
from optiflow.core.optimize.base import BASELINE_ID, WorkflowBase
from optiflow.core.optimize.selection import (
    SelectionFigures,
    next_runs,
    pick,
)
from optiflow.core.optimize.state import OptimizeState
from optiflow.core.optimize.trial import TrialResult
from optiflow.core.step import Step


class RaceMixin(WorkflowBase):
    """The race's rounds and its close (the iteration's trials with their figures)."""

    def _race_update(
        self, state: OptimizeState, by_exp: Mapping[str, list[EvalResult]]
    ) -> tuple[OptimizeState, dict[str, SelectionFigures]]:
        """Merge a round's results in (contenders and the best), and judge every contender."""
        sel = set(self.selection_ids())
        best_id = state.best_candidate_id or BASELINE_ID
        outcomes = dict(state.outcomes)
        costs = dict(state.costs)
        racing = list(state.racing)
        for cid in dict.fromkeys((best_id, *state.pending)):
            rs = by_exp.get(state.candidate(cid).experiment_id, [])
            if cid in state.pending:
                racing.extend(r.compact() for r in rs)
            picked = [r for r in rs if r.sample_id in sel]
            outcomes[cid] = outcomes.get(cid, Outcomes()).extend(Outcomes.from_results(picked))
            if self.cost_type:
                costs[cid] = self._costs(costs.get(cid, {}), picked)
        state = state.model_copy(update={"outcomes": outcomes, "costs": costs, "racing": tuple(racing)})
        return state, {cid: self._judge(state, cid) for cid in state.pending}

    def _judge(self, state: OptimizeState, cid: str) -> SelectionFigures:
        best_id = state.best_candidate_id or BASELINE_ID
        return self._test(
            comparison=int(cid[1:]),
            against=best_id,
            best=state.outcomes[best_id],
            contender=state.outcomes.get(cid, Outcomes()),
            ids=self.selection_ids(),
            best_costs=state.costs.get(best_id),
            costs=state.costs.get(cid),
        )

    def _race(
        self, state: OptimizeState, by_exp: Mapping[str, list[EvalResult]], at: datetime
    ) -> tuple[OptimizeState, Action]:
        """One round of the race: crown when a contender is shown better, else more runs for the
        contenders still undecided (and the best, shared), else close the iteration."""
        state, figures = self._race_update(state, by_exp)
        open_ = [cid for cid in state.pending if figures[cid].verdict == "continue"]
        if open_ and not any(f.accepted for f in figures.values()):
            gate = self._race_gate
            best_id = state.best_candidate_id or BASELINE_ID
            plans, by_cid = next_runs(
                gate,
                state.outcomes[best_id],
                {cid: state.outcomes.get(cid, Outcomes()) for cid in open_},
                self.selection_ids(),
            )
            if by_cid:
                number = len(state.iterations)
                round_ = state.race_round + 1
                targets = self._ranges(state.candidate(best_id), RunPlan.merge_baseline(plans))
                for cid, p in by_cid.items():
                    targets += self._ranges(state.candidate(cid), p.candidate)
                step = Step(
                    index=state.step_index, name=f"iteration-{number}-round-{round_}", targets=tuple(targets)
                )
                return state.model_copy(update={"race_round": round_}), step
        return self._after_iteration(self._race_close(state, figures, at), at)

    def _race_close(
        self,
        state: OptimizeState,
        figures: Mapping[str, SelectionFigures],
        at: datetime,
        *,
        cut: Callable[[TrialResult], TrialResult] | None = None,
    ) -> OptimizeState:
        """The iteration's trials (every round's evaluations) with their figures; the contender
        with the largest estimated gain among those shown better is crowned."""
        by_exp: dict[str, list[EvalResult]] = defaultdict(list)
        for r in state.racing:
            by_exp[r.experiment_id].append(r)
        trials = []
        for cid in state.pending:
            t = self._trial(state.candidate(cid), by_exp)
            trials.append((cut(t) if cut else t).model_copy(update={"selection": figures.get(cid)}))
        eligible = {t.candidate_id: figures[t.candidate_id] for t in trials if t.completed}
        chosen = pick(eligible, list(state.pending))
        first = state.candidate(state.pending[0]).step_index if state.pending else None
        state = self._recorded(state, trials, at, step_index=first, chosen=(chosen,))
        best_id = state.best_candidate_id or BASELINE_ID
        keep = {best_id}
        return state.model_copy(
            update={
                "outcomes": {k: v for k, v in state.outcomes.items() if k in keep},
                "costs": {k: v for k, v in state.costs.items() if k in keep},
                "racing": (),
                "race_round": 0,
            }
        )

    def _selection_facts(self, state: OptimizeState, cid: str) -> dict[str, Any]:
        """A racing or just-decided contender's paired figures, for its trial record (the page)."""
        figures: SelectionFigures | None = None
        round_ = state.race_round
        if (
            state.rule == "paired"
            and state.phase == "trials"
            and cid in state.pending
            and cid in state.outcomes
        ):
            figures = self._judge(state, cid)
            round_ = max(1, state.race_round - 1)  # the next round's step is already issued
        elif (
            (t := state.trial(cid)) is not None
            and t.selection is not None
            and t.iteration == len(state.iterations) - 1
        ):
            figures = t.selection
            round_ = max(
                1, (figures.pairs - self.spec.acceptance.first_runs) // self.spec.acceptance.round_runs + 1
            )
        if figures is None:
            return {}
        facts: dict[str, Any] = {
            "round": round_,
            "gate": "paired",
            "gain": figures.gain,
            "gain_low": figures.gain_low,
            "gain_high": figures.gain_high,
            "pairs": figures.pairs,
            "selection": figures.model_dump(
                mode="json", exclude={"outcomes", "best_outcomes", "costs", "best_costs"}
            ),
        }
        if figures.verdict in ("accept", "reject", "capped"):
            facts["verdict"] = "accept" if figures.verdict == "accept" else "reject"
            facts["reason"] = figures.reason
        return facts
