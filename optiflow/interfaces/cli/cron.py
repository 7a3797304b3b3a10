"""``optiflow cron``: one scheduled run of a job file, fit for cron's bare environment.

cron starts a command with almost no environment (``PATH=/usr/bin:/bin``, ``HOME``, ``SHELL``)
and mails whatever it prints. This command loads the settings from an env file, takes a lock so
that two runs of one job never overlap on this host, appends everything the run prints to a log
file, and leaves one line on stderr (so in cron's mail) only when the run did not succeed.

Exit codes (also in ``optiflow cron --help`` and the README):

- 0: the job completed (and, with ``--apply``, its accepted changes were applied, or there were
  none); a measure job is at or above ``--fail-below``
- 1: the job failed, was cancelled, or did not finish within ``--timeout``; nothing was applied
- 2: refused input: the env file, a setting, the job file or an option; nothing was submitted
- 3: a measure job's pass-rate lower bound (Wilson) is under ``--fail-below``
- 4: a measure job shows a drop since its drift reference (the tag as last accepted)
- 5: Redis was lost while waiting; the job may still run
- 75: another run of this job still holds the lock (EX_TEMPFAIL); this one did not start

A measure job's end line names its drift finding: ``no drift shown (drop < X% with 95%
confidence)``, ``drift: -Y% [..]``, or that it became the reference.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, NoReturn

import click

from optiflow.errors import OptiflowError, ValidationError

OK, FAILED, REFUSED, UNDER_FLOOR, DRIFTED, LOST, LOCKED = 0, 1, 2, 3, 4, 5, 75
MEANING = {
    OK: "ok",
    FAILED: "the job failed",
    REFUSED: "refused input",
    UNDER_FLOOR: "under the --fail-below floor",
    DRIFTED: "a drop since the reference is shown",
    LOST: "lost Redis while waiting",
    LOCKED: "another run holds the lock",
}


def load_env_file(path: Path) -> dict[str, str]:
    """``KEY=value`` lines (``export`` and comments allowed, as in deploy/optiflow.env.example)
    into this process's environment; they win over what is already set."""
    from dotenv import dotenv_values

    if not path.is_file():
        raise ValidationError(f"no such file: {path}", field="--env-file")
    from dotenv.parser import parse_stream

    try:
        text = path.read_text(encoding="utf-8")
        values = dotenv_values(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError(f"cannot read {path}: {exc}", field="--env-file") from None
    for binding in parse_stream(io.StringIO(text)):  # a garbage file would run on the defaults
        if binding.error or (binding.key is not None and values.get(binding.key) is None):
            line = binding.original.string.strip()[:60]
            raise ValidationError(
                f"{path}: line {binding.original.line}: not KEY=value: {line!r}", field="--env-file"
            )
    found = {k: v for k, v in values.items() if v is not None}
    if not found:
        raise ValidationError(f"{path}: no KEY=value line", field="--env-file")
    os.environ.update(found)
    return found


def job_name(job_file: Path) -> str:
    """The job's ``name`` (as ``optiflow submit`` names it) made safe for a file name; the file's
    stem when the file cannot be read (the run itself then reports why)."""
    from optiflow.files import read_yaml

    name = job_file.stem if job_file.stem != "job" else job_file.parent.name
    with contextlib.suppress(OptiflowError):
        data = read_yaml(job_file)
        if isinstance(data, dict) and isinstance(data.get("name"), str) and data["name"].strip():
            name = data["name"]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "job"


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Lock:
    """An exclusive ``flock`` on a file, held until the process ends or :meth:`release`. The
    same lock ``flock -n FILE`` takes, so an operator can check it from a shell."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return True

    def holder(self) -> str:
        """The pid the holder wrote, for the log line ('?' when unreadable)."""
        try:
            return self.path.read_text().strip() or "?"
        except OSError:
            return "?"

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None


@contextlib.contextmanager
def _output_to(log: IO[str] | None) -> Iterator[None]:
    """stdout and stderr (file descriptors 1 and 2, so every writer, Celery's logging included)
    into ``log`` for the block; nothing changes when ``log`` is None (``--log-file -``)."""
    if log is None:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def _state_path(option: Path | None, default: Path, field: str) -> Path:
    path = option or default
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValidationError(f"cannot create {path.parent}: {exc.strerror}", field=field) from None
    return path


def _refuse(message: str) -> NoReturn:
    click.echo(f"optiflow cron: {message}", err=True)
    sys.exit(REFUSED)


@click.command()
@click.argument("job_file", type=click.Path(path_type=Path))
@click.option(
    "--env-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="KEY=value settings to load first (see deploy/optiflow.env.example)",
)
@click.option(
    "--fail-below", type=float, default=None, help="measure jobs: exit 3 under RATE (Wilson lower bound)"
)
@click.option("--apply", "apply_", is_flag=True, help="apply the accepted changes once the job completed")
@click.option("--timeout", type=float, default=None, help="seconds to wait (default OPTIFLOW_JOB_TIMEOUT_S)")
@click.option(
    "--lock-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="default: $OPTIFLOW_HOME/cron/<job name>.lock",
)
@click.option(
    "--log-file",
    type=click.Path(path_type=Path, dir_okay=False, allow_dash=True),
    default=None,
    help="appended to; '-' for stdout (containers); default: $OPTIFLOW_HOME/cron/<job name>.log",
)
def cron(
    job_file: Path,
    env_file: Path | None,
    fail_below: float | None,
    apply_: bool,
    timeout: float | None,
    lock_file: Path | None,
    log_file: Path | None,
) -> None:
    """One scheduled run of JOB_FILE: load --env-file, take the job's lock, submit, wait, log.

    Meant for a crontab line with the absolute path of the virtualenv's optiflow. Everything the
    run prints is appended to the log file, between timestamped start and end lines; stderr gets
    one line only when the exit code is not 0.

    \b
    Exit codes:
      0   ok (the job completed; --apply applied what it accepted; at or above --fail-below)
      1   the job failed, was cancelled or did not finish within --timeout (nothing applied)
      2   refused input (env file, settings, job file, options): nothing submitted
      3   a measure job's pass-rate lower bound is under --fail-below
      4   a measure job shows a drop since its drift reference
      5   Redis was lost while waiting (the job may still run)
      75  another run of this job still holds the lock: this one did not start
    """
    import pydantic

    from optiflow.interfaces.cli.jobs import run_submit
    from optiflow.settings import Settings

    try:
        if env_file is not None:
            load_env_file(env_file)
        settings = Settings()
        name = job_name(job_file)
        state = settings.home.resolve() / "cron"
        lock_path = _state_path(lock_file, state / f"{name}.lock", "--lock-file")
        log_path = None
        if str(log_file) != "-":
            log_path = _state_path(log_file, state / f"{name}.log", "--log-file")
    except OptiflowError as exc:
        _refuse(f"error[{exc.code}]: {exc}")
    except pydantic.ValidationError as exc:  # a bad OPTIFLOW_* value
        err = exc.errors()[0]
        where = "OPTIFLOW_" + str(err["loc"][0]).upper() if err["loc"] else "settings"
        _refuse(f"error[config_error]: {where}: {err['msg']}")

    try:
        log = None if log_path is None else log_path.open("a", buffering=1, encoding="utf-8")
    except OSError as exc:
        _refuse(f"error[validation_error]: --log-file: cannot open {log_path}: {exc.strerror}")
    out = log if log is not None else sys.stdout

    def line(text: str) -> None:
        out.write(f"{_stamp()} optiflow cron {name}: {text}\n")
        out.flush()

    lock = _Lock(lock_path)
    if not lock.acquire():
        line(f"another run (pid {lock.holder()}) holds {lock_path}: not started (exit {LOCKED})")
        _done(LOCKED, name, log_path)

    line(f"start (pid {os.getpid()}): {job_file}" + (f", settings from {env_file}" if env_file else ""))
    submitted: list[str] = []
    drift: list[str] = []
    code = OK
    with _output_to(log):
        try:
            run_submit(
                job_file,
                wait_=True,
                apply_=apply_,
                timeout=timeout if timeout is not None else settings.job_timeout_s,
                as_json=False,
                fail_below=fail_below,
                history_dir=Path(),
                on_submitted=submitted.append,
                on_result=lambda result: drift.extend(drift_line(result)),
            )
        except OptiflowError as exc:
            click.echo(f"error[{exc.code}]: {exc}", err=True)
            code = FAILED if submitted else REFUSED
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else FAILED
        except Exception as exc:  # a broker or database down mid-wait: the run failed, say why
            click.echo(f"error: {type(exc).__name__}: {exc}", err=True)
            code = FAILED
    job = f"job {submitted[0]}: " if submitted else ""
    found = f"; {drift[0]}" if drift else ""
    line(f"{job}exit {code} ({MEANING.get(code, 'unexpected')}){found}")
    lock.release()
    _done(code, name, log_path, found if code == DRIFTED else "")


def drift_line(result: object) -> list[str]:
    """A measure's drift headline (``no drift shown (drop < X% ...)``, ``drift: -Y% [..]``)."""
    from optiflow.core.drift.output import headline
    from optiflow.core.measure.report import MeasureDocument

    report = getattr(result, "report", None)
    if isinstance(report, MeasureDocument) and report.drift is not None:
        return [headline(report.drift)]
    return []


def _done(code: int, name: str, log_path: Path | None, detail: str = "") -> NoReturn:
    if code != OK and log_path is not None:  # cron mails stderr: one line, and where the rest is
        meaning = MEANING.get(code, "unexpected")
        click.echo(f"optiflow cron {name}: exit {code} ({meaning}){detail}; log: {log_path}", err=True)
    sys.exit(code)


COMMANDS = [cron]
