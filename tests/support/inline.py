"""The pure compress workflow driven in this process with real model answers (no Celery): the
reference a distributed run must reproduce (tests, `make chaos`)."""

from __future__ import annotations

from optiflow.core.actions import Finish
from optiflow.core.compress.report import OptimizationReport
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.compress.workflow import CompressWorkflow
from optiflow.core.evaluation import EvalResult
from optiflow.core.overrides import PromptOverrides
from optiflow.core.step import Step, StepResults
from optiflow.distributed.work import propose_edit
from optiflow.evaluator import evaluate
from optiflow.llm.tokens import count_tokens


def evaluate_step(spec: CompressSpec, step: Step) -> tuple[EvalResult, ...]:
    """Every evaluation of ``step``'s targets, in this process, through the real evaluator (and
    litellm): what the step's chord of evaluate tasks would return."""
    samples = {s.id: s for s in spec.dataset.samples}
    evals = []
    for target in step.targets:
        overrides = PromptOverrides(
            ns=spec.prompt.ns,
            key=spec.prompt.key,
            tag=target.experiment.overrides_tag,
            sections=target.overrides,
            model_params=target.model_params,
        )
        for run in target.run_indices:
            for sid in target.sample_ids:
                evals.append(
                    evaluate(
                        prompt=spec.prompt,
                        overrides=overrides,
                        sample=samples[sid],
                        check=spec.check,
                        model=spec.model.with_params(target.model_params),
                        run=run,
                        experiment_id=target.experiment.id,
                    ).compact()
                )
    return tuple(evals)


def run_inline(spec: CompressSpec, job_id: str = "inline") -> OptimizationReport:
    if spec.fail_fast:
        raise ValueError("the inline reference evaluates everything: give it fail_fast=false")
    wf = CompressWorkflow(spec, job_id)
    tr = wf.start(lambda text: count_tokens(text, spec.model.model))
    state, action = tr.state, tr.action
    while isinstance(action, Step):
        evals = evaluate_step(spec, action)
        edits = tuple(propose_edit(spec, p) for p in action.propose)
        tr = wf.advance(state, StepResults(step=action, evals=evals, edits=edits))
        state, action = tr.state, tr.action
    assert isinstance(action, Finish), action
    assert isinstance(action.report, OptimizationReport)
    return action.report
