"""Decision replay (seed 003 §8.5): re-apply the scorer, acceptance and termination policy to a
history document's recorded aggregates, and list every decision that differs.

Nothing is re-executed: each candidate's score is recomputed from its recorded statistics, the
new-best decision from those scores (and the recorded per-sample values for the Mann-Whitney
test), and the termination decision after each iteration from the replayed history and the
iteration's recorded end time (the clock). The settings default to the recorded ones; pass other
ones to see what they would have decided. A stop decided by the optimizer itself (target
reached, nothing left to propose) is recorded data, not replayed: at that iteration the policy
decision is "continue" on both sides.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.optimize.acceptance import AcceptanceDecision, AcceptanceSpec, Contender, Rule, decide
from optiflow.core.optimize.document import summary_of
from optiflow.core.optimize.history import IterationRecord, IterationStatus, TrialHistory
from optiflow.core.optimize.scoring import Objective, ScorerSpec, parse_scorer
from optiflow.core.optimize.selection import COST_SCORERS, SelectionFigures, pick, rejudge
from optiflow.core.optimize.termination import (
    POLICY_CAUSES,
    CompositePolicy,
    TerminationCause,
    TerminationReason,
    parse_termination,
)
from optiflow.errors import ValidationError

DecisionKind = Literal["score", "selection", "new_best", "stop", "confirmation"]
_TOLERANCE = 1e-9


class ReplayDecision(Frozen):
    iteration: int
    kind: DecisionKind
    candidate_id: str | None = None
    recorded: JSONValue = None
    replayed: JSONValue = None
    differs: bool = False

    def describe(self) -> str:
        who = f" {self.candidate_id}" if self.candidate_id else ""
        return (
            f"iteration {self.iteration} {self.kind}{who}: "
            f"recorded {self.recorded!r}, replayed {self.replayed!r}"
        )


class ReplayReport(Frozen):
    decisions: tuple[ReplayDecision, ...] = ()
    best_candidate_id: str | None = None
    termination: TerminationReason | None = Field(default=None)
    """The first termination the replayed policy decided (None: it never fired)."""

    @property
    def differences(self) -> tuple[ReplayDecision, ...]:
        return tuple(d for d in self.decisions if d.differs)

    @property
    def ok(self) -> bool:
        return not self.differences

    def lines(self) -> list[str]:
        if self.ok:
            return [f"{len(self.decisions)} decisions replayed, none differs"]
        return [
            f"{len(self.differences)} of {len(self.decisions)} decisions differ:",
            *(f"  {d.describe()}" for d in self.differences),
        ]


def _time(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def _status(value: Any) -> IterationStatus:
    text = str(value or "success").lower()
    if text == "no_candidates":
        return "no_candidates"
    if text == "budget_exhausted":
        return "budget_exhausted"
    return "failed" if text == "failed" else "success"


def _cause(value: Any) -> str | None:
    if not value:
        return None
    return str(value).lower()


class _Settings(Frozen):
    """What the replay decides with: the document's settings, or the ones passed instead."""

    score_fn: ScorerSpec
    goal: Objective
    policy: CompositePolicy
    acceptance: AcceptanceSpec
    rule: Rule
    paired: dict[str, Any]


def _settings(
    document: Mapping[str, Any],
    settings: Mapping[str, Any],
    scorer: ScorerSpec | Mapping[str, Any] | str | None,
    objective: Objective | str | None,
    termination: Any,
    acceptance: AcceptanceSpec | Mapping[str, Any] | None,
) -> _Settings:
    score_fn = parse_scorer(scorer if scorer is not None else settings["scorer"])
    goal = Objective(objective if objective is not None else settings["objective"])
    policy: CompositePolicy = parse_termination(
        termination if termination is not None else settings["termination"]
    )
    acceptance_spec = (
        acceptance
        if isinstance(acceptance, AcceptanceSpec)
        else AcceptanceSpec.model_validate(acceptance if acceptance is not None else settings["acceptance"])
    )
    rule_used: Rule
    if acceptance_spec.test != "auto":
        rule_used = acceptance_spec.test
    else:  # what auto chose from the baseline's runs (recorded); an older document: today's rule
        recorded_rule = document.get("acceptanceRule")
        rule_used = (
            "paired"
            if recorded_rule == "paired"
            else "mann_whitney"
            if recorded_rule == "mann_whitney"
            else "none"
        )
    paired: dict[str, Any] = {
        "alpha": acceptance_spec.alpha,
        "beta": acceptance_spec.beta,
        "min_gain": acceptance_spec.min_gain,
        "effect": acceptance_spec.effect,
        "margin": acceptance_spec.margin,
        "max_runs": acceptance_spec.max_runs,
        "cost_type": score_fn.type in COST_SCORERS,
    }
    return _Settings(
        score_fn=score_fn, goal=goal, policy=policy, acceptance=acceptance_spec, rule=rule_used, paired=paired
    )


