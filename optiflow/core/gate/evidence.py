"""Evidence first: what the baseline's first round says, before any candidate is judged.

:func:`assess` reads the baseline's runs once: the gate to use (``auto`` picks ``strict`` for a
model its runs show deterministic, else ``paired``) and why, and whether the baseline gives the
gate anything to stand on. When it does not, :attr:`Assessment.failure` is one line naming the
cause, and the job must fail (:meth:`Assessment.require` raises :class:`NoEvidenceError`):

- the baseline's error rate is over ``max_error_rate`` (errors are counted, never dropped);
- no baseline run passed, under every gate and whatever the floor below (even 0);
- its pass rate (over answered runs) is under ``min_baseline_pass_rate``: a check nothing passes
  makes "no regression" hold for every edit;
- ``strict``: no sample passed every baseline run, so nothing can regress.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from optiflow.core.base import Frozen
from optiflow.core.gate.outcomes import Outcomes
from optiflow.core.gate.power import detectable_drop, estimate_rates, fixed_runs, predict
from optiflow.core.gate.spec import GateKind, GateSpec
from optiflow.errors import JobError


class NoEvidenceError(JobError):
    """The baseline gives the gate nothing to stand on (see :func:`assess`)."""

    code = "gate_no_evidence"


class Assessment(Frozen):
    """The baseline's first round, read once and shared by every candidate's decision."""

    gate: GateKind
    reason: str
    failure: str | None = None
    sample_ids: tuple[str, ...]
    protected: frozenset[str] = frozenset()
    excluded: tuple[str, ...] = ()
    runs: int = 0
    errors: int = 0
    pass_rate: float = 0.0
    error_rate: float = 0.0
    flaky: int = 0
    rates: tuple[float, ...] = ()
    detectable_drop: float | None = None
    no_op_accept: float | None = None
    fixed_runs: int | None = None

    def require(self) -> Assessment:
        if self.failure is not None:
            raise NoEvidenceError(self.failure, field="gate")
        return self

    @property
    def included(self) -> tuple[str, ...]:
        """The samples the paired test pairs (every sample with an answered baseline run)."""
        out = set(self.excluded)
        return tuple(s for s in self.sample_ids if s not in out)


def _choose(spec: GateSpec, baseline: Outcomes, ids: Sequence[str]) -> tuple[GateKind, str, int]:
    answered = [baseline.answered(s) for s in ids]
    flaky = sum(1 for a in answered if len(set(a)) > 1)
    if spec.mode != "auto":
        return spec.mode, f"mode {spec.mode} (set in the job)", flaky
    fewest = min((len(a) for a in answered), default=0)
    if fewest < 2:
        return (
            "paired",
            f"auto: {fewest} answered baseline run(s) of some sample cannot show the model deterministic, "
            "so paired (with first_runs >= 2, or a compress job's extra baseline run at eval_runs 1, auto "
            "picks strict for a deterministic model)",
            flaky,
        )
    if flaky == 0:
        return "strict", f"auto: every sample's baseline runs agreed ({fewest}+ runs): deterministic model", 0
    return "paired", f"auto: {flaky} of {len(ids)} samples gave different results across baseline runs", flaky


def assess(
    spec: GateSpec,
    baseline: Outcomes,
    sample_ids: Iterable[str],
    protected: Iterable[str] = (),
    *,
    power: bool = True,
) -> Assessment:
    """Choose the gate and check the evidence (see the module docstring). With ``power`` (paired)
    it also predicts what the gate can resolve on this baseline (about half a second)."""
    ids = tuple(sample_ids)
    made, passed, errored = baseline.totals(ids)
    answered = made - errored
    pass_rate = passed / answered if answered else 0.0
    error_rate = errored / made if made else 1.0
    gate, reason, flaky = _choose(spec, baseline, ids)
    failure: str | None = None
    if not made:
        failure = "the baseline has no runs: nothing to compare a candidate with"
    elif error_rate > spec.max_error_rate:
        failure = (
            f"baseline error rate {error_rate:.1%} is over max_error_rate {spec.max_error_rate:.1%} "
            f"({errored} of {made} evaluations errored after retries)"
        )
    elif pass_rate < spec.min_baseline_pass_rate:
        failure = (
            f"baseline pass rate {pass_rate:.1%} is under min_baseline_pass_rate "
            f"{spec.min_baseline_pass_rate:.1%}: the check passes (almost) nothing, so no edit can be shown "
            "not to regress"
        )
    elif passed == 0:  # whatever the floor (min_baseline_pass_rate: 0 included) and the gate
        failure = (
            f"no baseline run passed (0 of {answered} answered; min_baseline_pass_rate "
            f"{spec.min_baseline_pass_rate:.1%} does not matter): the check passes nothing, so every edit "
            "would look harmless"
        )
    elif gate == "strict" and not any(baseline.passed_every_run(s) for s in ids):
        failure = (
            "no sample passed every baseline run: the strict gate has nothing that can regress and would "
            "accept every edit"
        )
    first = Assessment(
        gate=gate,
        reason=reason,
        failure=failure,
        sample_ids=ids,
        protected=frozenset(protected) & frozenset(ids),
        runs=made,
        errors=errored,
        pass_rate=pass_rate,
        error_rate=error_rate,
        flaky=flaky,
    )
    if failure is not None or gate == "strict":
        return first
    excluded = tuple(s for s in ids if not baseline.answered(s))
    kept = [s for s in ids if s not in set(excluded)]
    rates = estimate_rates(baseline, kept)
    if not power:
        return first.model_copy(update={"excluded": excluded, "rates": tuple(rates)})
    return first.model_copy(
        update={
            "excluded": excluded,
            "rates": tuple(rates),
            "detectable_drop": detectable_drop(spec, rates),
            "no_op_accept": predict(spec, rates, rates).accept,
            "fixed_runs": fixed_runs(spec, rates),
        }
    )


__all__ = ["Assessment", "NoEvidenceError", "assess"]
