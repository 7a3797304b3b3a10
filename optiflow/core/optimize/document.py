"""The YAML history document in seed 003 §8.4's shape, as a plain dict (the caller dumps it).

:func:`history_path` names the file ``optimizations/<use case>/<experiment>_YYYYMMDD_HHMMSS.yaml``.
Beyond the seed's fields the document records, per iteration, every candidate (statistics,
score, per-sample values, acceptance p-value, whether it became the new best) and the decision
taken ("continue" / "stop"), plus ``settings`` (scorer, objective, termination policy, acceptance)
in machine form: exactly what :func:`optiflow.core.optimize.replay.replay` needs to re-apply the
scorer and the termination policy to the recorded aggregates.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from optiflow.core.base import JSONValue
from optiflow.core.evaluation import TrialSummary
from optiflow.core.optimize.configuration import config_params, config_sections
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.core.optimize.trial import TrialResult
from optiflow.core.sections import path_str

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")


def history_path(use_case: str, experiment: str, at: datetime) -> str:
    """``optimizations/<use case>/<experiment>_YYYYMMDD_HHMMSS.yaml`` (relative, safe names)."""
    uc = _UNSAFE.sub("-", use_case).strip("-.") or "use-case"
    ex = _UNSAFE.sub("-", experiment).strip("-.") or "optimize"
    return f"optimizations/{uc}/{ex}_{at.strftime('%Y%m%d_%H%M%S')}.yaml"


def statistics(s: TrialSummary) -> dict[str, JSONValue]:
    return {
        "sampleCount": s.total,
        "successRate": s.pass_rate,
        "successCount": s.passed,
        "failureCount": s.failed,
        "totalTokens": s.total_tokens,
        "totalCost": s.total_cost,
        "meanLatencyMs": s.avg_latency_ms,
        "meanTtftMs": s.avg_ttft_ms,
    }


def summary_of(stats: dict[str, Any]) -> TrialSummary:
    """The inverse of :func:`statistics` (replay reads recorded aggregates with it)."""
    return TrialSummary(
        total=int(stats["sampleCount"]),
        passed=int(stats["successCount"]),
        failed=int(stats["failureCount"]),
        pass_rate=float(stats["successRate"]),
        total_cost=float(stats["totalCost"]),
        avg_latency_ms=float(stats["meanLatencyMs"]),
        avg_ttft_ms=None if stats.get("meanTtftMs") is None else float(stats["meanTtftMs"]),
        total_tokens=int(stats["totalTokens"]),
    )


def _iso(at: datetime) -> str:
    return at.isoformat()


def factor_suit(history: OptimizationHistory, trial: TrialResult | None) -> dict[str, JSONValue]:
    """Fixed model factors + the trial's treatment values (seed 003's ``factorSuit``)."""
    suit: dict[str, JSONValue] = {
        k: v for k, v in history.fixed_factors.items() if k not in ("sections", "prompt", "baseline_tag")
    }
    if trial is not None:
        suit.update(config_params(trial.configuration))
        suit.update({path_str(p): body for p, body in config_sections(trial.configuration).items()})
    return suit


def _candidate(history: OptimizationHistory, t: TrialResult) -> dict[str, JSONValue]:
    out: dict[str, JSONValue] = {
        "candidateId": t.candidate_id,
        "maskId": t.mask_id,
        "parents": list(t.parent_candidate_ids),
        "rationale": t.rationale,
        "configHash": t.config_hash,
        "status": t.status,
        "error": t.error,
        "score": t.acceptance_score,
        "statistics": statistics(t.acceptance_summary),
    }
    if t.validation_summary is not None:
        out["trainScore"] = t.objective_score
        out["trainStatistics"] = statistics(t.summary)
    out["sampleScores"] = dict(t.sample_values)
    out["accepted"] = t.accepted
    out["pValue"] = t.p_value
    if t.selection is not None:
        out["selection"] = t.selection.model_dump(mode="json")
    return out


def history_document(history: OptimizationHistory) -> dict[str, JSONValue]:
    h = history
    last = len(h.iterations) - 1
    iterations: list[JSONValue] = []
    for i, it in enumerate(h.iterations):
        best = h.trial(it.best_candidate_id) if it.best_candidate_id else None
        iterations.append(
            {
                "iterationNumber": it.number,
                "status": it.status.upper(),
                "candidateId": it.best_candidate_id,
                "factorSuit": factor_suit(h, best),
                "statistics": statistics(best.acceptance_summary) if best else None,
                "score": it.score,
                "newBest": it.new_best,
                "bestSoFar": it.best_so_far,
                "bestCandidateId": it.best_candidate_so_far,
                "tokens": it.tokens,
                "cost": it.cost,
                "startTime": _iso(it.started_at),
                "endTime": _iso(it.ended_at),
                "decision": "stop" if i == last else "continue",
                "candidates": [_candidate(h, t) for cid in it.candidate_ids if (t := h.trial(cid))],
            }
        )
    best_it = h.best_iteration
    best_trial = h.trial(h.best_candidate_id)
    doc: dict[str, JSONValue] = {
        "useCaseId": h.use_case,
        "experimentId": h.experiment,
        "jobId": h.job_id,
        "prompt": f"{h.prompt_ns}/{h.prompt_key}",
        "treatmentFactorName": h.treatment.name,
        "treatmentFactorType": h.treatment.type,
        "fixedFactors": h.fixed_factors,
        "objective": h.objective.label,
        "scorerDescription": h.scorer_description,
        "mutatorDescription": h.optimizer_description,
        "terminationPolicyDescription": h.termination_policy.description(),
        "acceptanceDescription": h.acceptance.description(h.acceptance_rule),
        "acceptanceRule": h.acceptance_rule,
        "acceptanceRuleReason": h.acceptance_rule_reason,
        "acceptanceRuleSwitchedAt": h.acceptance_rule_switched_at,
        "settings": {
            "scorer": h.scorer.model_dump(mode="json"),
            "objective": h.objective.value,
            "termination": h.termination_policy.model_dump(mode="json"),
            "acceptance": h.acceptance.model_dump(mode="json"),
            "treatment": h.treatment.model_dump(mode="json"),
            "splits": h.splits,
            "maxCandidatesPerStep": h.max_candidates_per_step,
            "evalRuns": h.eval_runs,
        },
        "startTime": _iso(h.started_at),
        "endTime": _iso(h.ended_at),
        "totalDurationMs": round(h.total_duration_ms, 3),
        "iterations": iterations,
        "rejections": [
            {
                "iterationNumber": r.iteration,
                "stepIndex": r.step_index,
                "proposedIndex": r.proposed_index,
                "reasonCode": r.reason_code,
                "message": r.message,
                "configHash": r.config_hash,
                "duplicateOf": r.duplicate_of,
                "parents": list(r.parent_candidate_ids),
                "rationale": r.rationale,
            }
            for r in h.rejections
        ],
        "bestIteration": {
            "iterationNumber": best_it.number,
            "candidateId": h.best_candidate_id,
            "factorValues": factor_suit(h, best_trial),
            "statistics": statistics(best_trial.acceptance_summary) if best_trial else None,
            "score": h.best_score,
        },
        "terminationReason": {
            "cause": h.termination_reason.cause.name,
            "message": h.termination_reason.message,
            "optimizerReason": h.termination_reason.optimizer_reason.value
            if h.termination_reason.optimizer_reason
            else None,
        },
        "scoreImprovement": h.score_improvement,
        "scoreImprovementPercent": round(h.score_improvement_percent, 4),
        "totalIterations": h.total_iterations,
    }
    if h.test is not None:
        doc["test"] = {
            "sampleCount": len(h.test.sample_ids),
            "baseline": {
                "candidateId": h.test.baseline.candidate_id,
                "score": h.test.baseline.score,
                "statistics": statistics(h.test.baseline.summary),
            },
            "best": {
                "candidateId": h.test.best.candidate_id,
                "score": h.test.best.score,
                "statistics": statistics(h.test.best.summary),
            },
            "confirmed": h.test.confirmed,
            "confirmation": h.test.confirmation.model_dump(mode="json") if h.test.confirmation else None,
        }
    doc["improved"] = h.improved
    doc["gain"] = h.gain_line()
    graph = h.lineage()
    doc["lineage"] = {
        "nodes": [n.model_dump(mode="json") for n in graph.nodes],
        "edges": [e.model_dump(mode="json") for e in graph.edges],
    }
    doc["stats"] = h.stats.model_dump(mode="json")
    if h.budget is not None:
        doc["budget"] = h.budget.model_dump(mode="json")
    return doc


__all__ = ["factor_suit", "history_document", "history_path", "statistics", "summary_of"]
