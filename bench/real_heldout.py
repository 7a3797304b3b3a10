"""bench-real's held-out test split (targets 4 and 5 of :mod:`bench.real`).

``stable`` and the compress job's accepted edits (applied to a tag) measured on the test split by
measure jobs on the workers, round by round as the paired gate asks (both arms' first round
together), the same runs each, decided by ``decide`` after every round (:func:`compare`). When the
job accepted nothing there is nothing to compare: ``stable`` alone is measured, for target 5
(:func:`alone`).

Each measure job makes the runs ``start .. stop-1`` its plan asks for: its drift comparison is off
(these are a bench's measurements, not nights of a reference) and its ``drift.first_run`` is the
range's start, so its run indices are the arm's own; its results are placed by their run index
relative to the document's ``first_run`` (:func:`placed`), never by the position in the job.
:func:`bench_drift` and :func:`collect` do that for any measure job of a bench (``bench/record_runs``
records its chunks with them).

A round that adds no new pair (a (stable, candidate) run of a sample with both results) ends the
comparison with the verdict ``stalled`` and the reason, instead of asking for the same runs again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from optiflow.core.dataset import Dataset
from optiflow.core.evaluation import EvalResult
from optiflow.core.gate import (
    Assessment,
    GateDecision,
    GateSpec,
    GateStats,
    Outcomes,
    RunRange,
    assess,
    decide,
)
from optiflow.core.gate import first_round as gate_first_round
from optiflow.core.gate.outcomes import ERROR, FAIL, MISSING, PASS
from optiflow.core.measure.report import wilson_interval

if TYPE_CHECKING:  # the model part imports them when it runs
    from optiflow.core.compress.spec import CompressSpec
    from optiflow.core.drift.spec import DriftSpec
    from optiflow.core.measure.report import MeasureDocument
    from optiflow.interfaces.client import Client, JobHandle

NOTHING_ACCEPTED = "nothing accepted: the prompt is unchanged, nothing to compare"
STALLED = "stalled"
"""The verdict of a comparison a round of which added no new pair."""

Measure = Callable[[Mapping[str, Sequence[RunRange]]], dict[str, Outcomes]]
"""One round: per arm (``stable``, ``candidate``), the run ranges to make -> per arm, the outcomes
made, each at its run index."""

Say = Callable[[str], None]


@dataclass
class Rounds:
    """What a comparison (or ``stable`` alone) measured and decided."""

    arms: dict[str, Outcomes]
    rounds: int
    assessment: Assessment | None = None
    decision: GateDecision | None = None
    """The last decision (``continue`` when the comparison stalled)."""
    stalled: str = ""
    """Why the comparison stopped without a decision: a round added no new pair."""


def pairs(a: Outcomes, b: Outcomes, ids: Sequence[str]) -> int:
    """Run indices, over ``ids``, at which both ``a`` and ``b`` have a result."""
    return sum(1 for s in ids for x, y in zip(a.seq(s), b.seq(s), strict=False) if MISSING not in (x, y))


def planned(plans: Mapping[str, Sequence[RunRange]]) -> int:
    return sum(r.calls for ranges in plans.values() for r in ranges)


def compare(gate: GateSpec, ids: Sequence[str], measure: Measure, say: Say = print) -> Rounds:
    """``stable`` against ``candidate`` on ``ids``, driven as the compress workflow drives a
    candidate: the first round of both, ``assess`` once on stable's, then ``decide`` after every
    round and the runs its plan asks for. Ends decided, or ``stalled`` when a round adds no pair."""
    out = Rounds(arms={"stable": Outcomes(), "candidate": Outcomes()}, rounds=0)

    def run(plans: Mapping[str, Sequence[RunRange]]) -> bool:
        """One round; False (and ``out.stalled`` says why) when it added no new pair."""
        before = pairs(out.arms["stable"], out.arms["candidate"], ids)
        out.rounds += 1
        for arm, got in measure(plans).items():
            out.arms[arm] = out.arms[arm].extend(got)
        added = pairs(out.arms["stable"], out.arms["candidate"], ids) - before
        if added > 0:
            return True
        out.stalled = (
            f"round {out.rounds} added no new pair: {planned(plans)} run(s) were planned "
            f"({', '.join(f'{arm} {sum(r.calls for r in rs)}' for arm, rs in plans.items())}) and none "
            "came back as a pair; stopped instead of asking for them again"
        )
        say(f"  {out.stalled}")
        return False

    first = gate_first_round(gate, ids).baseline
    if not run({"stable": first, "candidate": first}):
        return out
    out.assessment = assess(gate, out.arms["stable"], ids)
    if out.assessment.failure is not None:
        return out
    while True:
        out.decision = decide(gate, out.assessment, out.arms["stable"], out.arms["candidate"])
        say(f"  round {out.rounds}: {out.decision.line()}")
        if out.decision.decided or not run(
            {"stable": out.decision.plan.baseline, "candidate": out.decision.plan.candidate}
        ):
            return out


def alone(ids: Sequence[str], runs: int, measure: Measure, say: Say = print) -> Rounds:
    """``stable`` alone: ``runs`` runs of every sample of ``ids``, in one round."""
    out = Rounds(arms={"stable": Outcomes()}, rounds=1)
    plan = {"stable": (RunRange(start=0, stop=runs, sample_ids=tuple(ids)),)}
    out.arms["stable"] = out.arms["stable"].extend(measure(plan)["stable"])
    if not out.arms["stable"].totals(ids)[0]:
        out.stalled = f"the {planned(plan)} planned run(s) of stable came back without a result"
        say(f"  {out.stalled}")
    return out


# -- measure jobs on the workers ------------------------------------------------------------------
def subset(dataset: Dataset, ids: Sequence[str]) -> Dataset:
    keep = set(ids)
    return dataset.model_copy(update={"samples": tuple(s for s in dataset if s.id in keep)})


def mark(x: EvalResult | None) -> str:
    if x is None or x.skipped:
        return MISSING
    return ERROR if x.error is not None else PASS if x.passed else FAIL


def placed(items: Sequence[EvalResult], r: RunRange, first_run: int) -> Outcomes:
    """A measure job's results for the runs ``r`` asked for, each at its run index: the job's run
    ``first_run + j`` is the arm's run ``r.start + j`` (a run the job did not make stays ``.``)."""
    got = {(x.sample_id, x.run - first_run): x for x in items}
    return Outcomes(
        runs={
            sid: MISSING * r.start + "".join(mark(got.get((sid, j))) for j in range(r.stop - r.start))
            for sid in r.sample_ids
        }
    )


