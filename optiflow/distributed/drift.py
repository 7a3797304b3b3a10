"""Drift around a measure job's life: its run indices at submission, its night (or new reference)
when it ends, the reference measures an ``apply`` asks for, and a reference's history document.

The decisions are :mod:`optiflow.core.drift`'s; this module only reads and writes the jobs
database (:mod:`optiflow.persistence.references`).
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from optiflow.core.drift import settle as drift_settle
from optiflow.core.drift.identity import identity
from optiflow.core.drift.replay import history_document
from optiflow.core.drift.report import Night, Reference
from optiflow.core.drift.spec import DriftSpec
from optiflow.core.kinds import AnyReport, AnySpec, parse_spec
from optiflow.core.measure.report import MeasureDocument
from optiflow.core.measure.spec import MeasureSpec
from optiflow.persistence.references import DriftRepository

if TYPE_CHECKING:
    from optiflow.distributed.runtime import Runtime
    from optiflow.persistence.jobs import JobRecord

log = logging.getLogger(__name__)


def repository(rt: Runtime) -> DriftRepository:
    return DriftRepository(rt.jobs.engine)


def prepare(rt: Runtime, spec: AnySpec) -> AnySpec:
    """A measure spec as submitted: its first run index continues its reference's (see
    :attr:`DriftSpec.first_run`). Other kinds pass through."""
    if not isinstance(spec, MeasureSpec) or spec.drift.off or spec.drift.first_run:
        return spec
    current = repository(rt).current(spec.prompt.ns, spec.prompt.key, spec.tag, identity(spec).config)
    start = drift_settle.first_run(current, spec)
    if not start:
        return spec
    return spec.model_copy(update={"drift": spec.drift.model_copy(update={"first_run": start})})


def settle(rt: Runtime, rec: JobRecord, report: AnyReport | None) -> AnyReport | None:
    """The measure's drift, recorded and put in its report (other reports pass through). A
    failure here never fails the measure: the report says drift was not recorded, and why."""
    if not isinstance(report, MeasureDocument):
        return report
    spec = rt.spec(rec.id)
    if not isinstance(spec, MeasureSpec) or rt.jobs.get(rec.id).finished:
        return report  # (a job another writer ended: nothing of it is recorded)
    try:
        return report.model_copy(update={"drift": _settle(rt, spec, report)})
    except Exception as exc:  # the measure itself stands
        log.warning("job %s: drift not recorded", rec.id, exc_info=True)
        from optiflow.core.drift.report import DriftReport

        reason = f"not recorded: {type(exc).__name__}: {exc}"
        off = DriftReport(status="off", reason=reason[:300], margin=spec.drift.margin, alpha=spec.drift.alpha)
        return report.model_copy(update={"drift": off})


def _settle(rt: Runtime, spec: MeasureSpec, doc: MeasureDocument) -> Any:
    ident = identity(spec)
    with repository(rt).locked(spec.prompt.ns, spec.prompt.key, spec.tag, ident.config) as tx:
        done = tx.of_job(doc.job_id)
        if done is not None:  # a redelivered end: what was recorded then
            return drift_settle.recorded(done[0], done[1], spec.drift)
        current = tx.current()
        latest = tx.latest_for_tag() if current is None else current
        settled = drift_settle.settle(
            spec,
            doc,
            current=current,
            latest=latest,
            nights=tx.nights(current.id) if current is not None else [],
            reference_id=uuid.uuid4().hex,
        )
        if settled.night is not None and settled.reference is not None:
            tx.add_night(settled.night, settled.reference)
        elif settled.reference is not None:
            tx.add_reference(settled.reference)
        return settled.report


def reference_specs(rt: Runtime, job_spec: AnySpec, tag: str, *, runs: int, note: str) -> list[MeasureSpec]:
    """The measures an apply to ``tag`` asks for: each current reference's measure again (its
    model, dataset, check and settings, on what the tag renders now), or, with none yet, the applied
    job's own prompt, dataset, check and model."""
    prompt = job_spec.prompt
    refs = repository(rt).current_for_tag(prompt.ns, prompt.key, tag)
    out: list[MeasureSpec] = []
    for ref in refs:
        try:
            old = parse_spec(rt.jobs.get(ref.job_id).spec)
        except Exception:
            log.warning(
                "reference %s: its measure job %s cannot be read; not re-measured", ref.id, ref.job_id
            )
            continue
        if isinstance(old, MeasureSpec):
            out.append(_as_reference(old, tag, runs=runs, note=note, drift=old.drift))
    if out:
        return out
    fresh = MeasureSpec(
        name=f"reference-{prompt.ns}-{prompt.key}-{tag}"[:200],
        prompt=prompt,
        dataset=job_spec.dataset,
        check=job_spec.check,
        model=job_spec.model,
        tag=tag,
        runs=runs,
    )
    return [_as_reference(fresh, tag, runs=runs, note=note, drift=DriftSpec())]


def _as_reference(spec: MeasureSpec, tag: str, *, runs: int, note: str, drift: DriftSpec) -> MeasureSpec:
    return spec.model_copy(
        update={
            "tag": tag,
            "runs": runs,
            "baseline_overrides": (),
            "baseline_model_params": {},
            "fail_below": None,
            "max_cost_usd": None,
            "max_tokens": None,
            "drift": drift.model_copy(update={"set_reference": True, "note": note[:300], "first_run": 0}),
        }
    )


def history(rt: Runtime, reference_id: str, *, upto: int | None = None) -> dict[str, Any]:
    """A reference's history document with its nights (up to night ``upto``)."""
    repo = repository(rt)
    reference = repo.reference(reference_id)
    nights = [n for n in repo.nights(reference_id) if upto is None or n.night <= upto]
    return history_document(reference, nights)


def of_job(rt: Runtime, job_id: str) -> tuple[Reference, Night | None] | None:
    return repository(rt).of_job(job_id)


__all__ = ["history", "of_job", "prepare", "reference_specs", "repository", "settle"]
