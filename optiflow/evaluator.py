"""Evaluation in one process: one (experiment, sample, run), or a dataset over R runs.

:func:`evaluate` is the unit the distributed ``evaluate`` task calls. It renders the prompt under
the experiment's overrides (their model params layered onto the model config), calls the model
through :func:`optiflow.llm.completion.complete` with ``metadata = {sample_id, run,
experiment_id}``, judges the output with the check and returns an :class:`EvalResult`. It never
raises for a provider error, a rendering problem of one sample, or a check that crashes on an
output: those are failing results carrying ``error`` (provider, render, judge) or ``reason``.
It raises :class:`~optiflow.errors.ValidationError` for a misconfiguration that would fail every
sample the same way: a ``python`` check whose function is not in the allowlist or not importable,
a ``regex`` pattern RE2 does not support. Checks run under :mod:`optiflow.checking`'s bounds (RE2
for patterns, an output size cap, ``python`` checks in separate processes killed after
``check_timeout_s``); a check over its bound is an error of that evaluation.

:func:`evaluate_dataset` runs every (sample, run) on a thread pool; summarize with
:func:`optiflow.core.evaluation.summarize`, :func:`~optiflow.core.evaluation.trial_summary` and
:func:`~optiflow.core.evaluation.regressions` (or :func:`summaries`).
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

from optiflow.checking import (
    DEFAULT_CHECK_TIMEOUT_S,
    MAX_CHECK_CHARS,
    CheckTimeout,
    compile_pattern,
    python_resolver,
    regex_search,
)
from optiflow.core.checks import CheckSpec, PythonCheck, PythonResolver, RegexCheck, Score, run_check
from optiflow.core.dataset import Dataset, Sample
from optiflow.core.evaluation import EvalResult, EvalSummary, TrialSummary, summarize, trial_summary
from optiflow.core.model import ModelConfig
from optiflow.core.overrides import PromptOverrides
from optiflow.core.prompt import Prompt, RenderedPrompt
from optiflow.errors import ModelProviderError, OptiflowError, ValidationError


@lru_cache(maxsize=64)
def _cached_resolver(allowlist: tuple[str, ...], timeout_s: float) -> PythonResolver:
    return python_resolver(allowlist, timeout_s=timeout_s)


def _check_config(check: CheckSpec, python_checks: Sequence[str], timeout_s: float) -> PythonResolver:
    """Refuse, before any model call, a check that would fail every sample the same way."""
    resolver = _cached_resolver(tuple(python_checks), timeout_s)
    if isinstance(check, PythonCheck):
        resolver(check.function)
    if isinstance(check, RegexCheck) and check.pattern is not None:
        compile_pattern(check.pattern)
    return resolver


def evaluate(
    *,
    prompt: Prompt,
    overrides: PromptOverrides | None,
    sample: Sample,
    check: CheckSpec,
    model: ModelConfig,
    run: int,
    experiment_id: str,
    python_checks: Sequence[str] = (),
    check_timeout_s: float = DEFAULT_CHECK_TIMEOUT_S,
) -> EvalResult:
    """Render, call the model, judge: one :class:`EvalResult` for (experiment, sample, run)."""
    try:
        rendered = prompt.render(sample.input, overrides=overrides)
    except OptiflowError as exc:
        return render_failure(exc, sample=sample, run=run, experiment_id=experiment_id)
    return evaluate_rendered(
        rendered=rendered,
        sample=sample,
        check=check,
        model=model.with_params(rendered.model_params),
        run=run,
        experiment_id=experiment_id,
        python_checks=python_checks,
        check_timeout_s=check_timeout_s,
    )


def render_failure(exc: OptiflowError, *, sample: Sample, run: int, experiment_id: str) -> EvalResult:
    return EvalResult(
        experiment_id=experiment_id,
        sample_id=sample.id,
        run=run,
        error=f"render: {exc}",
        reason="prompt could not be rendered",
    )


def evaluate_rendered(
    *,
    rendered: RenderedPrompt,
    sample: Sample,
    check: CheckSpec,
    model: ModelConfig,
    run: int,
    experiment_id: str,
    python_checks: Sequence[str] = (),
    check_timeout_s: float = DEFAULT_CHECK_TIMEOUT_S,
) -> EvalResult:
    """Call ``model`` (the tag's params already layered on) with an already rendered prompt and
    judge the answer. The distributed evaluate task renders once, for its cache key, and calls this."""
    from optiflow.llm.completion import complete
    from optiflow.llm.judge import judge

    resolver = _check_config(check, python_checks, check_timeout_s)
    base = {"experiment_id": experiment_id, "sample_id": sample.id, "run": run}
    result = complete(model, rendered.messages(), metadata=dict(base))
    usage = {
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "cost": result.cost,
        "latency_ms": result.latency_ms,
        "ttft_ms": result.ttft_ms,
    }
    if result.error is not None:
        return EvalResult(**base, **usage, error=result.error, reason="model call failed")
    if len(result.output) > MAX_CHECK_CHARS:
        return EvalResult(
            **base,
            **usage,
            error=f"check: output of {len(result.output)} characters is over the checks' limit of "
            f"{MAX_CHECK_CHARS}",
            reason="output too long to check",
        )
    try:
        score = run_check(
            check,
            result.output,
            sample.expected,
            input=sample.input,
            judge=judge,
            resolve_python=resolver,
            search=regex_search,
        )
    except CheckTimeout as exc:
        return EvalResult(
            **base, **usage, output=result.output, error=f"check: {exc}", reason="check timed out"
        )
    except ValidationError as exc:  # this sample's expected value is not a pattern RE2 runs
        return EvalResult(
            **base, **usage, output=result.output, error=f"check: {exc}", reason="check refused"
        )
    except ModelProviderError as exc:
        return EvalResult(**base, **usage, output=result.output, error=str(exc), reason="judge call failed")
    except Exception as exc:  # a check that crashes on this output fails it
        score = Score(value=0.0, passed=False, reason=f"check raised {type(exc).__name__}: {exc}")
    return EvalResult(
        **base,
        **usage,
        output=result.output,
        passed=score.passed,
        score=score.value,
        reason=score.reason,
    )


def evaluate_dataset(
    *,
    prompt: Prompt,
    overrides: PromptOverrides | None,
    dataset: Dataset | Sequence[Sample],
    check: CheckSpec,
    model: ModelConfig,
    runs: int,
    experiment_id: str,
    python_checks: Sequence[str] = (),
    concurrency: int = 16,
    check_timeout_s: float = DEFAULT_CHECK_TIMEOUT_S,
) -> list[EvalResult]:
    """Every sample evaluated ``runs`` times on a thread pool; ordered by run, then dataset order."""
    if runs < 1:
        raise ValidationError("runs must be at least 1", field="runs")
    samples = list(dataset)
    allow = tuple(python_checks)
    _check_config(check, allow, check_timeout_s)
    jobs = [(sample, run) for run in range(runs) for sample in samples]
    if not jobs:
        return []

    def one(job: tuple[Sample, int]) -> EvalResult:
        sample, run = job
        return evaluate(
            prompt=prompt,
            overrides=overrides,
            sample=sample,
            check=check,
            model=model,
            run=run,
            experiment_id=experiment_id,
            python_checks=allow,
            check_timeout_s=check_timeout_s,
        )

    workers = max(1, min(concurrency, len(jobs)))
    if workers == 1:
        return [one(j) for j in jobs]
    from optiflow.llm.runtime import get_litellm

    get_litellm()  # import once, before the threads race for it
    context = contextvars.copy_context()  # the caller's limiter and meters, in every thread

    def in_context(job: tuple[Sample, int]) -> EvalResult:
        return context.copy().run(one, job)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="optiflow-eval") as pool:
        return list(pool.map(in_context, jobs))


def summaries(
    results: Sequence[EvalResult], dataset: Dataset | Sequence[Sample] | None = None
) -> tuple[EvalSummary, TrialSummary]:
    """Seed 000's summary (over the dataset's ids when given) and the trial totals."""
    ids = [s.id for s in dataset] if dataset is not None else None
    return summarize(results, ids), trial_summary(results)


__all__ = ["evaluate", "evaluate_dataset", "python_resolver", "summaries"]
