"""Drive the pure optimize / measure workflows in-process with hand-made answers (no Celery, no I/O).

An answer is a function ``answer(bodies, params, sample_id, run) -> bool | (bool, tokens)`` of the
rendered section bodies and the target's model params. Rewrite requests are answered by a
``rewrite(request) -> str | RewriteReply`` function. The state crosses a JSON round trip at every
step, as the driver's checkpoint does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from optiflow.core.actions import Action
from optiflow.core.base import JSONValue
from optiflow.core.evaluation import EvalResult
from optiflow.core.optimize.history import TrialHistory
from optiflow.core.optimize.protocol import (
    CONTINUE,
    CandidateProposal,
    Optimizer,
    OptimizerState,
    RunContext,
    StopDecision,
    observe_best,
)
from optiflow.core.optimize.spec import OptimizeSpec
from optiflow.core.optimize.state import OptimizeState
from optiflow.core.optimize.trial import TrialResult
from optiflow.core.optimize.workflow import OptimizeWorkflow
from optiflow.core.prompt import Prompt
from optiflow.core.sections import SectionPath
from optiflow.core.step import EvalTarget, RewriteReply, RewriteRequest, Step, StepResults

Bodies = Mapping[SectionPath, str]
Params = Mapping[str, JSONValue]
Answer = Callable[[Bodies, Params, str, int], "bool | tuple[bool, int]"]
Rewrite = Callable[[RewriteRequest], "str | RewriteReply"]
T0 = datetime(2026, 1, 16, 10, 30, tzinfo=UTC)


class FakeClock:
    """Starts at ``T0``; every call advances ``step`` seconds."""

    def __init__(self, step: float = 1.0, start: datetime = T0) -> None:
        self.now = start
        self.step = timedelta(seconds=step)

    def __call__(self) -> datetime:
        current = self.now
        self.now = current + self.step
        return current


def bodies_of(prompt: Prompt, target: EvalTarget) -> dict[SectionPath, str]:
    bodies = {s.path: s.body for s in prompt.sections}
    for ov in target.overrides:
        bodies[ov.path] = ov.body
    return bodies


def evaluate_target(prompt: Prompt, target: EvalTarget, answer: Answer) -> list[EvalResult]:
    bodies = bodies_of(prompt, target)
    out = []
    for run in target.run_indices:
        for sid in target.sample_ids:
            got = answer(bodies, target.model_params, sid, run)
            ok, tokens = got if isinstance(got, tuple) else (got, 100)
            out.append(
                EvalResult(
                    experiment_id=target.experiment.id,
                    sample_id=sid,
                    run=run,
                    passed=ok,
                    score=float(ok),
                    prompt_tokens=tokens,
                    completion_tokens=10,
                    cost=(tokens + 10) * 1e-6,
                    latency_ms=100.0 + run,
                )
            )
    return out


def reply_to(request: RewriteRequest, rewrite: Rewrite | None) -> RewriteReply:
    if rewrite is None:
        return RewriteReply(id=request.id, error="no rewriter")
    got = rewrite(request)
    if isinstance(got, RewriteReply):
        return got
    return RewriteReply(id=request.id, text=got, prompt_tokens=50, completion_tokens=20, cost=1e-4)


@dataclass
class Run:
    action: Action
    state: OptimizeState
    steps: list[Step] = field(default_factory=list)
    workflow: OptimizeWorkflow | None = None


def run_optimize(
    spec: OptimizeSpec,
    answer: Answer,
    *,
    rewrite: Rewrite | None = None,
    job_id: str = "job1",
    clock: Callable[[], datetime] | None = None,
    max_steps: int = 200,
    evaluate: Callable[[Step], list[EvalResult]] | None = None,
    optimizer: Optimizer | None = None,
) -> Run:
    wf = OptimizeWorkflow(spec, job_id, clock=clock or FakeClock(), optimizer=optimizer)
    tr = wf.start()
    state, action = tr.state, tr.action
    steps: list[Step] = []
    while isinstance(action, Step):
        steps.append(action)
        assert len(steps) <= max_steps, "the workflow does not end"
        if evaluate is not None:
            evals = evaluate(action)
        else:
            evals = [r for t in action.targets for r in evaluate_target(spec.prompt, t, answer)]
        replies = tuple(reply_to(req, rewrite) for req in action.rewrites)
        dumped: dict[str, Any] = state.model_dump(mode="json")
        restored = OptimizeWorkflow.load_state(dumped)
        assert restored == state, "the checkpoint does not round-trip"
        tr = wf.advance(restored, StepResults(step=action, evals=tuple(evals), rewrites=replies))
        state, action = tr.state, tr.action
    return Run(action=action, state=state, steps=steps, workflow=wf)


class ScriptedOptimizer:
    """Proposes ``script[generation]`` (configurations or proposals); records what it saw."""

    def __init__(self, script: list[list[Any]], *, stop_after: int | None = None) -> None:
        self.script = script
        self.stop_after = stop_after
        self.initialized: list[RunContext] = []
        self.observed: list[list[str]] = []

    def description(self) -> str:
        return "scripted"

    def initialize(self, context: RunContext) -> OptimizerState:
        self.initialized.append(context)
        return OptimizerState(
            best_candidate_id=context.baseline_candidate_id, best_score=context.baseline_score
        )

    def propose(
        self, state: OptimizerState, history: TrialHistory, max_candidates: int
    ) -> list[CandidateProposal]:
        if state.generation >= len(self.script):
            return []
        out = []
        for item in self.script[state.generation]:
            if isinstance(item, CandidateProposal):
                out.append(item)
            else:
                out.append(
                    CandidateProposal(
                        configuration=item, parent_candidate_ids=(state.best_candidate_id or "c0",)
                    )
                )
        return out

    def observe(self, state: OptimizerState, trial_results: list[TrialResult]) -> OptimizerState:
        self.observed.append([t.candidate_id for t in trial_results])
        return observe_best(state, trial_results)

    def should_stop(self, state: OptimizerState, history: TrialHistory) -> StopDecision:
        if self.stop_after is not None and state.generation >= self.stop_after:
            return StopDecision(should_stop=True, message="scripted stop")
        return CONTINUE
