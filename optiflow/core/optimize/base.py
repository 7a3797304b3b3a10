"""What every part of the optimize workflow shares: the spec, the candidates' names and targets,
the trials, acceptance's record of an iteration, the selection's paired test settings and the report.

The workflow (:mod:`optiflow.core.optimize.workflow`) is the seed's loop; the race
(:mod:`~optiflow.core.optimize.race`), the held-out test (:mod:`~optiflow.core.optimize.heldout`) and
the budget cut (:mod:`~optiflow.core.optimize.budgetcut`) are parts it calls, each built on this base.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from optiflow.core.actions import Action, Finish
from optiflow.core.evaluation import EvalResult
from optiflow.core.experiment import Experiment, temp_tag_prefix
from optiflow.core.gate.decision import RunRange
from optiflow.core.gate.outcomes import Outcomes
from optiflow.core.gate.spec import GateSpec
from optiflow.core.optimize.acceptance import AcceptanceDecision, Contender, decide
from optiflow.core.optimize.configuration import canonical, config_hash, config_params, config_sections
from optiflow.core.optimize.history import IterationRecord
from optiflow.core.optimize.optimizers import build_optimizer
from optiflow.core.optimize.protocol import Optimizer
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.core.optimize.selection import (
    COST_SCORERS,
    Costs,
    SelectionFigures,
    gate_spec,
    judge,
)
from optiflow.core.optimize.spec import OptimizeSpec
from optiflow.core.optimize.state import OptimizeState
from optiflow.core.optimize.termination import TerminationCause, TerminationReason
from optiflow.core.optimize.trial import Candidate, TrialResult, build_trial
from optiflow.core.optimize.validation import CandidateValidator
from optiflow.core.overrides import SectionOverride, now
from optiflow.core.sections import SectionPath
from optiflow.core.step import EvalTarget

BASELINE_ID = "c0"
Clock = Callable[[], datetime]


class OptimizerFailed(Exception):
    """An optimizer method raised: the job fails (seed 001 §9.1)."""


class WorkflowBase:
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

    def _record_iteration(
        self, state: OptimizeState, trials: list[TrialResult], at: datetime, *, step_index: int | None
    ) -> tuple[OptimizeState, Action]:
        """Acceptance, the iteration record, ``observe``, then the stop checks."""
        return self._after_iteration(self._recorded(state, trials, at, step_index=step_index), at)

    def _reproduces(self, state: OptimizeState) -> bool:
        """``auto``'s deterministic rule: a crowning waits for its reproduction (and a budget cut
        before it crowns nothing)."""
        return self.spec.acceptance.test == "auto" and state.rule == "none"

    def _acceptance(self, state: OptimizeState, trials: Sequence[TrialResult]) -> AcceptanceDecision:
        """Today's rule on one evaluation: a strictly better score (optionally a U test)."""
        best = state.best_trial
        assert best is not None and best.acceptance_score is not None
        contenders = [
            Contender(candidate_id=t.candidate_id, score=t.acceptance_score or 0.0, values=t.sample_values)
            for t in trials
            if t.completed and t.acceptance_score is not None
        ]
        rule = state.rule if state.rule in ("none", "mann_whitney") else "none"
        return decide(
            contenders,
            best_score=best.acceptance_score,
            best_values=best.sample_values,
            objective=self.spec.objective,
            spec=self.spec.acceptance.model_copy(update={"test": rule}),
        )

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
            decision = self._acceptance(state, trials)
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

    def _finish(self, state: OptimizeState, at: datetime) -> tuple[OptimizeState, Action]:
        state = state.model_copy(update={"phase": "done", "ended_at": at})
        return state, Finish(report=self.report(state))

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
            acceptance_rule_switched_at=state.rule_switched_at,
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
        return history.model_copy(
            update={"gain_summary": history.gain_line(), "headline": history.headline_text()}
        )

    @staticmethod
    def _call(name: str, fn: Callable[[], Any]) -> Any:
        """An optimizer method; an exception fails the job (seed 001 §9.1: optimizer exception)."""
        try:
            return fn()
        except Exception as exc:
            raise OptimizerFailed(f"optimizer {name} failed: {exc}") from exc

    def _after_iteration(self, state: OptimizeState, at: datetime) -> tuple[OptimizeState, Action]:
        """The loop's next move after an iteration (the termination checks): the workflow's."""
        raise NotImplementedError


def optimizer_reason(message: str | None, reason: object) -> TerminationReason:
    from optiflow.core.optimize.protocol import StopReason

    stop = reason if isinstance(reason, StopReason) else None
    return TerminationReason(
        cause=TerminationCause.OPTIMIZER,
        message=message or (stop.value if stop else "the optimizer stopped"),
        optimizer_reason=stop,
    )