class _Iteration(Frozen):
    """One recorded iteration's completed candidates, re-scored and (paired) re-judged."""

    contenders: tuple[Contender, ...] = ()
    figures: dict[str, SelectionFigures] = Field(default_factory=dict)
    order: tuple[str, ...] = ()
    recorded_accepted: str | None = None


def _candidates(
    it: Mapping[str, Any], number: int, s: _Settings, decisions: list[ReplayDecision]
) -> _Iteration:
    """Re-score each completed candidate (and re-judge its paired figures), recording the
    score and selection decisions."""
    contenders: list[Contender] = []
    figures: dict[str, SelectionFigures] = {}
    order: list[str] = []
    recorded_accepted = None
    for c in it.get("candidates") or []:
        if c.get("accepted"):
            recorded_accepted = c["candidateId"]
        if c.get("status") != "completed" or c.get("statistics") is None:
            continue
        score = s.score_fn.score(summary_of(c["statistics"]))
        decisions.append(
            ReplayDecision(
                iteration=number,
                kind="score",
                candidate_id=c["candidateId"],
                recorded=c.get("score"),
                replayed=score,
                differs=c.get("score") is None or abs(float(c["score"]) - score) > _TOLERANCE,
            )
        )
        if c.get("selection") is not None:
            recorded = SelectionFigures.model_validate(c["selection"])
            again = rejudge(recorded, **s.paired)
            figures[c["candidateId"]] = again
            order.append(c["candidateId"])
            decisions.append(
                ReplayDecision(
                    iteration=number,
                    kind="selection",
                    candidate_id=c["candidateId"],
                    recorded=recorded.verdict,
                    replayed=again.verdict,
                    differs=recorded.verdict != again.verdict,
                )
            )
        values = {str(k): float(v) for k, v in (c.get("sampleScores") or {}).items()}
        contenders.append(Contender(candidate_id=c["candidateId"], score=score, values=values))
    return _Iteration(
        contenders=tuple(contenders), figures=figures, order=tuple(order), recorded_accepted=recorded_accepted
    )


def _confirmation(document: Mapping[str, Any], iterations: Any, s: _Settings) -> ReplayDecision | None:
    confirmation = (document.get("test") or {}).get("confirmation")
    if confirmation is None:
        return None
    recorded = SelectionFigures.model_validate(confirmation)
    again = rejudge(recorded, spent=False, **s.paired)
    return ReplayDecision(
        iteration=int(iterations[-1]["iterationNumber"]) if iterations else 0,
        kind="confirmation",
        candidate_id=recorded.against,
        recorded=recorded.verdict,
        replayed=again.verdict,
        differs=recorded.verdict != again.verdict,
    )


def _rule_at(s: _Settings, number: int, switched_at: int | None) -> Rule:
    """The rule an iteration was decided under: ``auto``'s deterministic rule switches to the
    paired selection at the iteration whose reproduction showed a flip (recorded)."""
    if s.rule == "paired" and switched_at is not None and number < switched_at:
        return "none"
    return s.rule


