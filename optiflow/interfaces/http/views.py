"""What the page reads beyond a job's row, built from the stored records (plain functions).

- :func:`prompt_view`: the job's prompt as its baseline renders it (each section's body, whether
  it is frozen, its tokens for the job's model): the "original" side of every section diff.
- :func:`trials_view`: the job's trials (what each changed against the baseline, its score and
  summary, parents, rationale) and its rejections with their reason codes.
- :func:`steps_view`: the step timeline (baseline, candidates, combined, greedy-N; an optimize
  job's proposal and evaluation steps), the finished steps from their trials, the running one
  from the pending action.
- :func:`measure_point`: one measure job's figures for the history chart of a prompt and tag
  (:func:`drift_view`: its comparison with the drift reference).

Token counts use the counter the workflows use (tiktoken for the job's model), so a section's
bar matches the report's ``token_reduction``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from optiflow.core.actions import ACTION
from optiflow.core.kinds import AnySpec, parse_spec
from optiflow.core.outcome import outcome_of
from optiflow.core.records import PROGRESS_CHANGED, TRIAL_ADDED_OR_UPDATED, Event, Rejection, Trial
from optiflow.core.sections import path_str
from optiflow.core.step import Step

if TYPE_CHECKING:
    from optiflow.persistence.jobs import JobRecord

Counter = Callable[[str], int]
SETTINGS = (
    "min_section_tokens",
    "eval_runs",
    "fail_fast",
    "gate",
    "runs",
    "fail_below",
    "objective",
    "max_candidates_per_step",
    "splits",
)
"""The job settings the page shows (never the model's params: an operator's may hold a key)."""
MAX_BODY_CHARS = 200_000
"""A section body longer than this is cut in the views (the page diffs what it is given)."""


def token_counter(spec: AnySpec) -> Counter:
    from optiflow.llm.tokens import count_tokens

    model = spec.model.model

    def count(text: str) -> int:
        return count_tokens(text, model)

    return count


def _body(text: str) -> str:
    return text if len(text) <= MAX_BODY_CHARS else text[:MAX_BODY_CHARS]


def baseline_bodies(spec: AnySpec) -> dict[str, str]:
    """Each section's body as the job's baseline renders it, keyed by ``path_str``."""
    overrides = {o.path: o.body for o in spec.baseline_overrides}
    return {path_str(s.path): overrides.get(s.path, s.body) for s in spec.prompt.sections}


def base_tag(spec: AnySpec) -> str:
    tag = getattr(spec, "baseline_tag", None) or getattr(spec, "tag", None)
    return str(tag) if tag else ""


def prompt_view(rec: JobRecord, count: Counter | None = None) -> dict[str, Any]:
    spec = parse_spec(rec.spec)
    count = count or token_counter(spec)
    overridden = {path_str(o.path) for o in spec.baseline_overrides}
    bodies = baseline_bodies(spec)
    sections = []
    for s in spec.prompt.sections:
        path = path_str(s.path)
        body = bodies[path]
        sections.append(
            {
                "path": path,
                "body": _body(body),
                "frozen": s.frozen,
                "tokens": count(body),
                "overridden": path in overridden,
            }
        )
    return {
        "job_id": rec.id,
        "kind": rec.kind,
        "ns": spec.prompt.ns,
        "key": spec.prompt.key,
        "tag": base_tag(spec),
        "model": spec.model.model,
        "settings": {k: v for k, v in rec.spec.items() if k in SETTINGS},
        "sections": sections,
    }


def _section_key(key: str, known: Mapping[str, str]) -> str:
    """A configuration's section key as ``path_str``: compress trials join a path with ``.``,
    optimize configurations with ``/``."""
    if key in known:
        return key
    slashed = key.replace(".", "/")
    return slashed if slashed in known else key


def changes(
    configuration: Mapping[str, Any] | None, baseline: Mapping[str, str], count: Counter
) -> list[dict[str, Any]]:
    """The sections a configuration renders differently from the baseline, with token counts."""
    sections = (configuration or {}).get("sections") or {}
    out = []
    for raw, body in sections.items() if isinstance(sections, Mapping) else ():
        path = _section_key(str(raw), baseline)
        text = str(body)
        original = baseline.get(path)
        if original == text:
            continue
        out.append(
            {
                "path": path,
                "body": _body(text),
                "tokens": count(text),
                "original_tokens": count(original) if original is not None else None,
            }
        )
    return out


def short_id(job_id: str, candidate_id: str) -> str:
    return candidate_id.removeprefix(f"{job_id}-")


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def trial_view(job_id: str, trial: Trial, baseline: Mapping[str, str], count: Counter) -> dict[str, Any]:
    extra = dict(trial.extra)
    config = trial.configuration or {}
    return {
        "candidate_id": short_id(job_id, trial.candidate_id),
        "name": str(extra.get("name") or short_id(job_id, trial.candidate_id)),
        "step_index": trial.step_index,
        "status": trial.status,
        "score": trial.objective_score,
        "summary": trial.summary.model_dump(mode="json") if trial.summary else None,
        "parents": list(trial.parent_candidate_ids),
        "rationale": trial.rationale,
        "error": trial.error,
        "changes": changes(config, baseline, count),
        "model_params": dict(config.get("model_params") or {}) if isinstance(config, Mapping) else {},
        "extra": extra,
        "created_at": _time(trial.created_at),
        "updated_at": _time(trial.updated_at),
    }


def rejection_view(r: Rejection) -> dict[str, Any]:
    return {
        "step_index": r.step_index,
        "iteration": r.iteration,
        "reason_code": r.reason_code,
        "message": r.message,
        "parents": list(r.parent_candidate_ids),
        "rationale": r.rationale,
        "duplicate_of": r.duplicate_of,
        "config_hash": r.config_hash,
    }


def pending_step(rec: JobRecord) -> Step | None:
    """The step a running job is carrying out (its stored pending action), if any."""
    if rec.finished or not rec.action:
        return None
    try:
        action = ACTION.validate_python(rec.action)
    except ValueError:  # an action stored by another version: the timeline shows less, no error
        return None
    return action if isinstance(action, Step) else None


def trials_view(
    rec: JobRecord, trials: Sequence[Trial], rejections: Sequence[Rejection], count: Counter | None = None
) -> dict[str, Any]:
    """The job's trials and rejections; ``running``: the candidates of the step being evaluated
    (what each changes), so the page can show them before their scores exist."""
    spec = parse_spec(rec.spec)
    count = count or token_counter(spec)
    baseline = baseline_bodies(spec)
    step = pending_step(rec)
    running = []
    if step is not None:
        for target in step.targets:
            config = {"sections": {path_str(o.path): o.body for o in target.overrides}}
            running.append(
                {
                    "candidate_id": short_id(rec.id, target.experiment.id),
                    "name": target.experiment.name,
                    "step_index": step.index,
                    "status": "running",
                    "evaluations": target.size,
                    "changes": changes(config, baseline, count),
                }
            )
    return {
        "job_id": rec.id,
        "trials": [trial_view(rec.id, t, baseline, count) for t in trials],
        "rejections": [rejection_view(r) for r in rejections],
        "running": running,
    }


def step_name(names: Iterable[str]) -> str:
    """A finished step's name from its trials' names: one trial's own name (``baseline``,
    ``combined``, ``greedy-2``), or the shared stem of several (``candidate-tone``,
    ``candidate-billing`` -> ``candidates``). The baseline's runs extended in a later round of a
    gate do not name the step."""
    distinct = sorted(set(names))
    if len(distinct) > 1:
        distinct = [n for n in distinct if n != "baseline"]
    if not distinct:
        return "step"
    if len(distinct) == 1:
        return "candidates" if distinct[0].startswith("candidate-") else distinct[0]
    stems = {n.split("-", 1)[0] for n in distinct}
    if stems == {"greedy"}:  # greedy sets chained in one step: named as the CLI names them
        ordered = sorted(distinct, key=lambda n: (len(n), n))
        return ", ".join(ordered) if len(ordered) <= 3 else f"{ordered[0]} … {ordered[-1]}"
    return "candidates"


def step_label(name: str) -> str:
    """A step's name in the CLI's words: a gate's later round as ``candidates round 2``,
    ``greedy-2 round 3`` (the workflow names them ``candidates-2``, ``greedy-2-3``)."""
    parts = name.split("-")
    if parts[0] == "greedy" and len(parts) == 3 and parts[2].isdigit():
        return f"greedy-{parts[1]} round {parts[2]}"
    if parts[0] in ("ablation", "candidates", "combined") and len(parts) == 2 and parts[1].isdigit():
        return f"{parts[0]} round {parts[1]}"
    return name


def _progress_steps(events: Sequence[Event]) -> dict[int, Event]:
    """``progress_changed`` events by the number of steps done when each was recorded (its key
    is ``progress:<steps done>``)."""
    out: dict[int, Event] = {}
    for e in events:
        if e.type == PROGRESS_CHANGED and e.key.startswith("progress:"):
            try:
                out[int(e.key.split(":", 1)[1])] = e
            except ValueError:
                continue
    return out


def _done(event: Event | None) -> int | None:
    value = event.payload.get("evaluations_done") if event is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def steps_view(rec: JobRecord, events: Sequence[Event]) -> list[dict[str, Any]]:
    """The timeline, from the job's events: step ``k`` ran between the progress events recorded
    after ``k`` and ``k + 1`` steps, made the evaluations between their counts, and is named by
    the trials it reported (``candidates``, ``candidates round 2`` for a gate's second round,
    ``combined``, ``greedy-1``; an optimize job's ``baseline``, ``proposals``, ``candidates``,
    ``test split``). The running step comes from the pending action."""
    progress = _progress_steps(events)
    names: dict[int, list[str]] = defaultdict(list)
    rounds: dict[int, int] = defaultdict(int)
    ids: dict[int, list[str]] = defaultdict(list)
    for e in events:
        if e.type != TRIAL_ADDED_OR_UPDATED or not isinstance(e.payload.get("step_index"), int):
            continue
        index = int(str(e.payload["step_index"]))
        names[index].append(str(e.payload.get("name") or e.payload.get("candidate_id")))
        ids[index].append(short_id(rec.id, str(e.payload.get("candidate_id"))))
        r = e.payload.get("round")
        if isinstance(r, int) and str(e.payload.get("name")) != "baseline":
            rounds[index] = max(rounds[index], r)
    steps: list[dict[str, Any]] = []
    for k in sorted(n for n in progress if n + 1 in progress):
        start, end = progress[k], progress[k + 1]
        before, after = _done(start), _done(end)
        seconds = (
            (end.created_at - start.created_at).total_seconds()
            if end.created_at is not None and start.created_at is not None
            else None
        )
        steps.append(
            {
                "index": k,
                "name": _name(rec.kind, k, names.get(k, []), ids.get(k, []), rounds.get(k, 0)),
                "state": "done",
                "candidates": len(set(names.get(k, [])) - {"baseline"}) or len(set(names.get(k, []))),
                "evaluations": (after - before) if after is not None and before is not None else 0,
                "started_at": _time(start.created_at),
                "ended_at": _time(end.created_at),
                "seconds": round(seconds, 3) if seconds is not None and seconds >= 0 else None,
            }
        )
    step = pending_step(rec)
    if step is not None and all(s["index"] != step.index for s in steps):
        begun = progress.get(step.index)
        steps.append(
            {
                "index": step.index,
                "name": step_label(step.name),
                "state": "running",
                "candidates": len({t.experiment.id for t in step.targets}),
                "evaluations": sum(t.size for t in step.targets),
                "proposals": len(step.propose) + len(step.rewrites),
                "started_at": _time(begun.created_at if begun is not None else None),
                "ended_at": None,
                "seconds": None,
            }
        )
    return steps


def _name(kind: str, index: int, names: list[str], ids: list[str], round_: int) -> str:
    if kind == "optimize":
        if not names:
            return "proposals"
        if index == 0:
            return "baseline"
        if all(i.startswith("test-") for i in ids):
            return "test split"
        return "candidates"
    if not names:
        return "proposals"
    base = step_name(names)
    return f"{base} round {round_}" if round_ > 1 else base


def measure_point(rec: JobRecord) -> dict[str, Any] | None:
    """One finished measure job's point on the history chart (None without a report)."""
    report = (rec.result or {}).get("report")
    if (
        not isinstance(report, Mapping)
        or report.get("kind", "measure") != "measure"
        or "wilson" not in report
    ):
        return None
    wilson = report.get("wilson") or {}
    latency = report.get("latency_ms") or {}
    return {
        "job_id": rec.id,
        "name": rec.name,
        "status": rec.status,
        "measured_at": report.get("measured_at") or _time(rec.updated_at),
        "pass_rate": report.get("pass_rate"),
        "lower": wilson.get("lower") if isinstance(wilson, Mapping) else None,
        "upper": wilson.get("upper") if isinstance(wilson, Mapping) else None,
        "evaluations": report.get("evaluations"),
        "errors": report.get("errors"),
        "latency_p50": latency.get("p50") if isinstance(latency, Mapping) else None,
        "latency_p95": latency.get("p95") if isinstance(latency, Mapping) else None,
        "model": report.get("model"),
        "mean_tokens": report.get("mean_tokens"),
        "prompt_hash": _prompt_hash(rec),
        "drift": drift_view(report.get("drift")),
    }