def trial_items(client: Client, job_id: str, expected: int, timeout: float = 60.0) -> list[EvalResult]:
    """A finished job's per-(sample, run) results. The driver stores a step's rows after it has
    carried the step's action on, so the last step's rows can land just after the job finished:
    wait for all ``expected`` of them (then take what is there)."""
    deadline = time.monotonic() + timeout
    while True:
        items = [x for x in client.runtime.jobs.trial_items(job_id) if not x.skipped]
        if len(items) >= expected or time.monotonic() > deadline:
            return items
        time.sleep(0.2)


def bench_drift(first_run: int) -> DriftSpec:
    """The drift settings of a bench's measure job whose runs start at ``first_run``: no
    comparison and no reference recorded (a bench's measurements are not nights of a reference,
    and a reference would make a later job of the tag continue its run indices), the runs
    numbered from ``first_run``."""
    from optiflow.core.drift.spec import DriftSpec

    return DriftSpec(against="none", first_run=first_run)


@dataclass(frozen=True)
class Collected:
    """A finished measure job of the runs ``r``: its report, its stored results, and those
    results at their run index (:func:`placed`)."""

    doc: MeasureDocument
    items: list[EvalResult]
    outcomes: Outcomes


def collect(client: Client, handle: JobHandle, r: RunRange, timeout: float = 4 * 3600) -> Collected:
    """Wait for the measure job ``handle`` (made for the runs ``r``; raises when it failed) and
    read its results back, placed by run index relative to the job's ``first_run``."""
    from optiflow.core.measure.report import MeasureDocument

    doc = handle.wait(timeout=timeout).raise_for_error().report
    assert isinstance(doc, MeasureDocument)
    items = trial_items(client, handle.id, r.calls)
    return Collected(doc=doc, items=items, outcomes=placed(items, r, doc.first_run))


