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
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from optiflow.core import progress
from optiflow.core.actions import Action, Fail, Finish
from optiflow.core.budget import budget_line
from optiflow.core.evaluation import EvalResult, trial_summary
from optiflow.core.experiment import Experiment, temp_tag_prefix
from optiflow.core.gate.decision import RunPlan, RunRange
from optiflow.core.gate.outcomes import Outcomes
from optiflow.core.gate.spec import GateSpec
from optiflow.core.optimize.acceptance import AcceptanceDecision, Contender, Rule, decide
from optiflow.core.optimize.configuration import canonical, config_hash, config_params, config_sections
from optiflow.core.optimize.history import IterationRecord
from optiflow.core.optimize.optimizers import build_optimizer
from optiflow.core.optimize.output import iteration_line, start_line
from optiflow.core.optimize.protocol import ModelAssistedOptimizer, Optimizer, RunContext
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.core.optimize.selection import (
    COST_SCORERS,
    Costs,
    SelectionFigures,
    gate_spec,
    judge,
    next_runs,
    pick,
)
from optiflow.core.optimize.spec import OptimizeSpec
from optiflow.core.optimize.state import OptimizeState, TestOutcome, TestReport
from optiflow.core.optimize.termination import TerminationCause, TerminationReason
from optiflow.core.optimize.trial import Candidate, TrialResult, build_trial
from optiflow.core.optimize.validation import CandidateValidator
from optiflow.core.overrides import SectionOverride, now
from optiflow.core.records import Event, Trial
from optiflow.core.sections import SectionPath
from optiflow.core.step import EvalTarget, RewriteReply, Step, StepResults
from optiflow.core.workflow import TokenCounter, Transition, advanced, bounded, noted, started

BASELINE_ID = "c0"
Clock = Callable[[], datetime]


class _OptimizerFailed(Exception):
    pass


