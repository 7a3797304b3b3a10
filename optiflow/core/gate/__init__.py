"""Gates: how a candidate edit is accepted, on deterministic and on sampled models.

A *gate* compares a candidate's runs with the baseline's, sample by sample, and answers accept,
reject or continue (with the runs it still needs). It is pure and stateless: a workflow keeps each
experiment's :class:`Outcomes` and calls :func:`decide` after every round; the first round of the
baseline goes through :func:`assess` once.

Driving it (one round = one chord)::

    spec = GateSpec(...)
    plan = first_round(spec, ids)                    # the baseline's first runs
    a = assess(spec, baseline, ids, protected).require()   # gate chosen, evidence checked
    while undecided candidates:
        decisions = {c: decide(spec, a, baseline, outcomes[c]) for c in undecided}
        plans = [d.plan for d in decisions.values() if not d.decided]
        run RunPlan.merge_baseline(plans) + every plan's candidate ranges; merge results in

**strict** is seed 000: a regression is a sample that passed every baseline run and not every
candidate run; zero regressions accepts. On a deterministic model it is exact; on a sampled one
nearly every sample is flaky and it rejects even edits that change nothing.

**paired** is a sequential non-inferiority test of the mean per-sample pass probability. With
``p_i`` / ``q_i`` the baseline's / candidate's pass probability of sample ``i`` over the fixed
dataset, the drop is ``delta = mean(p_i - q_i)``; the candidate is accepted when ``delta < margin``
is shown with confidence ``1 - alpha``. Runs are paired by sample and index: block ``k`` holds, for
every sample, the baseline's k-th answered run against the candidate's k-th run, ``D = X - Y`` in
{-1, 0, 1}, ``E[D] = p_i - q_i``. Two betting e-processes (Waudby-Smith & Ramdas, "Estimating
means of bounded random variables by betting", 2023) run over the blocks
(:mod:`~optiflow.core.gate.eprocess`): ``W_acc = prod(1 + lam (margin - D))`` for the null
``delta >= margin`` and ``W_rej = prod(1 + lam D)`` for the null ``delta <= 0``. Accept when
``W_acc >= 1/alpha``, reject when ``W_rej >= 1/beta``, otherwise run one more round; a candidate
still undecided at ``max_runs`` is not accepted. The bet is the same for every sample of a block
and fixed from earlier blocks only, so by the AM-GM inequality each block's expected factor is at
most 1 under the null whatever the per-sample probabilities: each wealth is a nonnegative
supermartingale under its null and Ville's inequality bounds ``P(sup W >= 1/a) <= a``.

*Why the error rates hold under optional stopping*: that bound covers the supremum over all
blocks, so checking after every round, stopping a candidate whenever it is decided, giving more
runs only to undecided candidates, and extending the shared baseline when a candidate needs it
keep ``P(accept | delta >= margin) <= alpha`` and ``P(early reject | delta <= 0) <= beta`` exactly,
with no normal approximation, at any number of samples and runs. The statistic is paired per
sample, so the spread of difficulty across samples does not enter its variance (Miller, "Adding
Error Bars to Evals", 2024); the interval reported with every decision is the anytime-valid
confidence sequence of the same e-processes, not a CLT interval (Bowyer, Aitchison & Ivanova,
2025). The bets (``margin / (v + margin^2)``, ``v`` the per-pair variance) make the pair behave
like Wald's SPRT between "no drop" and "a drop of margin", which is why it needs far fewer runs
than a fixed design on average.

*Assumptions*: runs are independent given the sample (a provider cache that repeats an answer
breaks this); whether a baseline call errors does not depend on what it would have answered
(errored baseline runs are re-run; a candidate's errors count as failures); the inference is
about this dataset's samples (the population is the dataset, as in seed 000); ``alpha`` is per
decision: with many candidates some false acceptance is expected about ``alpha`` times each.

:mod:`~optiflow.core.gate.power` predicts the gate's operating curve (accept, reject, undecided,
runs paid) from per-sample rates, the smallest drop it can resolve, and the fixed design's runs.
**auto** picks strict when every sample's baseline runs agree (at least 2 runs), else paired. The
choice reads the same baseline runs the paired test pairs, so its guarantee is for the procedure
as a whole: ``P(paired is chosen and accepts a drop >= margin) <= alpha``.
**protect**: protected samples keep the strict per-sample rule in every mode.
"""

from optiflow.core.gate.decision import GateDecision, GateStats, RunPlan, RunRange, Verdict
from optiflow.core.gate.evidence import Assessment, NoEvidenceError, assess
from optiflow.core.gate.gate import decide, first_round
from optiflow.core.gate.outcomes import Outcomes
from optiflow.core.gate.power import (
    DropModel,
    OperatingPoint,
    detectable_drop,
    drop_rates,
    estimate_rates,
    fixed_runs,
    operating_curve,
    predict,
)
from optiflow.core.gate.spec import GateKind, GateMode, GateSpec

__all__ = [
    "Assessment",
    "DropModel",
    "GateDecision",
    "GateKind",
    "GateMode",
    "GateSpec",
    "GateStats",
    "NoEvidenceError",
    "OperatingPoint",
    "Outcomes",
    "RunPlan",
    "RunRange",
    "Verdict",
    "assess",
    "decide",
    "detectable_drop",
    "drop_rates",
    "estimate_rates",
    "first_round",
    "fixed_runs",
    "operating_curve",
    "predict",
]