@dataclass
class MeasureJobs:
    """A :data:`Measure` by measure jobs on the workers: one job per arm and run range, each tag
    measured as it is stored; ``rounds`` the calls and wall time of each round."""

    client: Client
    spec: CompressSpec
    full: Dataset
    tags: Mapping[str, str]
    say: Say = print
    rounds: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, plans: Mapping[str, Sequence[RunRange]]) -> dict[str, Outcomes]:
        from optiflow.core.measure.spec import MeasureSpec

        started = time.perf_counter()
        launched = []
        for arm, ranges in plans.items():
            for r in ranges:
                m = MeasureSpec(
                    name=f"bench-real-test-{arm}-{len(self.rounds) + 1}",
                    prompt=self.spec.prompt,
                    dataset=subset(self.full, r.sample_ids),
                    check=self.spec.check,
                    model=self.spec.model,
                    tag=self.tags[arm],
                    runs=r.stop - r.start,
                    split="test",
                    drift=bench_drift(r.start),
                )
                launched.append((arm, r, self.client.submit(m)))
        out = {arm: Outcomes() for arm in plans}
        calls = 0
        for arm, r, handle in launched:
            got = collect(self.client, handle, r)
            if len(got.items) < r.calls:
                self.say(f"  measure job {handle.id} ({arm}): {len(got.items)} of {r.calls} results stored")
            out[arm] = out[arm].extend(got.outcomes)
            calls += len(got.items)
        self.rounds.append({"calls": calls, "wall_s": time.perf_counter() - started})
        return out


# -- the result -----------------------------------------------------------------------------------
def stats_of(g: GateStats | None) -> dict[str, Any]:
    if g is None:
        return {}
    return {
        "gate": g.gate,
        "drop": g.drop,
        "drop_low": g.drop_low,
        "drop_high": g.drop_high,
        "pairs": g.pairs,
        "candidate_runs": g.candidate_runs,
        "baseline_pass_rate": g.baseline_pass_rate,
        "candidate_pass_rate": g.candidate_pass_rate,
        "regressed": len(g.regressed),
        "fixed": len(g.fixed),
    }


def arm_row(o: Outcomes, ids: Sequence[str]) -> dict[str, Any]:
    made, passed, errors = o.totals(ids)
    w = wilson_interval(passed, made)
    return {
        "evaluations": made,
        "passed": passed,
        "errors": errors,
        "pass_rate": passed / made if made else 0.0,
        "wilson": [w.lower, w.upper],
        "runs": max((o.attempted(s) for s in ids), default=0),
    }


def result(
    gate: GateSpec,
    ids: Sequence[str],
    candidate_tag: str | None,
    r: Rounds,
    timing: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The results file's ``test``: a comparison (``candidate_tag`` given) or ``stable`` alone."""
    a, d = r.assessment, r.decision
    decided = d is not None and d.decided and not r.stalled
    if candidate_tag is None:
        verdict, reason = "not applicable", NOTHING_ACCEPTED
    elif r.stalled:
        verdict, reason = STALLED, r.stalled
    elif decided and d is not None:
        verdict, reason = d.verdict, d.reason
    else:
        verdict, reason = "no evidence", (a.failure if a is not None and a.failure else "")
    return {
        "gate": gate.model_dump(mode="json"),
        "samples": len(ids),
        "comparison": candidate_tag is not None,
        "candidate_tag": candidate_tag,
        "assessment": {"gate": a.gate, "reason": a.reason, "failure": a.failure} if a is not None else None,
        "stable": arm_row(r.arms["stable"], ids),
        "candidate": arm_row(r.arms["candidate"], ids) if "candidate" in r.arms else None,
        "verdict": verdict,
        "capped": bool(decided and d is not None and d.capped),
        "reason": reason,
        "stalled": r.stalled,
        "stats": stats_of(d.stats if d is not None else None),
        "regressed": list(d.stats.regressed) if d is not None else [],
        "fixed": list(d.stats.fixed) if d is not None else [],
        "rounds": list(timing),
        "outcomes": {arm: o.runs for arm, o in r.arms.items()},
    }


def heldout(
    client: Client,
    spec: CompressSpec,
    full: Dataset,
    candidate_tag: str | None,
    gate: GateSpec,
    say: Say = print,
) -> dict[str, Any]:
    """The test split of ``full``: ``stable`` against ``candidate_tag`` (:func:`compare`), or,
    with None (the job accepted nothing), ``stable`` alone for ``gate.max_runs`` runs, the most a
    comparison's arm could make (:func:`alone`)."""
    ids = list(full.split("test").ids())
    jobs = MeasureJobs(client, spec, full, {"stable": "stable", "candidate": candidate_tag or "stable"}, say)
    r = alone(ids, gate.max_runs, jobs, say) if candidate_tag is None else compare(gate, ids, jobs, say)
    return result(gate, ids, candidate_tag, r, jobs.rounds)
