"""The LLM rewrite mutator's model call: one :class:`RewriteRequest` in, one :class:`RewriteReply` out.

The optimize workflow (pure) puts rewrite requests in a ``Step``; the driver runs each with
:func:`run_rewrite` (a task in the step's chord) and hands the replies back in
``StepResults.rewrites``. The workflow validates the text (non-empty, at most ``max_length``).

The request shows the model the current section, the last iterations' scores and the failing
samples (input, expected answer, why it failed), seed 003's ``LLMStringFactorMutator`` prompt.
:data:`REWRITE_MARKER` starts the system message; the simulated model recognizes rewrite
requests by it (see :mod:`optiflow.llm.simulated`).
"""

from __future__ import annotations

import json
from typing import Any

from optiflow.core.base import JSONValue
from optiflow.core.prompt import template_params
from optiflow.core.sections import path_str
from optiflow.core.step import RewriteReply, RewriteRequest
from optiflow.llm.compress import clean_output
from optiflow.llm.markers import REWRITE_MARKER

REWRITE_SYSTEM = """{marker}
You improve one section of the system prompt of an LLM application ({prompt_id}, section "{path}").
The application fails the samples listed by the user. Rewrite the section so that the assistant
answers them as expected, without breaking what already works:
- state each needed rule as an explicit instruction, with its exact code or label;
- keep every rule, fact and placeholder that is already there{placeholders};
- return only the new section text, at most {max_length} characters, no commentary.{instructions}
(variant {variant}: an independent attempt)"""


def _text(value: JSONValue) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def rewrite_messages(request: RewriteRequest) -> list[dict[str, str]]:
    """The chat messages of one rewrite request."""
    params = sorted(template_params(request.current))
    placeholders = ": " + ", ".join("${" + p + "}" for p in params) if params else ""
    system = REWRITE_SYSTEM.format(
        marker=REWRITE_MARKER,
        prompt_id=request.prompt_id or "prompt",
        path=path_str(request.section),
        placeholders=placeholders,
        max_length=request.max_length,
        instructions=f"\n{request.instructions.strip()}" if request.instructions.strip() else "",
        variant=request.variant,
    )
    lines = ["<section>", request.current, "</section>", "<iterations>"]
    for it in request.iterations:
        score = "n/a" if it.score is None else f"{it.score:.3f}"
        rate = "n/a" if it.success_rate is None else f"{it.success_rate * 100:.2f}%"
        lines.append(f"Iteration {it.iteration}: score={score}, successRate={rate}")
    lines += ["</iterations>", "<failing>"]
    for f in request.failing:
        lines.append(
            f'<sample id="{f.sample_id}"><input>{_text(f.input)}</input>'
            f"<expected>{_text(f.expected)}</expected><reason>{f.reason}</reason></sample>"
        )
    lines += ["</failing>", f"<variant>{request.variant}</variant>"]
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def run_rewrite(request: RewriteRequest) -> RewriteReply:
    """Call the request's model; never raises for a model failure (the reply carries the error)."""
    from optiflow.llm.completion import complete

    metadata: dict[str, Any] = {
        "purpose": "rewrite",
        "prompt": request.prompt_id,
        "section": path_str(request.section),
        "request": request.id,
    }
    try:
        result = complete(request.model, rewrite_messages(request), metadata=metadata)
    except Exception as exc:  # a broken config must not stop the chord
        return RewriteReply(id=request.id, error=f"{type(exc).__name__}: {exc}")
    if result.error is not None:
        return RewriteReply(
            id=request.id,
            error=result.error,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            cost=result.cost,
        )
    return RewriteReply(
        id=request.id,
        text=clean_output(result.output),
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        cost=result.cost,
    )


__all__ = ["REWRITE_MARKER", "REWRITE_SYSTEM", "rewrite_messages", "run_rewrite"]
