"""The bodies of the header tasks: one evaluation, one section proposal, one rewrite.

Each returns a small JSON dict (chord messages stay small) and never raises for a model failure:
a failed evaluation is a failing record and a failed proposal a ``proposal_error``, because one
raising header task would stop the chord body from ever running.

A job with a budget (``max_cost_usd`` / ``max_tokens``): each checks the job's spend before its
model call and makes none once the budget is exhausted (an evaluation is skipped with reason
``budget_exhausted``, a proposal or rewrite fails with that error), then charges what its calls
cost (:func:`optiflow.llm.usage.metered`). An evaluation does both on the round trips it
already makes (``scratch.lookup`` before, ``scratch.record`` after).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from optiflow.core.budget import BUDGET_EXHAUSTED, Charge, budget_line, budget_report
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.evaluation import EvalResult
from optiflow.core.faithfulness import FaithfulnessContext, context_for
from optiflow.core.sections import SectionPath, parse_path, path_str
from optiflow.core.step import Hold, ProposalError, SectionEdit
from optiflow.distributed.scratch import cache_key
from optiflow.errors import BudgetExhaustedError, OptiflowError, public_message
from optiflow.llm.compress import ProposalRefused
from optiflow.llm.usage import metered

if TYPE_CHECKING:
    from optiflow.distributed.runtime import Runtime

log = logging.getLogger(__name__)


def evaluate_one(
    rt: Runtime,
    job_id: str,
    experiment_id: str,
    tag: str,
    sample_id: str,
    run: int,
    guarded: bool,
    *,
    probe_step: int | None = None,
    hold: Hold | None = None,
) -> dict[str, Any]:
    """One evaluation. ``probe_step``: it is one of that step's probe evaluations (its answer is
    counted); ``hold``: it waits for the step's probes first (:func:`await_probes`)."""
    from optiflow.evaluator import evaluate_rendered, render_failure
    from optiflow.llm.interrupt import stop_when
    from optiflow.llm.limiter import limited_by, while_waiting

    if hold is not None:
        await_probes(rt, job_id, experiment_id, hold)

    spec = rt.spec(job_id)
    overrides = rt.overrides(spec.prompt.ns, spec.prompt.key, tag)
    sample = rt.sample(job_id, sample_id)
    try:
        rendered = spec.prompt.render(sample.input, overrides=overrides)
    except OptiflowError as exc:  # a failing record, never a raise: the chord must complete
        rt.scratch.record(job_id, experiment_id, "", None, regressed=guarded, probe_step=probe_step)
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
    budget = spec.budget
    skip, hit = rt.scratch.lookup(job_id, experiment_id, key, budget, probe_step=probe_step)
    if skip is not None:
        skipped = Charge(skipped=1) if skip == BUDGET_EXHAUSTED else None
        rt.scratch.record(
            job_id, experiment_id, key, None, regressed=False, charge=skipped, probe_step=probe_step
        )
        return _out(
            EvalResult(experiment_id=experiment_id, sample_id=sample_id, run=run, skipped=True, reason=skip)
        )
    charge = None
    if hit is not None:
        result = hit.model_copy(update={"experiment_id": experiment_id, "run": run, "cached": True})
        fresh = None
    else:
        # the runtime's limiter for the call, and a limiter's wait keeps the job's beat (no stall)
        # a cancel (or the job's end) wakes a call sleeping in the simulated model's latency
        with (
            limited_by(rt.limiter),
            while_waiting(lambda: rt.scratch.beat(job_id)),
            stop_when(lambda: rt.scratch.cancelled(job_id)),
            metered() as meter,
        ):
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
        charge = meter.charge if budget is not None else None
    regressed = guarded and not (result.success and result.passed)
    rt.scratch.record(
        job_id, experiment_id, key, fresh, regressed, charge=charge, budget=budget, probe_step=probe_step
    )
    return _out(result)


HOLD_POLL_S = (0.01, 0.1)
"""A held evaluation looks at the probes every tenth of its wait left, within these bounds (s)."""


def await_probes(rt: Runtime, job_id: str, experiment_id: str, hold: Hold) -> None:
    """Wait until the step's probes have all answered or this experiment regressed (the lookup
    that follows then skips the call), polling the job's scratch; never more than ``hold.wait``
    after the first probe began (before any has: after this evaluation began).
    The wait holds a worker thread: the model call it would make instead is the one a probe's
    regression would have wasted."""
    low, high = HOLD_POLL_S
    began_here = time.time()
    while True:
        answered, stop, began = rt.scratch.probes(job_id, experiment_id, hold.step)
        now = time.time()
        start = min(began, now) if began is not None else began_here
        left = start + hold.wait - now
        if stop or answered >= hold.probes or left <= 0:
            return
        due = start + hold.latency - now
        # not due yet: one look when they are; then every tenth of the wait left, within bounds
        pause = due if due > low else min(max(low, left / 10), high)
        time.sleep(min(pause, left))


