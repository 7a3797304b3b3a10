"""The bodies of the header tasks: one evaluation, one section proposal.

Both return small JSON dicts (chord messages stay small) and never raise for a model failure:
a failed evaluation is a failing record and a failed proposal a ``proposal_error``, because one
raising header task would stop the chord body from ever running.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from optiflow.core.compress.spec import CompressSpec
from optiflow.core.evaluation import EvalResult
from optiflow.core.sections import SectionPath, parse_path
from optiflow.core.step import ProposalError, SectionEdit
from optiflow.distributed.scratch import cache_key
from optiflow.errors import OptiflowError

if TYPE_CHECKING:
    from optiflow.distributed.runtime import Runtime

log = logging.getLogger(__name__)


def evaluate_one(
    rt: Runtime, job_id: str, experiment_id: str, tag: str, sample_id: str, run: int, guarded: bool
) -> dict[str, Any]:
    from optiflow.evaluator import evaluate_rendered, render_failure
    from optiflow.llm.limiter import while_waiting

    spec = rt.spec(job_id)
    overrides = rt.overrides(spec.prompt.ns, spec.prompt.key, tag)
    sample = rt.sample(job_id, sample_id)
    try:
        rendered = spec.prompt.render(sample.input, overrides=overrides)
    except OptiflowError as exc:  # a failing record, never a raise: the chord must complete
        rt.scratch.record(job_id, experiment_id, "", None, regressed=guarded)
        return _out(render_failure(exc, sample=sample, run=run, experiment_id=experiment_id))
    model = spec.model.with_params(rendered.model_params)
    key = cache_key(
        {
            "model": model.fingerprint(),
            "system": rendered.system,
            "user": rendered.user,
            "sample": sample.id,
            "expected": sample.expected,
            "check": spec.check.model_dump(mode="json"),
            "run": run,
        }
    )
    skip, hit = rt.scratch.lookup(job_id, experiment_id, key)
    if skip is not None:
        rt.scratch.record(job_id, experiment_id, key, None, regressed=False)
        return _out(
            EvalResult(experiment_id=experiment_id, sample_id=sample_id, run=run, skipped=True, reason=skip)
        )
    if hit is not None:
        result = hit.model_copy(update={"experiment_id": experiment_id, "run": run, "cached": True})
        fresh = None
    else:
        with while_waiting(lambda: rt.scratch.beat(job_id)):  # a rate-limited wait is no stall
            result = evaluate_rendered(
                rendered=rendered,
                sample=sample,
                check=spec.check,
                model=model,
                run=run,
                experiment_id=experiment_id,
                python_checks=rt.settings.python_checks,
                check_timeout_s=rt.settings.check_timeout_s,
            )
        fresh = result if result.error is None else None  # errors are retried, never cached
    regressed = guarded and not (result.success and result.passed)
    rt.scratch.record(job_id, experiment_id, key, fresh, regressed)
    return _out(result)


def propose_one(rt: Runtime, job_id: str, path_text: str) -> dict[str, Any]:
    path = parse_path(path_text)
    spec = rt.spec(job_id)
    try:
        if not isinstance(spec, CompressSpec):
            raise TypeError(f"section proposals are for compress jobs, not {spec.kind}")
        from optiflow.llm.limiter import while_waiting

        with while_waiting(lambda: rt.scratch.beat(job_id)):
            edit = propose_edit(spec, path)
    except Exception as exc:  # a proposal failure skips the section; the job goes on
        log.warning("job %s: compressing %s failed: %s", job_id, path_text, exc)
        return {"proposal_error": ProposalError(path=path, error=str(exc)).model_dump(mode="json")}
    return {"edit": edit.model_dump(mode="json")}


def rewrite_one(request: dict[str, Any]) -> dict[str, Any]:
    """Run one rewrite request of an optimizer; its failure is a reply with ``error``, never a
    raise (the chord must complete)."""
    from optiflow.core.step import RewriteRequest
    from optiflow.llm.rewrite import run_rewrite

    reply = run_rewrite(RewriteRequest.model_validate(request))
    return {"rewrite": reply.model_dump(mode="json")}


def propose_edit(spec: CompressSpec, path: SectionPath) -> SectionEdit:
    """Ask the job's strategy for a shorter body of one section (as the baseline renders it)."""
    from optiflow.llm.compress import build_strategy
    from optiflow.llm.tokens import count_tokens

    base = spec.prompt.section(path)
    current = spec.prompt.with_bodies({o.path: o.body for o in spec.baseline_overrides})
    section = current.section(path)
    body = build_strategy(spec.strategy).compress(current, section)
    model = spec.model.model
    return SectionEdit(
        path=path,
        original_hash=base.hash,
        proposed_body=body,
        original_tokens=count_tokens(section.body, model),
        proposed_tokens=count_tokens(body, model),
    )


def _out(result: EvalResult) -> dict[str, Any]:
    return result.compact().model_dump(mode="json", exclude_defaults=True)