def replay(
    document: Mapping[str, Any],
    *,
    scorer: ScorerSpec | Mapping[str, Any] | str | None = None,
    objective: Objective | str | None = None,
    termination: Any = None,
    acceptance: AcceptanceSpec | Mapping[str, Any] | None = None,
) -> ReplayReport:
    try:
        settings = document["settings"]
        iterations = document["iterations"]
        started = _time(document["startTime"])
    except (KeyError, TypeError) as exc:
        raise ValidationError(
            f"not an optimization history document (missing {exc})", field="document"
        ) from None
    s = _settings(document, settings, scorer, objective, termination, acceptance)
    switched = document.get("acceptanceRuleSwitchedAt")
    switched_at = int(switched) if switched is not None and acceptance is None else None
    recorded_reason = document.get("terminationReason") or {}
    recorded_cause = _cause(recorded_reason.get("cause"))
    decisions: list[ReplayDecision] = []
    records: list[IterationRecord] = []
    best_id: str | None = None
    best_score = 0.0
    best_values: dict[str, float] = {}
    first_stop: TerminationReason | None = None
    last = len(iterations) - 1
    for index, it in enumerate(iterations):
        number = int(it["iterationNumber"])
        got = _candidates(it, number, s, decisions)
        contenders = list(got.contenders)
        if best_id is None:  # the baseline
            if not contenders:
                raise ValidationError("the first iteration has no completed baseline", field="iterations")
            base = contenders[0]
            best_id, best_score, best_values = base.candidate_id, base.score, base.values
            new_best = True
        else:
            rule = _rule_at(s, number, switched_at)
            cut_short = index == last and recorded_cause == TerminationCause.BUDGET_EXHAUSTED.value
            if rule == "none" and s.acceptance.test == "auto" and cut_short:
                # auto's deterministic rule crowns nothing the budget left unreproduced
                decision = AcceptanceDecision()
            elif rule == "paired":
                decision = AcceptanceDecision(accepted=pick(got.figures, list(got.order)))
            else:
                decision = decide(
                    contenders,
                    best_score=best_score,
                    best_values=best_values,
                    objective=s.goal,
                    spec=s.acceptance.model_copy(update={"test": rule}),
                )
            decisions.append(
                ReplayDecision(
                    iteration=number,
                    kind="new_best",
                    recorded=got.recorded_accepted,
                    replayed=decision.accepted,
                    differs=got.recorded_accepted != decision.accepted,
                )
            )
            new_best = decision.accepted is not None
            if decision.accepted is not None:
                chosen = next(c for c in contenders if c.candidate_id == decision.accepted)
                best_id, best_score, best_values = chosen.candidate_id, chosen.score, chosen.values
        top = min(contenders, key=lambda c: s.goal.best_first(c.score), default=None)
        records.append(
            IterationRecord(
                number=number,
                candidate_ids=tuple(c["candidateId"] for c in it.get("candidates") or []),
                best_candidate_id=top.candidate_id if top else None,
                score=top.score if top else None,
                status=_status(it.get("status")),
                new_best=new_best,
                best_candidate_so_far=best_id,
                best_so_far=best_score,
                tokens=int(it.get("tokens") or 0),
                cost=float(it.get("cost") or 0.0),
                started_at=_time(it.get("startTime") or it["endTime"]),
                ended_at=_time(it["endTime"]),
            )
        )
        reason = s.policy.check(
            TrialHistory(started_at=started, iterations=tuple(records)), records[-1].ended_at
        )
        if reason is not None and first_stop is None:
            first_stop = reason
        recorded_stop = None
        if index == last and recorded_cause in {c.value for c in POLICY_CAUSES}:
            recorded_stop = recorded_cause
        replayed_stop = reason.cause.value if reason is not None else None
        decisions.append(
            ReplayDecision(
                iteration=number,
                kind="stop",
                recorded=recorded_stop or "continue",
                replayed=replayed_stop or "continue",
                differs=recorded_stop != replayed_stop,
            )
        )
    confirmation = _confirmation(document, iterations, s)
    if confirmation is not None:
        decisions.append(confirmation)
    return ReplayReport(decisions=tuple(decisions), best_candidate_id=best_id, termination=first_stop)


__all__ = ["ReplayDecision", "ReplayReport", "TerminationCause", "replay"]
