"""``optiflow replay FILE|JOB_ID``: re-decide a recorded optimize run and list every decision that
differs. The run is a history file (``submit`` writes one under ``optimizations/``), or a finished
optimize job in the jobs database: its stored report is the same history. A measure's drift
history (``measurements/...yaml``, or a measure job's id) replays its nights the same way
(:mod:`optiflow.core.drift.replay`)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from optiflow.errors import ValidationError
from optiflow.interfaces.cli._common import echo

T = TypeVar("T")
_JOB_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


@click.command()
@click.argument("source", metavar="FILE|JOB_ID")
@click.option("--scorer", default=None, help="a scorer name or JSON spec (default: the recorded one)")
@click.option("--objective", type=click.Choice(["maximize", "minimize"]), default=None)
@click.option("--termination", default=None, help="termination policies as JSON (default: the recorded ones)")
@click.option("--acceptance", default=None, help="acceptance rule as JSON (default: the recorded one)")
def replay(
    source: str,
    scorer: str | None,
    objective: str | None,
    termination: str | None,
    acceptance: str | None,
) -> None:
    """Re-apply the scorer and termination policy to a recorded optimize run's aggregates: a
    history file, or the id of a finished optimize job in the jobs database.

    Lists every decision (score, new best, stop) that differs; exit 1 when any does."""
    import pydantic

    from optiflow.core.optimize.acceptance import AcceptanceSpec
    from optiflow.core.optimize.replay import replay as replay_document
    from optiflow.core.optimize.scoring import parse_scorer
    from optiflow.core.optimize.termination import parse_termination
    from optiflow.files import pydantic_error

    chosen_scorer = _parsed(scorer, "--scorer", parse_scorer)
    chosen_termination = _parsed(termination, "--termination", parse_termination)
    chosen_acceptance = _parsed(acceptance, "--acceptance", AcceptanceSpec.model_validate)
    history_file = source  # what errors name: the file, or the job
    document = _from_file(Path(source)) if Path(source).is_file() else _from_job(source)
    from optiflow.core.drift.replay import is_history

    if is_history(document):  # a measure's drift history: every night decided again
        _replay_drift(document, history_file)
        return
    try:
        report = replay_document(
            document,
            scorer=chosen_scorer,
            objective=objective,
            termination=chosen_termination,
            acceptance=chosen_acceptance,
        )
    except pydantic.ValidationError as exc:  # the recorded settings themselves do not parse
        raise pydantic_error(exc, str(history_file)) from None
    except (ValueError, TypeError, KeyError) as exc:
        raise ValidationError(
            f"not a replayable optimization history: {exc}", field=str(history_file)
        ) from None
    echo(f"{history_file}: {len(report.decisions)} decisions replayed, {len(report.differences)} differ")
    for decision in report.differences:
        echo(f"  {decision.describe()}")
    if not report.ok:
        sys.exit(1)


def _from_file(path: Path) -> dict[str, Any]:
    from optiflow.files import read_yaml

    document = read_yaml(path)
    if not isinstance(document, dict):
        raise ValidationError("expected an optimization history document", field=str(path))
    if document.get("kind") == "drift":
        return document
    if "settings" not in document and "rounds" in document:  # `optiflow history ID` prints rounds
        raise ValidationError(
            "this is the rounds view `optiflow history` prints, not a replayable history: "
            f"replay the job itself (optiflow replay {document.get('job_id') or 'JOB_ID'}) or the "
            "history file `optiflow submit` wrote under optimizations/",
            field=str(path),
        )
    return document


def _from_job(job_id: str) -> dict[str, Any]:
    """A finished optimize job's report from the jobs database, as its history document."""
    from optiflow.core.optimize.document import history_document
    from optiflow.core.optimize.report import OptimizationHistory
    from optiflow.interfaces.cli.db import repository_for

    if not _JOB_ID.match(job_id) or Path(job_id).suffix in (".yaml", ".yml", ".json"):
        raise ValidationError("no such file, and not a job id", field=job_id[:80])
    jobs = repository_for(job_id)
    rec = jobs.get(job_id)
    if rec.kind == "measure":
        return _drift_of_job(job_id, rec, jobs.engine)
    if rec.kind != "optimize":
        raise ValidationError(
            f"job {job_id} is a {rec.kind} job: only an optimize job's decisions replay", field="job"
        )
    report = (rec.result or {}).get("report")
    if not isinstance(report, dict):
        raise ValidationError(
            f"job {job_id} is {rec.status} and has no report to replay"
            + (f" ({rec.error})" if rec.error else ""),
            field="job",
        )
    return history_document(OptimizationHistory.model_validate(report))


def _parsed(value: str | None, field: str, parse: Callable[[Any], T]) -> T | None:
    """An option's JSON (or name) parsed now, so a bad one is refused naming the option (exit 2),
    never mistaken for "decisions differ" (exit 1)."""
    import pydantic

    from optiflow.files import pydantic_error

    data = _json_or_name(value, field)
    if data is None:
        return None
    try:
        return parse(data)
    except pydantic.ValidationError as exc:
        raise pydantic_error(exc, field) from None
    except (ValueError, TypeError) as exc:
        raise ValidationError(str(exc), field=field) from None


def _json_or_name(value: str | None, field: str) -> Any:
    if value is None:
        return None
    if value.lstrip()[:1] in ("{", "["):
        try:
            parsed: Any = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"not valid JSON: {exc}", field=field) from None
        return parsed
    return value


def _drift_of_job(job_id: str, rec: Any, engine: Any) -> dict[str, Any]:
    """A measure job's drift history from the jobs database: its reference and the nights up to
    its own (a measure that became the reference: the reference alone)."""
    from optiflow.core.drift.replay import history_document
    from optiflow.persistence.references import DriftRepository

    drift = DriftRepository(engine)
    found = drift.of_job(job_id)
    if found is None:
        raise ValidationError(
            f"job {job_id} is a measure job with no drift record ({rec.status}): nothing to replay",
            field="job",
        )
    reference, night = found
    upto = 0 if night is None else night.night
    return history_document(reference, [n for n in drift.nights(reference.id) if n.night <= upto])


def _replay_drift(document: dict[str, Any], source: str) -> None:
    import pydantic

    from optiflow.core.drift.replay import replay as replay_drift
    from optiflow.files import pydantic_error

    try:
        report = replay_drift(document)
    except pydantic.ValidationError as exc:
        raise pydantic_error(exc, source) from None
    except (ValueError, TypeError, KeyError) as exc:
        raise ValidationError(f"not a replayable drift history: {exc}", field=source) from None
    shown = [d for d in report.decisions if d.shown == "drop"]
    first = f"; a drop first shown on night {shown[0].night}" if shown else "; no drop shown"
    echo(
        f"{source}: {report.prompt}, reference {report.reference_id[:12]}: {report.nights} night(s) "
        f"replayed{first}, {len(report.differences)} differ"
    )
    for difference in report.differences:
        echo(f"  {difference.describe()}")
    if not report.ok:
        sys.exit(1)
