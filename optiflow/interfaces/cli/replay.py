"""``optiflow replay FILE``: re-decide a recorded optimize run and list every decision that differs."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from optiflow.errors import ValidationError
from optiflow.interfaces.cli._common import echo

T = TypeVar("T")


@click.command()
@click.argument("history_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--scorer", default=None, help="a scorer name or JSON spec (default: the recorded one)")
@click.option("--objective", type=click.Choice(["maximize", "minimize"]), default=None)
@click.option("--termination", default=None, help="termination policies as JSON (default: the recorded ones)")
@click.option("--acceptance", default=None, help="acceptance rule as JSON (default: the recorded one)")
def replay(
    history_file: Path,
    scorer: str | None,
    objective: str | None,
    termination: str | None,
    acceptance: str | None,
) -> None:
    """Re-apply the scorer and termination policy to HISTORY_FILE's recorded aggregates.

    Lists every decision (score, new best, stop) that differs; exit 1 when any does."""
    import pydantic

    from optiflow.core.optimize.acceptance import AcceptanceSpec
    from optiflow.core.optimize.replay import replay as replay_document
    from optiflow.core.optimize.scoring import parse_scorer
    from optiflow.core.optimize.termination import parse_termination
    from optiflow.files import pydantic_error, read_yaml

    chosen_scorer = _parsed(scorer, "--scorer", parse_scorer)
    chosen_termination = _parsed(termination, "--termination", parse_termination)
    chosen_acceptance = _parsed(acceptance, "--acceptance", AcceptanceSpec.model_validate)
    document = read_yaml(history_file)
    if not isinstance(document, dict):
        raise ValidationError("expected an optimization history document", field=str(history_file))
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
