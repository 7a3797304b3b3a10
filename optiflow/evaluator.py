"""Evaluation in one process: one (experiment, sample, run), or a dataset over R runs.

:func:`evaluate` is the unit the distributed ``evaluate`` task calls. It renders the prompt under
the experiment's overrides (their model params layered onto the model config), calls the model
through :func:`optiflow.llm.completion.complete` with ``metadata = {sample_id, run,
experiment_id}``, judges the output with the check and returns an :class:`EvalResult`. It never
raises for a provider error, a rendering problem of one sample, or a check that crashes on an
output: those are failing results carrying ``error`` (provider, render, judge) or ``reason``.
It raises :class:`~optiflow.errors.ValidationError` for a misconfiguration that would fail every
sample the same way: a ``python`` check whose function is not in the allowlist or not importable.

:func:`evaluate_dataset` runs every (sample, run) on a thread pool; summarize with
:func:`optiflow.core.evaluation.summarize`, :func:`~optiflow.core.evaluation.trial_summary` and
:func:`~optiflow.core.evaluation.regressions` (or :func:`summaries`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Any

from optiflow.core.checks import CheckSpec, PythonCheck, PythonResolver, Score, run_check
from optiflow.core.dataset import Dataset, Sample
from optiflow.core.evaluation import EvalResult, EvalSummary, TrialSummary, summarize, trial_summary
from optiflow.core.model import ModelConfig
from optiflow.core.overrides import PromptOverrides
from optiflow.core.prompt import Prompt, RenderedPrompt
from optiflow.errors import ModelProviderError, OptiflowError, ValidationError


def _canonical(path: str) -> str:
    return path.strip().replace(":", ".")


def python_resolver(allowlist: Iterable[str]) -> PythonResolver:
    """Resolves ``package.module:callable`` (or dotted) paths, only those in ``allowlist``."""
    allowed = frozenset(_canonical(a) for a in allowlist if a.strip())

    def resolve(path: str) -> Callable[..., Any]:
        if _canonical(path) not in allowed:
            raise ValidationError(
                f"python check function {path!r} is not in the allowlist (OPTIFLOW_PYTHON_CHECKS)",
                field="check.function",
            )
        return _import_callable(path)

    return resolve


def _import_callable(path: str) -> Callable[..., Any]:
    text = path.strip()
    candidates: list[tuple[str, list[str]]]
    if ":" in text:
        head, _, tail = text.partition(":")
        candidates = [(head, tail.split("."))]
    else:
        parts = text.split(".")
        candidates = [(".".join(parts[:i]), parts[i:]) for i in range(len(parts) - 1, 0, -1)]
    for module_name, attrs in candidates:
        try:
            obj: Any = importlib.import_module(module_name)
        except ImportError:
            continue
        try:
            for attr in attrs:
                obj = getattr(obj, attr)
        except AttributeError:
            break
        if callable(obj):
            return obj  # type: ignore[no-any-return]
        break
    raise ValidationError(f"python check function {path!r} cannot be imported", field="check.function")


@lru_cache(maxsize=64)
def _cached_resolver(allowlist: tuple[str, ...]) -> PythonResolver:
    return python_resolver(allowlist)


def _check_python(check: CheckSpec, python_checks: Sequence[str]) -> PythonResolver:
    resolver = _cached_resolver(tuple(python_checks))
    if isinstance(check, PythonCheck):
        resolver(check.function)  # refuse before any model call
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
) -> EvalResult:
    """Call ``model`` (the tag's params already layered on) with an already rendered prompt and
    judge the answer. The distributed evaluate task renders once, for its cache key, and calls this."""
    from optiflow.llm.completion import complete
    from optiflow.llm.judge import judge

    resolver = _check_python(check, python_checks)
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
    try:
        score = run_check(
            check, result.output, sample.expected, input=sample.input, judge=judge, resolve_python=resolver
        )
    except ValidationError:
        raise
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
) -> list[EvalResult]:
    """Every sample evaluated ``runs`` times on a thread pool; ordered by run, then dataset order."""
    if runs < 1:
        raise ValidationError("runs must be at least 1", field="runs")
    samples = list(dataset)
    allow = tuple(python_checks)
    _check_python(check, allow)
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
        )

    workers = max(1, min(concurrency, len(jobs)))
    if workers == 1:
        return [one(j) for j in jobs]
    from optiflow.llm.runtime import get_litellm

    get_litellm()  # import once, before the threads race for it
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="optiflow-eval") as pool:
        return list(pool.map(one, jobs))


def summaries(
    results: Sequence[EvalResult], dataset: Dataset | Sequence[Sample] | None = None
) -> tuple[EvalSummary, TrialSummary]:
    """Seed 000's summary (over the dataset's ids when given) and the trial totals."""
    ids = [s.id for s in dataset] if dataset is not None else None
    return summarize(results, ids), trial_summary(results)


__all__ = ["evaluate", "evaluate_dataset", "python_resolver", "summaries"]
