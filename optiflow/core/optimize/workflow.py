"""The optimize workflow (seeds 001-004) as a pure state machine, run by the same driver as compress.

Steps (each is one chord):

1. ``baseline``: the baseline configuration (the baseline tag's snapshot) on the trial samples
   (all; train + val with splits). If every evaluation errors the job fails and the optimizer is
   never initialized. Otherwise it is iteration 0, the first best, and the optimizer is
   initialized with a :class:`RunContext`.
2. Each further iteration:

   - ``propose-N`` (only for a :class:`ModelAssistedOptimizer` with requests): the optimizer's
     :class:`~optiflow.core.actions.RewriteRequest` s, answered in ``StepResults.rewrites``;
   - ``iteration-N``: the optimizer's proposals are validated (rejections are recorded and never
     evaluated); each accepted candidate gets an id ``cK``, its own temporary tag
     ``opt-<job>-cK`` (its mask_id) and an :class:`EvalTarget`; all of them in one step, at most
     ``max_candidates_per_step``. Results become :class:`TrialResult` s; acceptance picks the
     new best (optionally by Mann-Whitney U); the optimizer observes the completed trials.
     An iteration whose proposals were all rejected is recorded without a step.

   After every iteration the termination policy (composite: first that fires) and then the
   optimizer's ``should_stop`` are asked; an optimizer that proposes nothing also ends the run.
3. ``test`` (splits only, when the dataset has test samples): the baseline and the best on the
   test split.

A step that ran out of the job's hard budget (``max_cost_usd`` / ``max_tokens``: the step's
results say ``budget_exhausted``) ends the run there with termination reason
``budget_exhausted``: the baseline is recorded over what was evaluated; the iteration's
candidates evaluated in full are decided as usual, and those cut short are ``cancelled`` trials,
never accepted nor observed; no test step is started (a cut test step reports what it got).

``Finish`` carries an :class:`OptimizationHistory`. Time comes from the injected ``clock``; the
termination policies read it, nothing else does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from optiflow.core import progress
from optiflow.core.actions import Action, Fail
from optiflow.core.evaluation import EvalResult
from optiflow.core.gate.outcomes import Outcomes
from optiflow.core.optimize.acceptance import Rule
from optiflow.core.optimize.base import BASELINE_ID, Clock, OptimizerFailed, optimizer_reason
from optiflow.core.optimize.budgetcut import BudgetCutMixin
from optiflow.core.optimize.heldout import HeldOutMixin
from optiflow.core.optimize.output import iteration_line, start_line
from optiflow.core.optimize.protocol import ModelAssistedOptimizer, RunContext
from optiflow.core.optimize.reproduce import ReproduceMixin
from optiflow.core.optimize.state import OptimizeState
from optiflow.core.optimize.termination import TerminationCause, TerminationReason
from optiflow.core.records import Event, Trial
from optiflow.core.step import RewriteReply, Step, StepResults
from optiflow.core.workflow import TokenCounter, Transition, advanced, bounded, noted, started


class OptimizeWorkflow(BudgetCutMixin, ReproduceMixin, HeldOutMixin):
    """The seed's loop: baseline, then propose, evaluate, select and observe until a stop; then
    the held-out test. The race, the held-out test and the budget cut are its parts."""

    def start(self, count_tokens: TokenCounter | None = None) -> Transition[OptimizeState]:
        """``count_tokens`` is accepted for the driver's uniform call and not used."""
        started_at = self.clock()
        baseline = self._candidate(
            BASELINE_ID, 0, 0, self.spec.baseline_configuration(), rationale="baseline"
        )
        state = OptimizeState(
            job_id=self.job_id,
            started_at=started_at,
            iteration_started_at=started_at,
            candidates=(baseline,),
            pending=(BASELINE_ID,),
        )
        targets = [self.target(baseline, self.spec.trial_ids())]
        acc = self.spec.acceptance
        if acc.sequential and acc.first_runs > self.spec.eval_runs:
            # auto / paired: the selection samples get first_runs baseline runs (two show a
            # deterministic model; paired pairs them); the baseline's trial keeps eval_runs runs.
            targets.append(
                self.target(
                    baseline,
                    self.selection_ids(),
                    runs=acc.first_runs - self.spec.eval_runs,
                    first_run=self.spec.eval_runs,
                )
            )
        step = Step(index=0, name="baseline", targets=tuple(targets))
        events = []
        if self.spec.treatment is not None:
            line = start_line(self.spec.name, self.spec.treatment, self.spec.objective)
            events.append(Event(type="optimize_started", key="optimize_started", payload={"line": line}))
        return started(state, step, events=events)

    @property
    def max_rounds(self) -> int:
        """The most steps the paired race takes (an iteration's candidates, or the held-out test):
        the first round, one per ``round_runs`` up to ``max_runs`` and as many for the best's runs
        that errored (each such round adds one of its runs), as compress's
        ``CompressWorkflow.max_rounds``."""
        acc = self.spec.acceptance
        later = -(-(acc.max_runs - acc.first_runs) // acc.round_runs)
        return 1 + later + acc.max_runs

    @property
    def selection_rounds(self) -> int:
        """The most steps one iteration's selection takes: one under ``none`` / ``mann_whitney``;
        the race's ``max_rounds`` under ``paired``; under ``auto`` (its rule is not known before
        the baseline) the iteration's step, the reproduction before a crowning and, when it flips,
        the race's later rounds."""
        test = self.spec.acceptance.test
        if test in ("none", "mann_whitney"):
            return 1
        return self.max_rounds + (1 if test == "auto" else 0)

    @property
    def max_steps(self) -> int:
        """The most steps a job of this spec takes: the baseline (its extra selection runs are in
        the same step), for each of the ``max_iterations`` its termination allows (the baseline is
        iteration 0) the rewrite requests and the candidates' ``selection_rounds`` (``iteration-N``,
        ``iteration-N-reproduce``, ``iteration-N-round-K``), and the held-out test's
        ``max_rounds`` (``test``, ``test-round-K``: always the paired test)."""
        rounds = self.selection_rounds
        return 1 + self.spec.termination.max_iterations() * (1 + rounds) + self.max_rounds

    @property
    def max_steps_why(self) -> str:
        iterations = self.spec.termination.max_iterations()
        return (
            f"baseline + {iterations} iteration(s) x (proposal + {self.selection_rounds} selection "
            f"round(s)) + {self.max_rounds} test round(s)"
        )

    def advance(self, state: OptimizeState, results: StepResults) -> Transition[OptimizeState]:
        new, action = self._advance(state, results)
        action = bounded(action, self.max_steps, self.max_steps_why)
        return advanced(
            new,
            results,
            action,
            rejected=len(new.rejections),
            trials=self._with_lineage(self._step_trials(state, new, results), new),
            rejections=new.rejections[len(state.rejections) :],
            events=self._events(state, new, results.step.index),
        )

    @staticmethod
    def _step_trials(before: OptimizeState, after: OptimizeState, results: StepResults) -> list[Trial]:
        """One trial per experiment of the step. Trial rows are keyed by experiment, and a paired
        race's later rounds (``iteration-N-round-K``, ``test-round-K``) only extend runs made
        earlier: the best's extension runs are not a trial (its row, from the step that evaluated
        it, keeps its full evaluation), and a contender's (a test experiment's) trial covers every
        round so far, not the last round's slice (as compress's ``_trials``). A reproduction step
        makes no trial row (the trials are the iteration's evaluation), unless it switched the job
        to the paired race: then the contenders' rows cover every run so far."""
        keep: set[str] | None
        if before.reproducing is not None and after.rule != "paired":
            return []
        if before.phase == "trials" and (before.rule == "paired" or before.reproducing is not None):
            keep = {before.candidate(cid).experiment_id for cid in before.pending}
        elif before.phase == "test":
            keep = None  # the baseline's and the best's test experiments, both racing
        else:
            return progress.step_trials(results.step, results)
        step = results.step
        if keep is not None:
            targets = tuple(t for t in step.targets if t.experiment.id in keep)
            step = step.model_copy(update={"targets": targets})
        evals = tuple(r for r in (*before.racing, *results.evals) if keep is None or r.experiment_id in keep)
        return progress.step_trials(step, results.model_copy(update={"evals": evals}))

    def _with_lineage(self, trials: Sequence[Trial], state: OptimizeState) -> list[Trial]:
        """A step's trials carry their candidate's parents, canonical config hash and rationale."""
        by_experiment = {c.experiment_id: c for c in state.candidates}
        out = []
        for trial in trials:
            c = by_experiment.get(trial.candidate_id)
            if c is None:
                out.append(trial)
                continue
            update = {
                "parent_candidate_ids": c.parent_candidate_ids,
                "config_hash": c.config_hash,
                "rationale": c.rationale,
                "configuration": c.configuration,
                "extra": {
                    **trial.extra,
                    "name": c.candidate_id,
                    **self._selection_facts(state, c.candidate_id),
                },
            }
            out.append(trial.model_copy(update=update))
        return out

    def _events(self, before: OptimizeState, after: OptimizeState, step_index: int) -> list[Event]:
        """The iterations this step closed (seed 003's progress lines) and a new best."""
        events = [
            progress.iteration_event(
                it.number, iteration_line(self.spec.name, it), score=it.score, new_best=it.new_best
            )
            for it in after.iterations[len(before.iterations) :]
        ]
        best = after.best_candidate_id
        if best is not None and best != before.best_candidate_id:
            trial = after.trial(best)
            score = trial.objective_score if trial is not None else None
            events.append(progress.best_changed(best, score, step_index=step_index))
        return events

    def _advance(self, state: OptimizeState, results: StepResults) -> tuple[OptimizeState, Action]:
        at = self.clock()
        state = noted(state, results).model_copy(
            update={
                "stats": state.stats.add(results.evals, proposals=len(results.rewrites)),
                "step_index": state.step_index + 1,
            }
        )
        by_exp: dict[str, list[EvalResult]] = defaultdict(list)
        for r in results.evals:
            by_exp[r.experiment_id].append(r)
        try:
            if results.budget_exhausted and state.phase in ("baseline", "propose", "trials"):
                return self._out_of_budget(state, results, by_exp, at)
            if state.phase == "baseline":
                return self._after_baseline(state, by_exp, at)
            if state.phase == "propose":
                return self._after_propose(state, results.rewrites, at)
            if state.phase == "trials":
                return self._after_trials(state, by_exp, at)
            if state.phase == "test":  # a test step the budget cut short reports what it got
                return self._after_test(state, by_exp, at, more=not results.budget_exhausted)
        except OptimizerFailed as exc:
            return state.model_copy(update={"phase": "done", "ended_at": at}), Fail(error=str(exc))
        return state, Fail(error=f"advance called on a finished job (phase {state.phase})")

    def _after_baseline(
        self, state: OptimizeState, by_exp: Mapping[str, list[EvalResult]], at: datetime
    ) -> tuple[OptimizeState, Action]:
        baseline = state.candidate(BASELINE_ID)
        every = by_exp.get(baseline.experiment_id, [])
        first = {baseline.experiment_id: [r for r in every if r.run < self.spec.eval_runs]}
        trial = self._trial(baseline, first)
        if not trial.completed or trial.acceptance_score is None or trial.objective_score is None:
            failed = state.model_copy(update={"phase": "done", "ended_at": at, "trials": (trial,)})
            return failed, Fail(error=f"baseline evaluation failed: {trial.error}")
        state = self._baseline_recorded(state, trial, at)
        sel = set(self.selection_ids())
        outcomes = Outcomes.from_results(r for r in every if r.sample_id in sel)
        rule, why = self._choose_rule(outcomes)
        update: dict[str, Any] = {"rule": rule, "rule_reason": why}
        if rule == "paired" or self.spec.acceptance.test == "auto":  # auto: for a reproduction
            update["outcomes"] = {BASELINE_ID: outcomes}
            if self.cost_type:
                update["costs"] = {BASELINE_ID: self._costs({}, [r for r in every if r.sample_id in sel])}
        state = state.model_copy(update=update)
        spec = self.spec
        context = RunContext(
            optimization_id=self.job_id,
            evaluation_suite_id=f"{spec.dataset.name}:{spec.check.type}",
            objective_name=spec.scorer.description(),
            objective=spec.objective,
            baseline_candidate_id=BASELINE_ID,
            baseline_score=trial.objective_score,
            max_candidates_per_step=spec.max_candidates_per_step,
            baseline_configuration=baseline.configuration,
            treatment=spec.factor,
            prompt_id=spec.prompt.id,
        )
        opt_state = self._call("initialize", lambda: self.optimizer.initialize(context))
        return self._after_iteration(state.model_copy(update={"optimizer": opt_state}), at)

    def _choose_rule(self, baseline: Outcomes) -> tuple[Rule, str]:
        """``auto``: today's rule (strictly better score) when every selection sample's baseline
        runs agree over at least 2 runs, else ``paired``."""
        test = self.spec.acceptance.test
        if test != "auto":
            return test, f"{test} (set in the job)"
        ids = self.selection_ids()
        answered = [baseline.answered(s) for s in ids]
        fewest = min((len(a) for a in answered), default=0)
        flaky = sum(1 for a in answered if len(set(a)) > 1)
        if fewest < 2:
            return "paired", (
                f"auto: {fewest} answered baseline run(s) of some sample cannot show the model "
                "deterministic, so paired selection"
            )
        if flaky == 0:
            return "none", (
                f"auto: every sample's baseline runs agreed ({fewest}+ runs): a deterministic model, "
                "so a strictly better score"
            )
        return "paired", (
            f"auto: {flaky} of {len(ids)} samples gave different results across baseline runs: "
            "a sampled model, so paired selection"
        )

    def _after_iteration(self, state: OptimizeState, at: datetime) -> tuple[OptimizeState, Action]:
        history = state.history()
        reason = self.spec.termination.check(history, at)
        if reason is not None:
            return self._stop(state, reason, at)
        assert state.optimizer is not None
        opt = state.optimizer
        decision = self._call("should_stop", lambda: self.optimizer.should_stop(opt, history))
        if decision.should_stop:
            return self._stop(state, optimizer_reason(decision.message, decision.reason), at)
        return self._next_iteration(state, at)

    def _next_iteration(self, state: OptimizeState, at: datetime) -> tuple[OptimizeState, Action]:
        state = state.model_copy(
            update={"iteration_started_at": at, "proposal_tokens": 0, "proposal_cost": 0.0}
        )
        if isinstance(self.optimizer, ModelAssistedOptimizer):
            assert state.optimizer is not None
            opt, history, k = state.optimizer, state.history(), self.spec.max_candidates_per_step
            assisted = self.optimizer
            requests = self._call("requests", lambda: assisted.requests(opt, history, k))
            if requests:
                step = Step(
                    index=state.step_index, name=f"propose-{len(state.iterations)}", rewrites=tuple(requests)
                )
                return state.model_copy(update={"phase": "propose"}), step
        return self._propose(state, at)

    def _after_propose(
        self, state: OptimizeState, replies: Sequence[RewriteReply], at: datetime
    ) -> tuple[OptimizeState, Action]:
        assert isinstance(self.optimizer, ModelAssistedOptimizer) and state.optimizer is not None
        opt, assisted = state.optimizer, self.optimizer
        received = self._call("receive", lambda: assisted.receive(opt, list(replies)))
        errors = tuple(f"{r.id}: {r.error}" for r in replies if r.error is not None)
        state = state.model_copy(
            update={
                "optimizer": received,
                "proposal_tokens": sum(r.prompt_tokens + r.completion_tokens for r in replies),
                "proposal_cost": sum(r.cost for r in replies),
                "proposal_errors": state.proposal_errors + errors,
            }
        )
        return self._propose(state, at)

    def _propose(self, state: OptimizeState, at: datetime) -> tuple[OptimizeState, Action]:
        assert state.optimizer is not None
        number = len(state.iterations)
        history = state.history()
        opt, k = state.optimizer, self.spec.max_candidates_per_step
        proposals = self._call("propose", lambda: self.optimizer.propose(opt, history, k))
        if not proposals:
            decision = self._call("should_stop", lambda: self.optimizer.should_stop(opt, history))
            if decision.should_stop:
                reason = optimizer_reason(decision.message, decision.reason)
            else:
                reason = TerminationReason(
                    cause=TerminationCause.EXHAUSTED, message="The optimizer proposed no new candidate"
                )
            return self._stop(state, reason, at)
        outcome = self.validator.validate(
            proposals,
            known_candidates=[c.candidate_id for c in state.candidates],
            seen_hashes={c.config_hash: c.candidate_id for c in state.candidates},
            max_candidates=k,
            step_index=state.step_index,
            iteration=number,
        )
        state = state.model_copy(update={"rejections": state.rejections + outcome.rejected})
        if not outcome.accepted:
            return self._record_iteration(state, [], at, step_index=None)
        first = len(state.candidates)
        new = tuple(
            self._candidate(
                f"c{first + i}",
                state.step_index,
                number,
                a.configuration,
                parent_candidate_ids=a.parent_candidate_ids,
                rationale=a.rationale,
            )
            for i, a in enumerate(outcome.accepted)
        )
        state = state.model_copy(
            update={
                "phase": "trials",
                "candidates": state.candidates + new,
                "pending": tuple(c.candidate_id for c in new),
            }
        )
        ids = self.spec.trial_ids()
        runs = self.spec.eval_runs
        if state.rule == "paired":
            runs = max(runs, self.spec.acceptance.first_runs)
            state = state.model_copy(update={"racing": (), "race_round": 1})
        step = Step(
            index=state.step_index,
            name=f"iteration-{number}",
            targets=tuple(self.target(c, ids, runs=runs) for c in new),
        )
        return state, step

    def _after_trials(
        self, state: OptimizeState, by_exp: Mapping[str, list[EvalResult]], at: datetime
    ) -> tuple[OptimizeState, Action]:
        if state.rule == "paired":
            return self._race(state, by_exp, at)
        if state.reproducing is not None:
            return self._after_reproduce(state, by_exp, at)
        if self._reproduces(state):
            return self._decide_once(state, by_exp, at)
        trials = [self._trial(state.candidate(cid), by_exp) for cid in state.pending]
        return self._record_iteration(state, trials, at, step_index=state.step_index - 1)


__all__ = ["BASELINE_ID", "Clock", "OptimizeWorkflow"]
