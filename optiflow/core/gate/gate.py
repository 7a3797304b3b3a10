"""One decision: :func:`decide` (strict or paired, protected samples, statistics, next runs)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from optiflow.core.gate.decision import GateDecision, GateStats, RunPlan, Verdict, ranges
from optiflow.core.gate.eprocess import accept_path, bets, lower_bound, pair_blocks, reject_path, upper_bound
from optiflow.core.gate.evidence import Assessment
from optiflow.core.gate.outcomes import Outcomes
from optiflow.core.gate.paired import paired_needs, standing
from optiflow.core.gate.spec import GateSpec
from optiflow.core.gate.strict import can_regress, regressions, strict_needs

_MAX_LOG = 60.0  # wealth reported up to e^60


def first_round(spec: GateSpec, sample_ids: Sequence[str]) -> RunPlan:
    """The baseline's first round: ``first_runs`` runs of every sample."""
    return RunPlan(baseline=ranges(Outcomes(), dict.fromkeys(sample_ids, spec.first_runs)))


def _rate(outcomes: Outcomes, ids: Sequence[str], *, answered: bool) -> float | None:
    runs = [outcomes.answered(s) if answered else outcomes.scored(s) for s in ids]
    made = sum(len(r) for r in runs)
    return sum(sum(r) for r in runs) / made if made else None


def _stats(
    spec: GateSpec,
    a: Assessment,
    baseline: Outcomes,
    candidate: Outcomes,
    protected_regressed: tuple[str, ...],
) -> GateStats:
    ids = a.included
    blocks = pair_blocks(baseline, candidate, ids)
    lams = bets(blocks, spec.margin, len(ids))
    if blocks:
        ea = min(_MAX_LOG, max(accept_path(blocks, lams, spec.margin)))
        er = min(_MAX_LOG, max(reject_path(blocks, lams)))
    else:
        ea = er = 0.0
    diffs = []
    for s in ids:
        b, c = baseline.answered(s), candidate.scored(s)
        if b and c:
            diffs.append(sum(b) / len(b) - sum(c) / len(c))
    touched = [s for s in a.sample_ids if candidate.attempted(s)]
    b_made, _, b_err = baseline.totals(a.sample_ids)
    c_made, _, c_err = candidate.totals(a.sample_ids)
    return GateStats(
        gate=a.gate,
        gate_reason=a.reason,
        margin=spec.margin,
        alpha=spec.alpha,
        beta=spec.beta,
        samples=len(a.sample_ids),
        baseline_pass_rate=_rate(baseline, touched or a.sample_ids, answered=True) or 0.0,
        candidate_pass_rate=_rate(candidate, touched, answered=False) or 0.0,
        drop=sum(diffs) / len(diffs) if diffs else 0.0,
        drop_low=lower_bound(blocks, lams, spec.alpha),
        drop_high=upper_bound(blocks, lams, spec.alpha),
        pairs=len(blocks),
        baseline_runs=b_made,
        candidate_runs=c_made,
        baseline_errors=b_err,
        candidate_errors=c_err,
        evidence_accept=math.exp(ea),
        evidence_reject=math.exp(er),
        regressed=regressions(baseline, candidate, touched),
        fixed=tuple(s for s in touched if candidate.passed_every_run(s) and not baseline.passed_every_run(s)),
        protected_regressed=protected_regressed,
        excluded=a.excluded,
        detectable_drop=1 / len(a.sample_ids) if a.gate == "strict" else a.detectable_drop,
        evaluated_samples=len(touched),
        stopped_early=a.gate == "strict"
        and any(candidate.attempted(s) < spec.first_runs for s in can_regress(baseline, a.sample_ids)),
    )


def decide(spec: GateSpec, assessment: Assessment, baseline: Outcomes, candidate: Outcomes) -> GateDecision:
    """Accept, reject or continue one candidate from the runs so far (a pure function of them:
    the workflow keeps the outcomes, not the gate's state).

    ``assessment`` is :func:`~optiflow.core.gate.evidence.assess` of the baseline's first round
    (it must have no failure). ``baseline`` holds every baseline run made so far (shared by all
    candidates, possibly extended for other candidates); ``candidate`` this candidate's runs.
    """
    a = assessment.require()
    protected_regressed = regressions(baseline, candidate, sorted(a.protected))
    stats = _stats(spec, a, baseline, candidate, protected_regressed)

    def done(verdict: Verdict, reason: str, *, capped: bool = False) -> GateDecision:
        return GateDecision(verdict=verdict, reason=reason, capped=capped, stats=stats)

    if protected_regressed:
        return done("reject", f"protected sample(s) regressed: {', '.join(protected_regressed)}")

    if a.gate == "strict":
        watched = can_regress(baseline, a.sample_ids)
        regressed = regressions(baseline, candidate, watched)
        if regressed:
            lower = any(candidate.attempted(s) < spec.first_runs for s in watched)
            count = f"{'at least ' if lower else ''}{len(regressed)}"
            return done(
                "reject", f"{count} regression(s): passed every baseline run, not every candidate one"
            )
        targets = strict_needs(candidate, watched, spec.first_runs)
        if not targets:
            return done(
                "accept", f"no regression among the {len(watched)} samples passing every baseline run"
            )
        plan = RunPlan(candidate=ranges(candidate, targets))
        return GateDecision(verdict="continue", reason="first round", stats=stats, plan=plan)

    ids = a.included
    st = standing(spec, baseline, candidate, ids)
    if st.state == "accept":
        return done(
            "accept",
            f"non-inferior: the drop is below {spec.margin:.0%} with {1 - spec.alpha:.0%} confidence "
            f"after {st.at} pair(s) per sample",
        )
    if st.state == "reject":
        return done(
            "reject",
            f"worse: a drop shown with {1 - spec.beta:.0%} confidence after {st.at} pair(s) per sample",
        )
    next_round = paired_needs(spec, baseline, candidate, ids, len(st.blocks))
    if next_round is None:
        return done(
            "reject",
            f"undecided after {len(st.blocks)} pair(s) per sample (max_runs {spec.max_runs}): "
            f"not shown non-inferior at margin {spec.margin:.0%}",
            capped=True,
        )
    base_t, cand_t = next_round
    plan = RunPlan(baseline=ranges(baseline, base_t), candidate=ranges(candidate, cand_t))
    reason = "first round" if not st.blocks else f"undecided after {len(st.blocks)} pair(s) per sample"
    return GateDecision(verdict="continue", reason=reason, stats=stats, plan=plan)


__all__ = ["decide", "first_round"]
