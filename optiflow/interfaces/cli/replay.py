"""``optiflow replay FILE``: re-decide a recorded optimize run and list every decision that differs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from optiflow.errors import ValidationError
from optiflow.interfaces.cli._common import echo


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
    from optiflow.core.optimize.replay import replay as replay_document
    from optiflow.files import read_yaml

    document = read_yaml(history_file)
    if not isinstance(document, dict):
        raise ValidationError("expected an optimization history document", field=str(history_file))
    report = replay_document(
        document,
        scorer=_json_or_name(scorer, "--scorer"),
        objective=objective,
        termination=_json_or_name(termination, "--termination"),
        acceptance=_json_or_name(acceptance, "--acceptance"),
    )
    echo(f"{history_file}: {len(report.decisions)} decisions replayed, {len(report.differences)} differ")
    for decision in report.differences:
        echo(f"  {decision.describe()}")
    if not report.ok:
        sys.exit(1)


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
