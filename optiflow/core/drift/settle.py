"""What a finished measure does with drift (pure): become the reference, or be the next night.

The driver calls :func:`settle` when a measure job ends, inside the transaction that holds the
reference key's lock (:meth:`optiflow.persistence.references.DriftRepository.locked`), with what
is recorded for that key; it writes what :class:`Settled` says and stores ``report`` in the job's
result. A redelivered end finds the job's record and :func:`recorded` gives the same report again.
"""

from __future__ import annotations

from collections.abc import Sequence

from optiflow.core.base import Frozen
from optiflow.core.drift.detector import Tally, evidence
from optiflow.core.drift.estimate import versus
from optiflow.core.drift.identity import Identity, identity
from optiflow.core.drift.report import DriftReport, Night, Reference
from optiflow.core.drift.spec import DriftSpec
from optiflow.core.measure.report import MeasureDocument
from optiflow.core.measure.spec import MeasureSpec


class Settled(Frozen):
    report: DriftReport
    reference: Reference | None = None
    """A new reference to record (this measure), or the compared one with its next run index."""
    night: Night | None = None


def _date(ref: Reference) -> str:
    return f"{ref.created_at:%Y-%m-%d %H:%M} (job {ref.job_id[:8]})"


def _why_new(spec: MeasureSpec, ident: Identity, current: Reference | None, latest: Reference | None) -> str:
    who = f"{spec.prompt.ns}/{spec.prompt.key}@{spec.tag}"
    if spec.drift.set_reference:
        return spec.drift.note or "set by this measure (drift.set_reference)"
    if current is not None:  # same model, dataset and check: the prompt changed
        return f"the prompt changed since the reference of {_date(current)}"
    if latest is not None:
        changed = [d for d in ident.differences(latest.identity) if d != "the prompt"]
        what = " and ".join(changed) or "the configuration"
        return f"{what} changed since the reference of {_date(latest)}: unlike measures are not compared"
    return f"no reference for {who} with this model, dataset and check yet"


def new_reference(
    spec: MeasureSpec, doc: MeasureDocument, ident: Identity, *, reference_id: str, source: str
) -> Reference:
    return Reference(
        id=reference_id,
        ns=spec.prompt.ns,
        key=spec.prompt.key,
        tag=spec.tag,
        identity=ident,
        job_id=doc.job_id,
        created_at=doc.measured_at,
        source=source,
        sample_ids=spec.sample_ids(),
        outcomes=dict(doc.outcomes),
        runs=spec.runs,
        pass_rate=doc.pass_rate,
        next_run=doc.first_run + spec.runs,
    )


def settle(
    spec: MeasureSpec,
    doc: MeasureDocument,
    *,
    current: Reference | None,
    latest: Reference | None,
    nights: Sequence[Night],
    reference_id: str,
) -> Settled:
    """``current``: the reference of this measure's prompt, tag, model, dataset and check (None:
    none); ``latest``: the newest of the prompt and tag whatever its configuration (to say what
    changed); ``nights``: ``current``'s nights so far; ``reference_id``: the id a new one gets."""
    d = spec.drift
    if d.off:
        return Settled(
            report=DriftReport(status="off", reason="drift.against: none", margin=d.margin, alpha=d.alpha)
        )
    ident = identity(spec)
    if d.set_reference or current is None or current.identity.prompt != ident.prompt:
        reason = _why_new(spec, ident, current, latest)
        ref = new_reference(spec, doc, ident, reference_id=reference_id, source=reason)
        report = DriftReport(
            status="reference", reason=reason, reference=ref.info(), margin=d.margin, alpha=d.alpha
        )
        return Settled(report=report, reference=ref)
    ids = current.sample_ids
    base = current.tally()
    tallies = [Tally.of(n.outcomes, ids) for n in nights]
    tonight = Tally.of(doc.outcomes, ids)
    first = nights[-1].evidence.first_shown if nights else None
    e = evidence(base, [*tallies, tonight], ids=ids, margin=d.margin, alpha=d.alpha, first_shown=first)
    change = versus(base, tonight)
    night = Night(
        reference_id=current.id,
        night=e.night,
        job_id=doc.job_id,
        measured_at=doc.measured_at,
        outcomes=dict(doc.outcomes),
        margin=d.margin,
        alpha=d.alpha,
        evidence=e,
        change=change,
        pass_rate=doc.pass_rate,
    )
    moved = current.model_copy(update={"next_run": max(current.next_run, doc.first_run + spec.runs)})
    return Settled(report=recorded(moved, night, d), reference=moved, night=night)


def recorded(reference: Reference, night: Night | None, drift: DriftSpec) -> DriftReport:
    """The report of what was recorded: a night of ``reference``, or ``reference`` itself."""
    if night is None:
        return DriftReport(
            status="reference",
            reason=reference.source,
            reference=reference.info(),
            margin=drift.margin,
            alpha=drift.alpha,
        )
    return DriftReport(
        status="compared",
        reference=reference.info(),
        night=night.night,
        margin=night.margin,
        alpha=night.alpha,
        change=night.change,
        evidence=night.evidence,
    )


def first_run(current: Reference | None, spec: MeasureSpec) -> int:
    """The run index a measure submitted now starts at (see :attr:`DriftSpec.first_run`)."""
    if spec.drift.off or spec.drift.set_reference or current is None:
        return 0
    return current.next_run if current.identity.prompt == identity(spec).prompt else 0


__all__ = ["Settled", "first_run", "new_reference", "recorded", "settle"]
