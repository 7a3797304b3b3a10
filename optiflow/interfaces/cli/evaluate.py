"""``optiflow eval``: evaluate a prompt on a dataset in this process and print the summary.

A prompt given as a FILE works without any store; ``NS/KEY`` (and ``--tag``) reads the store.
Arguments are checked before the model is called; litellm is imported only when the command runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from optiflow.errors import ModelProviderError, ValidationError
from optiflow.interfaces.cli._common import echo, opened_store, parse_params, settings, split_ref

if TYPE_CHECKING:
    from optiflow.core.checks import CheckSpec
    from optiflow.core.overrides import PromptOverrides
    from optiflow.core.prompt import Prompt

CHECK_TYPES = ("exact", "contains", "regex", "json_field", "numeric", "llm_judge", "python")
_PROMPT_SUFFIXES = (".yaml", ".yml", ".json")


def _param_value(text: str) -> Any:
    """``0.3`` -> 0.3, ``true`` -> True, ``{"a": 1}`` -> dict; anything else stays a string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_check(text: str) -> CheckSpec:
    """A check from JSON (``{"type": "regex", "pattern": "..."}``), a YAML/JSON file, or a type name."""
    from pydantic import TypeAdapter
    from pydantic import ValidationError as PydanticError

    from optiflow.core.checks import CheckSpec
    from optiflow.files import pydantic_error, read_yaml

    raw = text.strip()
    data: Any
    if raw.startswith("{"):
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"invalid JSON: {exc.msg}", field="--check") from None
    elif raw in CHECK_TYPES:
        data = {"type": raw}
    elif Path(raw).suffix in (".yaml", ".yml", ".json") or Path(raw).is_file():
        data = read_yaml(Path(raw))
    else:
        raise ValidationError(
            f"unknown check {raw!r}: use one of {', '.join(CHECK_TYPES)}, a JSON object or a file",
            field="--check",
        )
    try:
        check: CheckSpec = TypeAdapter(CheckSpec).validate_python(data)
    except PydanticError as exc:
        raise pydantic_error(exc, "--check") from None
    return check


def _load(prompt_ref: str, tag: str | None) -> tuple[Prompt, PromptOverrides | None, str | None]:
    """The prompt, the tag's overrides and the tag used. A FILE needs no store unless ``--tag``."""
    from optiflow.core.overrides import STABLE, check_tag
    from optiflow.files import load_prompt

    if tag is not None:
        check_tag(tag)
    path = Path(prompt_ref)
    if path.suffix in _PROMPT_SUFFIXES or path.is_file():
        prompt = load_prompt(path)
        if tag is None:
            return prompt, None, None
        with opened_store() as store:
            return prompt, store.resolve(prompt.ns, prompt.key, tag), tag
    ns, key = split_ref(prompt_ref, field="--prompt")
    used = tag or STABLE
    with opened_store() as store:
        prompt = store.get_prompt(ns, key)
        return prompt, store.resolve(ns, key, used), used


