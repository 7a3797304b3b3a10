"""The measure job: one experiment evaluated N runs -> a baseline document (what a nightly cron runs).

One step: the tag's overrides (snapshotted at submission, like compress's baseline) written under
a temporary tag ``opt-<job>-measure`` and evaluated ``runs`` times over the samples. The
:class:`MeasureDocument` reports the pass rate over every evaluation with its Wilson score
interval, the runs' pass rates and the samples passed in every run, tokens, cost, and latency /
time-to-first-token percentiles (over answered calls). :func:`fails_below` is the cron rule: the
interval's lower bound is under a required rate.

A job whose budget ran out during the step reports over the evaluations that were made (its
``budget`` says so, and how many were skipped); with none made, it fails.

The document keeps each sample's outcomes in run order (``outcomes``), and its runs start at
``drift.first_run`` (a measure compared with a drift reference continues the reference's run
indices); the comparison itself is made when the job ends (:mod:`optiflow.distributed.drift`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from optiflow.core.actions import Action, Fail, Finish
from optiflow.core.budget import BudgetReport, budget_line
from optiflow.core.checkpoint import JobState
from optiflow.core.evaluation import EvalResult, JobStats
from optiflow.core.experiment import Experiment, temp_tag_prefix
from optiflow.core.measure.report import MeasureDocument, percentiles, wilson_interval
from optiflow.core.measure.spec import MeasureSpec
from optiflow.core.overrides import now
from optiflow.core.step import EvalTarget, Step, StepResults
from optiflow.core.workflow import TokenCounter, Transition, advanced, bounded, noted, started


class MeasureState(JobState):
    phase: Literal["measure", "done"] = "measure"
    started_at: datetime


class MeasureWorkflow:
    def __init__(
        self, spec: MeasureSpec, job_id: str, *, clock: Callable[[], datetime] | None = None
    ) -> None:
        self.spec = spec
        self.job_id = job_id
        self.clock = clock or now

    @staticmethod
    def load_state(data: Mapping[str, Any]) -> MeasureState:
        return MeasureState.model_validate(data)

    @property
    def experiment_id(self) -> str:
        return f"{self.job_id}-measure"

    def target(self) -> EvalTarget:
        spec = self.spec
        return EvalTarget(
            experiment=Experiment(
                id=self.experiment_id,
                name="measure",
                overrides_tag=f"{temp_tag_prefix(self.job_id)}measure",
                parent_tag=spec.tag,
                flags=spec.flags,
            ),
            overrides=spec.baseline_overrides,
            model_params=dict(spec.baseline_model_params),
            sample_ids=spec.sample_ids(),
            runs=spec.runs,
            first_run=spec.drift.first_run,
        )

    def start(self, count_tokens: TokenCounter | None = None) -> Transition[MeasureState]:
        """``count_tokens`` is accepted for the driver's uniform call and not used."""
        state = MeasureState(job_id=self.job_id, started_at=self.clock())
        return started(state, Step(index=0, name="measure", targets=(self.target(),)))

    max_steps = 1
    """A measure job is one step."""

    def advance(self, state: MeasureState, results: StepResults) -> Transition[MeasureState]:
        new, action = self._advance(state, results)
        action = bounded(action, self.max_steps, "a measure job is one step")
        return advanced(new, results, action, rejected=0)

    def _advance(self, state: MeasureState, results: StepResults) -> tuple[MeasureState, Action]:
        at = self.clock()
        state = noted(state, results).model_copy(
            update={
                "stats": state.stats.add(results.evals),
                "step_index": state.step_index + 1,
                "phase": "done",
            }
        )
        if state.step_index != 1:
            return state, Fail(error="advance called on a finished measure job")
        rs = [r for r in results.evals if r.experiment_id == self.experiment_id and not r.skipped]
        if not rs:
            if state.budget is not None and state.budget.exhausted:
                return state, Fail(error=f"measure: nothing evaluated: {budget_line(state.budget)}")
            return state, Fail(error="measure: no evaluation result")
        if all(r.error is not None for r in rs):
            return state, Fail(error=f"measure: every evaluation failed: {rs[0].error}")
        return state, Finish(report=self.document(rs, state.stats, at, budget=state.budget))

    def document(
        self,
        results: Sequence[EvalResult],
        stats: JobStats,
        at: datetime,
        *,
        budget: BudgetReport | None = None,
    ) -> MeasureDocument:
        """The document over ``results``: every (sample, run), or those made before the budget
        ran out (then each run's rate is over its own evaluations, and a sample never evaluated
        is neither passed nor failing)."""
        spec = self.spec
        ids = spec.sample_ids()
        passed = sum(1 for r in results if r.success and r.passed)
        n = len(results)
        by_run: dict[int, list[EvalResult]] = defaultdict(list)
        by_sample: dict[str, list[bool]] = defaultdict(list)
        for r in results:
            by_run[r.run].append(r)
            by_sample[r.sample_id].append(r.success and r.passed)
        run_rates = tuple(
            sum(1 for r in rs if r.success and r.passed) / len(rs) for _, rs in sorted(by_run.items())
        )
        consistently = [i for i in ids if by_sample.get(i) and all(by_sample[i])]
        marks: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for r in results:
            marks[r.sample_id].append((r.run, "e" if r.error is not None else "1" if r.passed else "0"))
        answered = [r for r in results if r.success]
        prompt_tokens = sum(r.prompt_tokens for r in results)
        completion_tokens = sum(r.completion_tokens for r in results)
        cost = sum(r.cost for r in results)
        params = {**dict(spec.model.params), **spec.baseline_model_params}
        model = str(params.pop("model", spec.model.model))
        return MeasureDocument(
            job_id=self.job_id,
            name=spec.name,
            prompt_ns=spec.prompt.ns,
            prompt_key=spec.prompt.key,
            tag=spec.tag,
            model=model,
            model_params=params,
            runs=spec.runs,
            samples=len(ids),
            evaluations=n,
            passed=passed,
            errors=sum(1 for r in results if r.error is not None),
            pass_rate=passed / n,
            wilson=wilson_interval(passed, n, spec.confidence),
            run_pass_rates=run_rates,
            consistently_passed=len(consistently),
            failing_samples=tuple(i for i in ids if by_sample.get(i) and not all(by_sample[i])),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
            mean_tokens=(prompt_tokens + completion_tokens) / n,
            total_cost=cost,
            mean_cost=cost / n,
            latency_ms=percentiles([r.latency_ms for r in answered]),
            ttft_ms=percentiles([r.ttft_ms for r in answered if r.ttft_ms is not None]),
            measured_at=at,
            fail_below=spec.fail_below,
            stats=stats,
            budget=budget,
            outcomes={i: "".join(m for _, m in sorted(marks[i])) for i in ids if i in marks},
            first_run=spec.drift.first_run,
        )
