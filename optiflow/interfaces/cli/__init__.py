"""The ``optiflow`` command. Subcommands live in sibling modules; heavy imports (litellm, celery,
sqlalchemy) happen inside commands so ``optiflow --help`` starts fast."""

from __future__ import annotations

import atexit
import gc
import sys

import click

from optiflow.errors import OptiflowError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="optiflow")
def main() -> None:
    """optiflow: find prompt changes that cut tokens or raise success rate, without regressions."""


def _register() -> None:
    from optiflow.interfaces.cli import cron, db, evaluate, jobs, measure, prompt, replay, serve

    main.add_command(prompt.prompt)
    main.add_command(evaluate.eval_command)
    from optiflow.interfaces.cli.model import model as model_group

    main.add_command(model_group)
    for command in jobs.COMMANDS:
        main.add_command(command)
    for command in db.COMMANDS:
        main.add_command(command)
    main.add_command(replay.replay)
    for command in serve.COMMANDS:
        main.add_command(command)
    for command in cron.COMMANDS:
        main.add_command(command)
    for command in measure.COMMANDS:
        main.add_command(command)


def run(argv: list[str] | None = None) -> None:
    """Console-script entry point: one clear line per error, exit code 2 for refused input."""
    if argv is None:  # the command itself, not a caller in its own process (tests)
        exit_without_collecting()
    _register()
    try:
        main.main(args=argv, prog_name="optiflow", standalone_mode=False)
    except OptiflowError as exc:
        click.echo(f"error[{exc.code}]: {exc}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.UsageError as exc:  # a bad argument or option: one line too, no usage text
        click.echo(f"error[usage_error]: {_usage_line(exc)}", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)


def exit_without_collecting() -> None:
    """Let this process end without walking its whole object graph: the interpreter's last
    garbage collections at exit took 3 to 5 s once litellm was imported (its import leaves a
    large graph of types and schemas behind; 0.1 s frozen), on every command that made a model
    call. Registered first, so it runs after every other exit handler (litellm's flushes)."""
    atexit.register(gc.freeze)


def _usage_line(exc: click.UsageError) -> str:
    """``--concurrency: 100000 is not in the range 1<=x<=512.``: the option, then what is wrong."""
    param = getattr(exc, "param", None)
    if isinstance(exc, click.BadParameter) and param is not None:
        name = param.opts[0] if isinstance(param, click.Option) else param.human_readable_name
        message = "required" if isinstance(exc, click.MissingParameter) else exc.message
        return f"{name}: {message}"
    command = exc.ctx.command_path if exc.ctx is not None else "optiflow"
    return f"{command}: {exc.format_message()} (see {command} --help)"
