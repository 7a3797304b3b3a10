"""Run optimize steps on the simulated model in-process (no litellm, no Celery): the shipped examples.

Evaluations render the prompt under the target's overrides exactly as the evaluate task does and
ask :class:`optiflow.llm.simulated.SimulatedModel`; rewrite requests go through
:func:`optiflow.llm.rewrite.rewrite_messages` to the same model.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from optiflow.core.checks import run_check
from optiflow.core.evaluation import EvalResult
from optiflow.core.optimize.spec import OptimizeSpec
from optiflow.core.overrides import PromptOverrides
from optiflow.core.step import RewriteReply, RewriteRequest, Step
from optiflow.files import load_dataset, load_prompt, read_yaml
from optiflow.llm.compress import clean_output
from optiflow.llm.rewrite import rewrite_messages
from optiflow.llm.simulated import SimulatedModel

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
SIM = SimulatedModel()


def load_example_spec(name: str, **changes: Any) -> OptimizeSpec:
    """The example's job.yaml as an :class:`OptimizeSpec` (prompt and dataset files resolved)."""
    folder = EXAMPLES / name
    data = dict(read_yaml(folder / "job.yaml"))
    data["prompt"] = load_prompt(folder / data["prompt"])
    data["dataset"] = load_dataset(folder / data["dataset"])
    data.update(changes)
    return OptimizeSpec.model_validate(data)


def sim_evaluator(spec: OptimizeSpec) -> Callable[[Step], list[EvalResult]]:
    def evaluate(step: Step) -> list[EvalResult]:
        out = []
        for target in step.targets:
            overrides = PromptOverrides(
                ns=spec.prompt.ns,
                key=spec.prompt.key,
                tag=target.experiment.overrides_tag,
                sections=target.overrides,
                model_params=target.model_params,
            )
            model = spec.model.with_params(target.model_params)
            for run in target.run_indices:
                for sid in target.sample_ids:
                    sample = spec.dataset.by_id(sid)
                    rendered = spec.prompt.render(sample.input, overrides=overrides)
                    reply = SIM.reply(
                        rendered.messages(), dict(model.params), {"sample_id": sid, "run": run}, sleep=False
                    )
                    score = run_check(spec.check, reply.text, sample.expected, input=sample.input)
                    out.append(
                        EvalResult(
                            experiment_id=target.experiment.id,
                            sample_id=sid,
                            run=run,
                            passed=score.passed,
                            score=score.value,
                            reason=score.reason,
                            prompt_tokens=reply.prompt_tokens,
                            completion_tokens=reply.completion_tokens,
                            cost=reply.prompt_tokens * 0.5e-6 + reply.completion_tokens * 1.5e-6,
                            latency_ms=1.0,
                        )
                    )
        return out

    return evaluate


def sim_rewrite(request: RewriteRequest) -> RewriteReply:
    reply = SIM.reply(rewrite_messages(request), dict(request.model.params), {}, sleep=False)
    return RewriteReply(
        id=request.id,
        text=clean_output(reply.text),
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
    )
