"""``optiflow measure FILE``: run a measure job and compare it with its drift reference;
``--set-reference`` makes it the reference instead."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("job_file", type=click.Path(path_type=Path))
@click.option(
    "--set-reference",
    is_flag=True,
    help="record this measure as the drift reference of its prompt, tag, model, dataset and check",
)
@click.option(
    "--runs",
    type=click.IntRange(1, 100),
    default=None,
    help="runs per sample (default: the file's; with --set-reference 12)",
)
@click.option(
    "--fail-below",
    type=float,
    default=None,
    help="exit 3 when the pass rate's Wilson lower bound is under RATE (0..1)",
)
@click.option("--timeout", type=float, default=None, help="seconds to wait at most")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
@click.option(
    "--history-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path(),
    show_default=True,
    help="where measurements/<prompt>_<tag>/<reference>.yaml (the drift history) goes",
)
def measure(
    job_file: Path,
    set_reference: bool,
    runs: int | None,
    fail_below: float | None,
    timeout: float | None,
    as_json: bool,
    history_dir: Path,
) -> None:
    """Measure JOB_FILE (a measure job) and wait for it: the pass rate with its interval, and the
    comparison with the drift reference (the tag as it was last accepted).

    \b
    Exit codes:
      0  ok: no drop shown since the reference (or this measure became the reference)
      1  the job failed or was cancelled
      2  refused input: nothing submitted
      3  the pass rate's lower bound is under --fail-below
      4  a drop since the reference is shown (it stays shown until a new reference is set)
      5  Redis was lost while waiting (the job may still run: optiflow watch ID)"""
    from optiflow.interfaces.cli.jobs import run_submit

    run_submit(
        job_file,
        wait_=True,
        apply_=False,
        timeout=timeout,
        as_json=as_json,
        fail_below=fail_below,
        history_dir=history_dir,
        set_reference=set_reference,
        runs=runs,
        measure_only=True,
    )


COMMANDS = [measure]