def propose_one(rt: Runtime, job_id: str, path_text: str) -> dict[str, Any]:
    path = parse_path(path_text)
    spec = rt.spec(job_id)
    try:
        if not isinstance(spec, CompressSpec):
            raise TypeError(f"section proposals are for compress jobs, not {spec.kind}")
        from optiflow.llm.limiter import limited_by, while_waiting

        _check_budget(rt, job_id)
        with limited_by(rt.limiter), while_waiting(lambda: rt.scratch.beat(job_id)), _charged(rt, job_id):
            edit = propose_edit(spec, path)
    except ProposalRefused as exc:  # never evaluated: reported with its reason
        log.warning("job %s: every proposal for %s refused: %s", job_id, path_text, exc.reason)
        return {"proposal_error": refusal(path, exc).model_dump(mode="json")}
    except Exception as exc:  # a proposal failure skips the section; the job goes on
        log.warning("job %s: compressing %s failed: %s", job_id, path_text, exc)
        return {
            "proposal_error": ProposalError(path=path, error=public_message(str(exc))).model_dump(mode="json")
        }
    return {"edit": edit.model_dump(mode="json")}


def rewrite_one(rt: Runtime, job_id: str, request: dict[str, Any]) -> dict[str, Any]:
    """Run one rewrite request of an optimizer; its failure is a reply with ``error``, never a
    raise (the chord must complete)."""
    from optiflow.core.step import RewriteReply, RewriteRequest
    from optiflow.llm.rewrite import run_rewrite

    req = RewriteRequest.model_validate(request)
    try:
        _check_budget(rt, job_id)
    except BudgetExhaustedError as exc:
        return {"rewrite": RewriteReply(id=req.id, error=public_message(str(exc))).model_dump(mode="json")}
    from optiflow.llm.limiter import limited_by, while_waiting

    with limited_by(rt.limiter), while_waiting(lambda: rt.scratch.beat(job_id)), _charged(rt, job_id):
        reply = run_rewrite(req)
    return {"rewrite": reply.model_dump(mode="json")}


def _check_budget(rt: Runtime, job_id: str) -> None:
    """Raise :class:`~optiflow.errors.BudgetExhaustedError` (and count the call skipped) when the
    job's spend has reached its budget."""
    budget = rt.spec(job_id).budget
    if budget is None:
        return
    spend = rt.scratch.spend(job_id)
    if budget.exhausted_by(spend.cost_usd, spend.tokens):
        rt.scratch.charge(job_id, Charge(skipped=1))
        raise BudgetExhaustedError(budget_line(budget_report(budget, spend)))


@contextmanager
def _charged(rt: Runtime, job_id: str) -> Iterator[None]:
    """Charge what the block's model calls cost to the job's budget (a job with one)."""
    budget = rt.spec(job_id).budget
    if budget is None:
        yield
        return
    with metered() as meter:
        try:
            yield
        finally:
            if meter.calls:
                rt.scratch.charge(job_id, meter.charge, budget)


def propose_edit(spec: CompressSpec, path: SectionPath) -> SectionEdit:
    """Ask the job's strategy for a shorter body of one section (as the baseline renders it)."""
    from optiflow.llm.compress import build_strategy
    from optiflow.llm.tokens import count_tokens

    base = spec.prompt.section(path)
    current = spec.prompt.with_bodies({o.path: o.body for o in spec.baseline_overrides})
    section = current.section(path)
    proposal = build_strategy(spec.strategy).propose(current, section, faithfulness_context(spec))
    body = proposal.body
    verdict = proposal.faithfulness
    judge = spec.faithfulness.judge
    if judge is not None and verdict is not None and verdict.faithful and body != section.body:
        from optiflow.llm.faithjudge import judge_proposal

        said = judge_proposal(judge, section.body, body, path_str(path))
        verdict = verdict.model_copy(update={"judge": said})
        if not said.same:
            reason = f"the judge {said.model} finds it differs: {said.reason}"
            refused = verdict.model_copy(update={"faithful": False, "reason": reason})
            raise ProposalRefused(reason, body, refused, proposal.attempts)
    model = spec.model.model
    return SectionEdit(
        path=path,
        original_hash=base.hash,
        proposed_body=body,
        original_tokens=count_tokens(section.body, model),
        proposed_tokens=count_tokens(body, model),
        faithfulness=verdict,
    )


def faithfulness_context(spec: CompressSpec) -> FaithfulnessContext:
    """What the faithfulness check reads of a job: its sections as rendered, its dataset."""
    current = spec.prompt.with_bodies({o.path: o.body for o in spec.baseline_overrides})
    samples = spec.dataset.samples
    ctx = context_for(
        [s.body for s in current.sections], [s.input for s in samples], [s.expected for s in samples]
    )
    return ctx.model_copy(update={"allow_dropped_rules": spec.faithfulness.allow_dropped_rules})


def refusal(path: SectionPath, exc: ProposalRefused) -> ProposalError:
    return ProposalError(
        path=path,
        error=f"refused: {exc.reason}",
        refused=True,
        proposed_body=exc.body,
        faithfulness=exc.faithfulness,
        attempts=exc.attempts,
    )


def _out(result: EvalResult) -> dict[str, Any]:
    return result.compact().model_dump(mode="json", exclude_defaults=True)