def drift_view(drift: Any) -> dict[str, Any] | None:
    """A measure's drift finding for the page: whether it is the reference or a night compared
    with one, tonight's change against the reference with its interval, and whether (since which
    night) a drop is shown."""
    from optiflow.core.drift.output import detail, headline
    from optiflow.core.drift.report import DriftReport

    if not isinstance(drift, Mapping):
        return None
    try:
        report = DriftReport.model_validate(drift)
    except ValueError:  # stored by another version: no mark rather than an error
        return None
    change, e, ref = report.change, report.evidence, report.reference
    return {
        "status": report.status,
        "reference_id": ref.id if ref else None,
        "reference_job": ref.job_id if ref else None,
        "reference_pass_rate": ref.pass_rate if ref else None,
        "night": report.night,
        "estimate": change.estimate if change else None,
        "low": change.low if change else None,
        "high": change.high if change else None,
        "shown": e.shown if e else None,
        "first_shown": e.first_shown if e else None,
        "drop_shown": report.drop_shown,
        "log_evidence": e.log_drop if e else None,
        "log_needed": e.threshold if e else None,
        "flips": [f.line() for f in e.flips] if e else [],
        "headline": headline(report),
        "detail": detail(report),
    }


def _prompt_hash(rec: JobRecord) -> str | None:
    """A short hash of the prompt the job measured (its sections as its tag rendered them): two
    points of a history with different hashes measured different prompts (an apply between)."""
    import hashlib

    try:
        bodies = baseline_bodies(parse_spec(rec.spec))
    except ValueError:  # a spec stored by another version: no mark rather than an error
        return None
    text = "\x00".join(f"{path}\x01{body}" for path, body in bodies.items())
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def outcome(rec: JobRecord) -> dict[str, Any] | None:
    """What a finished job found, in a few words (:func:`optiflow.core.outcome.outcome_of`); the
    jobs list reads it from the job's ``outcome`` column, written when the job ended."""
    return outcome_of(rec.result)


def measure_matches(rec: JobRecord, ns: str, key: str, tag: str) -> bool:
    report = (rec.result or {}).get("report")
    if not isinstance(report, Mapping):
        return False
    return (report.get("prompt_ns"), report.get("prompt_key"), report.get("tag")) == (ns, key, tag)


__all__ = [
    "baseline_bodies",
    "changes",
    "drift_view",
    "measure_matches",
    "measure_point",
    "outcome",
    "pending_step",
    "prompt_view",
    "step_label",
    "step_name",
    "steps_view",
    "trial_view",
    "trials_view",
]