class OptimizeWorkflow:
    """Holds only the immutable spec, the job id and the clock; all state is in the checkpoint."""

    def __init__(
        self,
        spec: OptimizeSpec,
        job_id: str,
        *,
        clock: Clock | None = None,
        optimizer: Optimizer | None = None,
    ) -> None:
        """``optimizer`` replaces the one ``spec.optimizer`` describes (a custom algorithm; it
        must be stateless, like the shipped ones, since a resumed job builds a new one)."""
        self.spec = spec
        self.job_id = job_id
        self.clock: Clock = clock or now
        train = spec.dataset.split("train").samples if spec.splits else ()
        self.optimizer: Optimizer = optimizer or build_optimizer(spec.optimizer, spec.factor, train)
        self.validator = CandidateValidator(
            spec.prompt, spec.factor, max_section_chars=spec.max_section_chars
        )

    @staticmethod
    def load_state(data: Mapping[str, Any]) -> OptimizeState:
        return OptimizeState.model_validate(data)

    # -- naming ---------------------------------------------------------------------------
    def tag(self, suffix: str) -> str:
        return f"{temp_tag_prefix(self.job_id)}{suffix}"

    def _candidate(
        self, cid: str, step: int, iteration: int, config: Mapping[str, Any], **kw: Any
    ) -> Candidate:
        normalized = canonical(config)
        return Candidate(
            candidate_id=cid,
            mask_id=self.tag(cid),
            experiment_id=f"{self.job_id}-{cid}",
            step_index=step,
            iteration=iteration,
            configuration=normalized,
            config_hash=config_hash(normalized),
            **kw,
        )

    def target(
        self,
        candidate: Candidate,
        sample_ids: Sequence[str],
        *,
        runs: int | None = None,
        first_run: int = 0,
    ) -> EvalTarget:
        """The candidate's evaluation: baseline overrides + its sections, baseline params + its params
        (``runs`` from ``first_run``; default ``eval_runs``)."""
        spec = self.spec
        if candidate.candidate_id == BASELINE_ID:
            overrides: tuple[SectionOverride, ...] = spec.baseline_overrides
            params = dict(spec.baseline_model_params)
        else:
            by_path = {o.path: o for o in spec.baseline_overrides}
            for path, body in config_sections(candidate.configuration).items():
                by_path[path] = SectionOverride(
                    path=path, expected_hash=spec.prompt.section(path).hash, body=body
                )
            overrides = tuple(sorted(by_path.values(), key=lambda o: o.path))
            params = {
                **spec.baseline_model_params,
                **{k: v for k, v in config_params(candidate.configuration).items() if v is not None},
            }
        return EvalTarget(
            experiment=Experiment(
                id=candidate.experiment_id,
                name=candidate.candidate_id,
                overrides_tag=candidate.mask_id,
                parent_tag=spec.baseline_tag,
                flags=spec.flags,
            ),
            overrides=overrides,
            model_params=params,
            sample_ids=tuple(sample_ids),
            runs=runs or spec.eval_runs,
            first_run=first_run,
        )

    def selection_ids(self) -> tuple[str, ...]:
        """The samples acceptance decides on: val with splits, else every trial sample."""
        return self.spec.validation_ids() or self.spec.trial_ids()

    @property
    def cost_type(self) -> bool:
        return self.spec.scorer.type in COST_SCORERS

    def _ranges(self, candidate: Candidate, plan: Sequence[RunRange]) -> list[EvalTarget]:
        return [self.target(candidate, r.sample_ids, runs=r.stop - r.start, first_run=r.start) for r in plan]

    # -- transitions ----------------------------------------------------------------------
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
        """The most steps one selection takes (an iteration's candidates, or the test): one under
        ``none`` / ``mann_whitney``; under ``auto`` / ``paired`` (the rule ``auto`` picks is not
        known before the baseline) the race's first round, one per ``round_runs`` up to
        ``max_runs`` and as many for the best's runs that errored (each such round adds one of its
        runs), as compress's ``CompressWorkflow.max_rounds``."""
        acc = self.spec.acceptance
        if not acc.sequential:
            return 1
        later = -(-(acc.max_runs - acc.first_runs) // acc.round_runs)
        return 1 + later + acc.max_runs

    @property
    def max_steps(self) -> int:
        """The most steps a job of this spec takes: the baseline (its extra selection runs are in
        the same step), for each of the ``max_iterations`` its termination allows (the baseline is
        iteration 0) the rewrite requests and the candidates' ``max_rounds`` racing rounds
        (``iteration-N``, ``iteration-N-round-K``), and the test's ``max_rounds`` (``test``,
        ``test-round-K``)."""
        rounds = self.max_rounds
        return 1 + self.spec.termination.max_iterations() * (1 + rounds) + rounds

    @property
    def max_steps_why(self) -> str:
        iterations = self.spec.termination.max_iterations()
        rounds = self.max_rounds
        return (
            f"baseline + {iterations} iteration(s) x (proposal + {rounds} selection round(s)) "
            f"+ {rounds} test round(s)"
        )

    def advance(self, state: OptimizeState, results: StepResults) -> Transition[OptimizeState]:
        new, action = self._advance(state, results)
        action = bounded(action, self.max_steps, self.max_steps_why)
        return advanced(
            new,
            results,
            action,
            rejected=len(new.rejections),
            trials=self._with_lineage(self._step_trials(state, results), new),
            rejections=new.rejections[len(state.rejections) :],
            events=self._events(state, new, results.step.index),
        )

    @staticmethod
    def _step_trials(before: OptimizeState, results: StepResults) -> list[Trial]:
        """One trial per experiment of the step. Trial rows are keyed by experiment, and a paired
        race's later rounds (``iteration-N-round-K``, ``test-round-K``) only extend runs made
        earlier: the best's extension runs are not a trial (its row, from the step that evaluated
        it, keeps its full evaluation), and a contender's (a test experiment's) trial covers every
        round so far, not the last round's slice (as compress's ``_trials``)."""
        keep: set[str] | None
        if before.phase == "trials" and before.rule == "paired":
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
        except _OptimizerFailed as exc:
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
        if rule == "paired":
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

    def _costs(
        self, known: Mapping[str, list[float | None]], results: Sequence[EvalResult]
    ) -> dict[str, list[float | None]]:
        """Per sample, the cost metric of each run (cost-type objectives), merged into ``known``."""
        name = self.spec.scorer.type
        out = {k: list(v) for k, v in known.items()}
        for r in results:
            if r.skipped:
                continue
            runs = out.setdefault(r.sample_id, [])
            while len(runs) <= r.run:
                runs.append(None)
            if not r.success:
                runs[r.run] = None
            elif name == "total_cost":
                runs[r.run] = r.cost
            elif name == "avg_latency_ms":
                runs[r.run] = r.latency_ms
            else:
                runs[r.run] = float(r.prompt_tokens + r.completion_tokens)
        return out

    @staticmethod
    def _baseline_recorded(state: OptimizeState, trial: TrialResult, at: datetime) -> OptimizeState:
        """The baseline's trial, accepted as the first best: iteration 0."""
        assert trial.acceptance_score is not None
        trial = trial.model_copy(update={"accepted": True})
        record = IterationRecord(
            number=0,
            step_index=0,
            candidate_ids=(BASELINE_ID,),
            best_candidate_id=BASELINE_ID,
            score=trial.acceptance_score,
            new_best=True,
            best_candidate_so_far=BASELINE_ID,
            best_so_far=trial.acceptance_score,
            tokens=trial.total_tokens,
            cost=trial.total_cost,
            started_at=state.iteration_started_at,
            ended_at=at,
        )
        return state.model_copy(
            update={
                "trials": (trial,),
                "iterations": (record,),
                "best_candidate_id": BASELINE_ID,
                "pending": (),
            }
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
            return self._stop(state, _optimizer_reason(decision.message, decision.reason), at)
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
                reason = _optimizer_reason(decision.message, decision.reason)
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
        trials = [self._trial(state.candidate(cid), by_exp) for cid in state.pending]
        return self._record_iteration(state, trials, at, step_index=state.step_index - 1)

    # -- paired selection: racing ---------------------------------------------------------------
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

    def _test(
        self,
        *,
        comparison: int,
        against: str,
        best: Outcomes,
        contender: Outcomes,
        ids: Sequence[str],
        best_costs: Costs | None,
        costs: Costs | None,
        level: float | None = None,
    ) -> SelectionFigures:
        """:func:`judge` under the job's acceptance settings (the race's comparisons and the
        held-out confirmation differ only in what they compare)."""
        acc = self.spec.acceptance
        return judge(
            comparison=comparison,
            alpha=acc.alpha,
            beta=acc.beta,
            min_gain=acc.min_gain,
            effect=acc.effect,
            margin=acc.margin,
            max_runs=acc.max_runs,
            against=against,
            best=best,
            contender=contender,
            ids=ids,
            cost_type=self.cost_type,
            best_costs=best_costs,
            costs=costs,
            level=level,
        )

    @property
    def _race_gate(self) -> GateSpec:
        """The run plan of a race round and of a held-out test round: the acceptance's runs, and
        the effect it is sized to find as the gate's margin."""
        acc = self.spec.acceptance
        return gate_spec(
            alpha=acc.alpha,
            beta=acc.beta,
            margin=acc.effect,
            first_runs=acc.first_runs,
            round_runs=acc.round_runs,
            max_runs=acc.max_runs,
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

    def _record_iteration(
        self, state: OptimizeState, trials: list[TrialResult], at: datetime, *, step_index: int | None
    ) -> tuple[OptimizeState, Action]:
        """Acceptance, the iteration record, ``observe``, then the stop checks."""
        return self._after_iteration(self._recorded(state, trials, at, step_index=step_index), at)

    def _recorded(
        self,
        state: OptimizeState,
        trials: list[TrialResult],
        at: datetime,
        *,
        step_index: int | None,
        chosen: tuple[str | None] | None = None,
    ) -> OptimizeState:
        """Acceptance, the iteration record and ``observe``: the state after an iteration
        (``chosen``: the paired selection's pick, already made)."""
        best = state.best_trial
        assert best is not None and best.acceptance_score is not None and state.optimizer is not None
        completed = [t for t in trials if t.completed and t.acceptance_score is not None]
        contenders = [
            Contender(candidate_id=t.candidate_id, score=t.acceptance_score or 0.0, values=t.sample_values)
            for t in completed
        ]
        if chosen is not None:
            decision = AcceptanceDecision(accepted=chosen[0])
        else:
            rule = state.rule if state.rule in ("none", "mann_whitney") else "none"
            decision = decide(
                contenders,
                best_score=best.acceptance_score,
                best_values=best.sample_values,
                objective=self.spec.objective,
                spec=self.spec.acceptance.model_copy(update={"test": rule}),
            )
        trials = [
            t.model_copy(
                update={
                    "accepted": t.candidate_id == decision.accepted,
                    "p_value": decision.p_values.get(t.candidate_id),
                }
            )
            for t in trials
        ]
        top = min(contenders, key=lambda c: self.spec.objective.best_first(c.score), default=None)
        accepted = next((t for t in trials if t.accepted), None)
        previous = state.iterations[-1]
        record = IterationRecord(
            number=len(state.iterations),
            step_index=step_index,
            candidate_ids=tuple(t.candidate_id for t in trials),
            best_candidate_id=top.candidate_id if top else None,
            score=top.score if top else None,
            status="success" if completed else ("failed" if trials else "no_candidates"),
            new_best=accepted is not None,
            best_candidate_so_far=accepted.candidate_id if accepted else previous.best_candidate_so_far,
            best_so_far=(accepted.acceptance_score or 0.0) if accepted else previous.best_so_far,
            tokens=sum(t.total_tokens for t in trials) + state.proposal_tokens,
            cost=sum(t.total_cost for t in trials) + state.proposal_cost,
            started_at=state.iteration_started_at,
            ended_at=at,
        )
        opt = state.optimizer
        observed_trials = [t for t in trials if t.completed]
        observed = self._call("observe", lambda: self.optimizer.observe(opt, observed_trials))
        return state.model_copy(
            update={
                "trials": state.trials + tuple(trials),
                "iterations": (*state.iterations, record),
                "best_candidate_id": record.best_candidate_so_far,
                "pending": (),
                "optimizer": observed,
            }
        )

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
            state = self._recorded(state, trials, at, step_index=state.step_index - 1)
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
        if state.rule == "paired" and len(ids) == 2:  # confirmed by the same paired test
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
        if state.rule == "paired" and best_id != BASELINE_ID:
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
            if figures is not None:
                confirmed = figures.accepted and (self.cost_type or figures.gain_low > 0)
            else:
                confirmed = best.score is not None and self.spec.objective.better(best.score, base.score)
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

    def _finish(self, state: OptimizeState, at: datetime) -> tuple[OptimizeState, Action]:
        state = state.model_copy(update={"phase": "done", "ended_at": at})
        return state, Finish(report=self.report(state))

    # -- results --------------------------------------------------------------------------
    def report(self, state: OptimizeState) -> OptimizationHistory:
        spec = self.spec
        best_id = state.best_candidate_id or BASELINE_ID
        best = state.candidate(best_id)
        base = state.candidate(BASELINE_ID)
        base_sections = config_sections(base.configuration)
        base_params = config_params(base.configuration)
        changed: dict[SectionPath, str] = {
            p: body for p, body in config_sections(best.configuration).items() if body != base_sections.get(p)
        }
        assert state.termination is not None
        history = OptimizationHistory(
            job_id=self.job_id,
            use_case=spec.name,
            experiment=spec.experiment,
            prompt_ns=spec.prompt.ns,
            prompt_key=spec.prompt.key,
            treatment=spec.factor,
            fixed_factors=spec.fixed_factors(),
            objective=spec.objective,
            scorer=spec.scorer,
            scorer_description=spec.scorer.description(),
            optimizer_description=self.optimizer.description(),
            termination_policy=spec.termination,
            acceptance=spec.acceptance,
            acceptance_rule=state.rule,
            acceptance_rule_reason=state.rule_reason,
            splits=spec.splits,
            max_candidates_per_step=spec.max_candidates_per_step,
            eval_runs=spec.eval_runs,
            started_at=state.started_at,
            ended_at=state.ended_at or state.started_at,
            iterations=state.iterations,
            trials=state.trials,
            rejections=state.rejections,
            baseline_candidate_id=BASELINE_ID,
            best_candidate_id=best_id,
            best_configuration=best.configuration,
            best_overrides=tuple(
                SectionOverride(path=p, expected_hash=spec.prompt.section(p).hash, body=body)
                for p, body in sorted(changed.items())
            ),
            best_model_params={
                k: v
                for k, v in config_params(best.configuration).items()
                if v is not None and v != base_params.get(k)
            },
            termination_reason=state.termination,
            test=state.test,
            proposal_errors=state.proposal_errors,
            stats=state.stats,
            budget=state.budget,
        )
        return history.model_copy(update={"gain_summary": history.gain_line()})

    def _trial(self, candidate: Candidate, by_exp: Mapping[str, list[EvalResult]]) -> TrialResult:
        spec = self.spec
        return build_trial(
            candidate,
            optimization_id=self.job_id,
            results=by_exp.get(candidate.experiment_id, []),
            train_ids=spec.train_ids(),
            validation_ids=spec.validation_ids(),
            dataset=spec.dataset,
            scorer=spec.scorer,
            metric=spec.acceptance.metric,
            max_examples=spec.max_failing_examples,
        )

    @staticmethod
    def _call(name: str, fn: Callable[[], Any]) -> Any:
        """An optimizer method; an exception fails the job (seed 001 §9.1: optimizer exception)."""
        try:
            return fn()
        except Exception as exc:
            raise _OptimizerFailed(f"optimizer {name} failed: {exc}") from exc


def _optimizer_reason(message: str | None, reason: object) -> TerminationReason:
    from optiflow.core.optimize.protocol import StopReason

    stop = reason if isinstance(reason, StopReason) else None
    return TerminationReason(
        cause=TerminationCause.OPTIMIZER,
        message=message or (stop.value if stop else "the optimizer stopped"),
        optimizer_reason=stop,
    )


__all__ = ["BASELINE_ID", "OptimizeWorkflow"]