@click.command("eval")
@click.option(
    "--prompt", "prompt_ref", required=True, metavar="FILE|NS/KEY", help="prompt YAML file or NS/KEY"
)
@click.option(
    "--dataset", "dataset_file", required=True, metavar="FILE", help="samples (.jsonl, .yaml, .csv)"
)
@click.option(
    "--model", "model_name", required=True, metavar="MODEL", help="litellm model, e.g. optiflow/sim"
)
@click.option(
    "--check",
    "check_text",
    default="contains",
    show_default=True,
    metavar="JSON|TYPE|FILE",
    help="check type, JSON object or YAML file",
)
@click.option("--tag", default=None, metavar="TAG", help="overrides tag (NS/KEY default: stable; FILE: none)")
@click.option("--runs", default=1, show_default=True, type=click.IntRange(1, 100), help="runs per sample")
@click.option("--param", "params", multiple=True, metavar="K=V", help="model param (repeatable; JSON values)")
@click.option("--timeout", default=60.0, show_default=True, type=click.FloatRange(min=0, min_open=True))
@click.option("--retries", default=2, show_default=True, type=click.IntRange(0, 10))
@click.option("--concurrency", default=None, type=click.IntRange(1, 512), help="parallel calls [settings]")
@click.option("--json", "as_json", is_flag=True, help="print the summary as JSON")
def eval_command(
    prompt_ref: str,
    dataset_file: str,
    model_name: str,
    check_text: str,
    tag: str | None,
    runs: int,
    params: tuple[str, ...],
    timeout: float,
    retries: int,
    concurrency: int | None,
    as_json: bool,
) -> None:
    """Evaluate a prompt on a dataset and print pass rate, consistency, cost and latency."""
    from optiflow.core.model import ModelConfig
    from optiflow.files import load_dataset, parse_model

    if not model_name.strip():
        raise ValidationError("must name a model (e.g. optiflow/sim, openai/gpt-4o-mini)", field="--model")
    model_params = {k: _param_value(v) for k, v in parse_params(params).items()}
    check = parse_check(check_text)
    dataset = load_dataset(dataset_file)
    prompt, overrides, used_tag = _load(prompt_ref, tag)
    s = settings()
    model = parse_model(
        ModelConfig,
        {"model": model_name, "params": model_params, "timeout": timeout, "retries": retries},
        "--model",
    )

    from optiflow.distributed.ratelimit import build_limiter
    from optiflow.evaluator import evaluate_dataset, summaries
    from optiflow.llm.limiter import limited_by

    # These calls share the fleet's limits (Redis when OPTIFLOW_REDIS_URL is set).
    with limited_by(build_limiter(s, embedded=not s.redis_url)):
        results = evaluate_dataset(
            prompt=prompt,
            overrides=overrides,
            dataset=dataset,
            check=check,
            model=model,
            runs=runs,
            experiment_id="cli-eval",
            python_checks=s.python_checks,
            concurrency=concurrency or s.eval_concurrency,
            check_timeout_s=s.check_timeout_s,
        )
    summary, trial = summaries(results, dataset)
    failing = [sid for sid in dataset.ids() if sid not in summary.consistently_passed]
    errors = [r for r in results if r.error is not None]
    if as_json:
        echo(
            json.dumps(
                {
                    "prompt": prompt.id,
                    "tag": used_tag,
                    "model": model.model,
                    "check": check.type,
                    "samples": len(dataset),
                    "runs": runs,
                    "pass_rate": summary.pass_rate,
                    "consistently_passed": len(summary.consistently_passed),
                    "trial": trial.model_dump(mode="json"),
                    "failing": failing,
                    "errors": len(errors),
                    "first_error": errors[0].error if errors else None,
                },
                indent=2,
            )
        )
        _all_errored(results, errors)
        return
    echo(
        f"{prompt.id}  tag {used_tag or '-'}  model {model.model}  check {check.type}  "
        f"{len(dataset)} samples x {runs} run{'s' if runs != 1 else ''}"
    )
    echo(f"pass rate            {summary.pass_rate:.1%}")
    echo(f"consistently passed  {len(summary.consistently_passed)}/{len(dataset)}")
    ttft = f"{trial.avg_ttft_ms:.1f} ms" if trial.avg_ttft_ms is not None else "-"
    echo(
        f"evaluations          {trial.total} ({trial.passed} passed, {trial.failed} failed, "
        f"pass rate {trial.pass_rate:.1%})"
    )
    echo(f"tokens               {trial.total_tokens:,}")
    echo(f"cost                 ${trial.total_cost:.6f}")
    echo(f"avg latency          {trial.avg_latency_ms:.1f} ms (ttft {ttft})")
    if errors:
        echo(f"errors               {len(errors)} (first: {errors[0].error})")
    echo(f"failing ({len(failing)})          {', '.join(failing) if failing else '-'}")
    _all_errored(results, errors)


def _all_errored(results: Sequence[Any], errors: Sequence[Any]) -> None:
    """Every evaluation errored: nothing was measured, so the command fails (one line, exit 2)."""
    if results and len(errors) == len(results):
        raise ModelProviderError(
            f"every evaluation errored ({len(errors)} of {len(results)}); first: {errors[0].error}",
            field="--model",
        )


__all__ = ["eval_command", "parse_check"]
