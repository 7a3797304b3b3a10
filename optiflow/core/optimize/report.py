"""The optimize job's result (seed 003 §5.4 ``OptimizationHistory``): the primary output.

It is what ``Finish`` carries and what the job replies with: the settings, every iteration and
trial, the rejections, the best candidate (configuration, and the overrides / model params that
apply it on top of the baseline tag), the termination reason and, with splits, the test results.
:mod:`optiflow.core.optimize.document` turns it into seed 003's YAML shape and
:mod:`optiflow.core.optimize.output` into progress lines and the summary box.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.budget import BudgetReport
from optiflow.core.evaluation import JobStats
from optiflow.core.optimize.acceptance import AcceptanceSpec, Rule
from optiflow.core.optimize.configuration import Configuration, TreatmentFactor
from optiflow.core.optimize.history import IterationRecord
from optiflow.core.optimize.lineage import LineageGraph, lineage
from optiflow.core.optimize.scoring import Objective, ScorerSpec
from optiflow.core.optimize.state import TestReport
from optiflow.core.optimize.termination import CompositePolicy, TerminationReason
from optiflow.core.optimize.trial import TrialResult
from optiflow.core.overrides import SectionOverride
from optiflow.core.records import Rejection


class OptimizationHistory(Frozen):
    kind: Literal["optimize"] = "optimize"
    job_id: str
    use_case: str
    experiment: str
    prompt_ns: str
    prompt_key: str
    treatment: TreatmentFactor
    fixed_factors: dict[str, JSONValue] = Field(default_factory=dict)
    objective: Objective
    scorer: ScorerSpec
    scorer_description: str
    optimizer_description: str
    termination_policy: CompositePolicy
    acceptance: AcceptanceSpec
    acceptance_rule: Rule | None = None
    """The rule in force (``auto`` resolved from the baseline's runs); None: the baseline failed."""
    acceptance_rule_reason: str = ""
    acceptance_rule_switched_at: int | None = None
    """The iteration from which ``auto`` used the paired selection after a reproduction flipped."""
    splits: bool = False
    max_candidates_per_step: int
    eval_runs: int
    started_at: datetime
    ended_at: datetime
    iterations: tuple[IterationRecord, ...]
    trials: tuple[TrialResult, ...]
    rejections: tuple[Rejection, ...] = ()
    baseline_candidate_id: str
    best_candidate_id: str
    best_configuration: Configuration
    best_overrides: tuple[SectionOverride, ...] = ()
    """Section overrides that apply the best on top of the baseline tag (the changed sections)."""
    best_model_params: dict[str, JSONValue] = Field(default_factory=dict)
    """Model params that apply the best (the changed treatment params)."""
    termination_reason: TerminationReason
    test: TestReport | None = None
    proposal_errors: tuple[str, ...] = ()
    stats: JobStats = Field(default_factory=JobStats)
    gain_summary: str = ""
    """:meth:`gain_line` as the job left it (what the page shows): improved, not confirmed on
    held-out data, or in-sample, with the gain's interval."""
    headline: str = ""
    """:meth:`headline_text` as the job left it (what the jobs list shows)."""
    budget: BudgetReport | None = None
    """The job's hard budget and spend (a job with ``max_cost_usd`` / ``max_tokens``); when it
    ran out the run ended there (``termination_reason`` ``budget_exhausted``, or a cut test step)."""

    # -- seed 003's query methods --------------------------------------------------------------
    def trial(self, candidate_id: str) -> TrialResult | None:
        return next((t for t in self.trials if t.candidate_id == candidate_id), None)

    @property
    def total_iterations(self) -> int:
        return len(self.iterations)

    @property
    def best_iteration(self) -> IterationRecord:
        return next(
            (it for it in reversed(self.iterations) if it.new_best),
            self.iterations[0],
        )

    @property
    def baseline_score(self) -> float:
        return self.iterations[0].best_so_far

    @property
    def best_score(self) -> float:
        return self.iterations[-1].best_so_far

    @property
    def changed(self) -> bool:
        """A candidate other than the baseline was selected."""
        return self.best_candidate_id != self.baseline_candidate_id

    @property
    def confirmed(self) -> bool | None:
        """Whether the held-out test split confirms the selected best (None: no test split, or
        the best is the baseline)."""
        return self.test.confirmed if self.test is not None else None

    @property
    def held_out_missing(self) -> bool:
        """The job had ``splits: true`` and selected a best, but has no held-out result for it
        (no test samples: a job admission now refuses; or the budget ended it before its test)."""
        return self.splits and self.changed and self.test is None

    @property
    def improved(self) -> bool:
        """A best other than the baseline, and not contradicted by held-out data: with a test
        split only when it confirms it (the paired interval's lower bound above 0), and with
        splits never without a test result."""
        return self.changed and self.confirmed is not False and not self.held_out_missing

    def gain_line(self) -> str:
        """What the job can claim about its gain, in one line."""
        if not self.changed:
            return "no candidate was shown better than the baseline"
        t = self.test
        if t is not None and t.confirmation is not None:
            f = t.confirmation
            interval = (
                f"{f.gain:+.1%} [{f.gain_low:+.1%}, {f.gain_high:+.1%}] "
                f"({1 - f.alpha:.0%} anytime-valid, {f.pairs} pair(s) per sample on {f.samples} test samples)"
            )
            if t.confirmed:
                return f"improved: held-out pass-rate gain {interval}"
            return f"not confirmed on held-out data: pass-rate gain {interval}; nothing is applied"
        if t is not None:
            scores = f"{_num(t.baseline.score)} -> {_num(t.best.score)} on {len(t.sample_ids)} test samples"
            if t.confirmed:
                return f"improved: held-out score {scores}"
            return f"not confirmed on held-out data: score {scores}; nothing is applied"
        if self.held_out_missing:
            return (
                "not confirmed on held-out data: the job had splits: true but no test result "
                "(no test samples, or its budget ran out first); nothing is applied"
            )
        best = self.trial(self.best_candidate_id)
        chosen = best.selection if best is not None else None
        if chosen is not None:
            return (
                f"in-sample gain {chosen.gain:+.1%} [{chosen.gain_low:+.1%}, {chosen.gain_high:+.1%}] "
                f"over {chosen.against}: "
                "selected and measured on the same samples, not confirmed on held-out data (use splits)"
            )
        return (
            f"in-sample score gain {self.score_improvement:+.4g} (deterministic rule, the crowning's runs "
            "reproduced): measured on the samples it was selected on, "
            "not confirmed on held-out data (use splits)"
        )

    def headline_text(self) -> str:
        """The selection's own estimate in a few words, for a list: the held-out paired gain and
        its interval when there is one, else the paired selection's in-sample gain and interval,
        else (deterministic rule) the reproduced score gain. Never a single-run score."""
        if not self.changed:
            return "no candidate shown better than the baseline"
        t = self.test
        if t is not None and t.confirmation is not None:
            f = t.confirmation
            verdict = "improved" if t.confirmed else "not confirmed on held-out data"
            return f"held-out gain {f.gain:+.1%} [{f.gain_low:+.1%}, {f.gain_high:+.1%}]: {verdict}"
        if self.held_out_missing or (t is not None and not t.confirmed):
            return "not confirmed on held-out data"
        best = self.trial(self.best_candidate_id)
        chosen = best.selection if best is not None else None
        if chosen is not None:
            interval = f"[{chosen.gain_low:+.1%}, {chosen.gain_high:+.1%}]"
            return f"in-sample gain {chosen.gain:+.1%} {interval} (paired)"
        return f"in-sample score gain {self.score_improvement:+.4g} (deterministic, reproduced)"

    @property
    def score_improvement(self) -> float:
        """Best minus initial score (signed, in the score's unit)."""
        return self.best_score - self.baseline_score

    @property
    def score_improvement_percent(self) -> float:
        if self.baseline_score == 0:
            return 0.0
        return self.score_improvement / abs(self.baseline_score) * 100.0

    @property
    def total_duration_ms(self) -> float:
        return (self.ended_at - self.started_at).total_seconds() * 1000.0

    def lineage(self) -> LineageGraph:
        return lineage(self.trials)


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


__all__ = ["OptimizationHistory"]
