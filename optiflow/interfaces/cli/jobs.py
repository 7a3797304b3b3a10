"""Job commands: submit, status, watch, report, apply, cancel, resume, jobs, worker, demo."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, cast

import click

from optiflow.errors import ConflictError, JobError, NotFoundError, ValidationError
from optiflow.interfaces.cli._common import echo, settings

if TYPE_CHECKING:
    from optiflow.core.kinds import AnyReport
    from optiflow.core.overrides import Applied
    from optiflow.core.result import OptimizeResult
    from optiflow.interfaces.client import Client, JobHandle

EXAMPLE = Path("examples") / "support-bot" / "job.yaml"
CHECKOUT = Path(__file__).resolve().parents[3]  # an editable install's checkout


def example_job() -> Path:
    """The shipped example: in the working directory, else in the checkout optiflow runs from."""
    return EXAMPLE if EXAMPLE.exists() else CHECKOUT / EXAMPLE


def _client() -> Client:
    from optiflow.interfaces.client import Client

    return Client(settings())


def _job_client(job_id: str) -> Client:
    """A client for a command about an existing job. Without a database there is no job, and
    asking about one must not create the local state directory and database as a side effect."""
    from optiflow.interfaces.client import Client

    s = settings()
    default_db = Path(s.effective_database_url.removeprefix("sqlite:///"))
    if not s.database_url and not default_db.exists():
        raise NotFoundError(f"no job {job_id!r}", field="job")
    return Client(s)


LOST = 5  # exit code: the connection to Redis was lost while waiting; the job may still run (4: drift)
MAX_WORKER_CONCURRENCY = 512


def _finish(
    client: Client,
    result: OptimizeResult,
    *,
    apply: bool,
    as_json: bool,
    elapsed: float | None,
    history_dir: Path | None = Path(),
    cost: bool = False,
) -> None:
    """Print the result (``cost``: and what the job cost, in one line); a job's history file
    (an optimize job's YAML) goes under ``history_dir``. Exit 1 when the job did not complete,
    and the report's own code when it says so (3: a measure job fell under its ``fail_below``)."""
    from optiflow.core import kinds
    from optiflow.interfaces.console import cost_line, format_result

    echo(result.model_dump_json(indent=2) if as_json else format_result(result, elapsed_s=elapsed))
    report = result.report
    if cost and report is not None and not as_json:
        echo(f"  {cost_line(report.stats)}")
    if report is not None and history_dir is not None:
        written = write_history(report, history_dir) or write_drift_history(client, report, history_dir)
        if written is not None:
            click.echo(f"history: {written}", err=True)
    if apply and result.ok:
        echo(applied_line(client.apply(result), kinds.unconfirmed(report)))
        for line in reference_lines(client):
            echo(line)
    if not result.ok:
        sys.exit(1)
    verdict = kinds.verdict(report)
    if verdict is not None:
        code, message = verdict
        click.echo(message, err=True)
        sys.exit(code)


def applied_line(applied: Applied | None, unconfirmed: str | None = None) -> str:
    """What an apply did, in one line (and how to undo a tag's first apply)."""
    if applied is None and unconfirmed is not None:
        return f"nothing applied: {unconfirmed} (`optiflow apply --force` writes it anyway)"
    if applied is None:
        return "nothing to apply: the job accepted no change"
    v = applied.version
    if applied.unchanged:
        if v is None:
            return "unchanged: nothing to write"
        return f"unchanged: {v.ns}/{v.key} {v.tag} {v.version} already holds these changes; nothing written"
    assert v is not None
    line = f"applied: {v.ns}/{v.key} {v.tag} {v.version}"
    if applied.original is not None:
        tag = "" if v.tag == "stable" else f" --tag {v.tag}"
        line += (
            f" (the prompt before it is {applied.original.version}: "
            f"optiflow prompt rollback {v.ns}/{v.key} {applied.original.version}{tag} undoes it)"
        )
    return line


def write_history(report: AnyReport, root: Path) -> Path | None:
    """The history file a finished job leaves, if its kind keeps one (an optimize job: seed
    003's ``optimizations/<use case>/<experiment>_<timestamp>.yaml``)."""
    import yaml

    from optiflow.core import kinds

    made = kinds.history_file(report)
    if made is None:
        return None
    relative, document = made
    path = root / relative
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True))
    except OSError as exc:
        raise ValidationError(
            f"cannot write the job's history file {path}: {exc.strerror or exc}", field="--history-dir"
        ) from None
    return path


def write_drift_history(client: Client, report: AnyReport, root: Path) -> Path | None:
    """A measure's drift history file: its reference and every night compared with it so far
    (``measurements/<ns>_<key>_<tag>/<reference>.yaml``; what ``optiflow replay`` re-decides)."""
    from optiflow.core.drift.replay import history_path
    from optiflow.core.measure.report import MeasureDocument

    if not isinstance(report, MeasureDocument) or report.drift is None or report.drift.reference is None:
        return None
    import yaml

    from optiflow.distributed import drift

    document = drift.history(client.runtime, report.drift.reference.id, upto=report.drift.night or 0)
    path = root / history_path(drift.repository(client.runtime).reference(report.drift.reference.id))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True))
    except OSError as exc:
        raise ValidationError(
            f"cannot write the measure's history file {path}: {exc.strerror or exc}", field="--history-dir"
        ) from None
    return path


def reference_lines(client: Client) -> list[str]:
    """What the reference measures an apply queued did (or are doing)."""
    from optiflow.core.measure.spec import MeasureSpec

    out = []
    for job in client.reference_jobs:
        rec = job.record()
        spec = client.runtime.spec(job.id)
        runs = spec.runs if isinstance(spec, MeasureSpec) else 0
        what = f"{spec.prompt.ns}/{spec.prompt.key}@{kinds_tag(spec)}, {runs} run(s)"
        result = job.result()
        if result is None:
            out.append(f"reference: measuring {what} in job {job.id} ({rec.status})")
        elif not result.ok:
            out.append(f"reference: job {job.id} ({what}) {result.status}: {result.error}")
        else:
            from optiflow.core.measure.report import MeasureDocument

            doc = result.report
            rate = f"pass rate {doc.pass_rate:.1%}" if isinstance(doc, MeasureDocument) else "measured"
            out.append(f"reference: {what}: {rate} (job {job.id}); the nightly drift check compares with it")
    return out


def kinds_tag(spec: object) -> str:
    return str(getattr(spec, "tag", "") or getattr(spec, "baseline_tag", ""))


def check_history_dir(root: Path) -> None:
    """Refuse a ``--history-dir`` that cannot be written, before the job runs (ValidationError)."""
    probe = root
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        raise ValidationError(f"{probe} is not a directory", field="--history-dir")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ValidationError(f"{probe} is not writable", field="--history-dir")


@click.command()
@click.argument("job_file", type=click.Path(path_type=Path))
@click.option("--wait", "wait_", is_flag=True, help="wait for the result and print it")
@click.option("--apply", "apply_", is_flag=True, help="with --wait: apply accepted changes to stable")
@click.option("--timeout", type=float, default=None, help="seconds to wait at most")
@click.option("--json", "as_json", is_flag=True, help="print the result (or the job id) as JSON")
@click.option(
    "--fail-below",
    type=float,
    default=None,
    help="measure jobs: exit 3 when the pass rate's Wilson lower bound is under RATE (0..1)",
)
@click.option(
    "--history-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path(),
    show_default=True,
    help="optimize jobs: where optimizations/<use case>/<experiment>_<timestamp>.yaml goes",
)
def submit(
    job_file: Path,
    wait_: bool,
    apply_: bool,
    timeout: float | None,
    as_json: bool,
    fail_below: float | None,
    history_dir: Path,
) -> None:
    """Submit JOB_FILE (YAML). Prints the job id; --wait prints the report.

    On the embedded default the job runs in this process, so the command always waits; a job
    still unfinished when the command ends (--timeout, Ctrl-C) is ended ``cancelled``.
    Exit codes: 0 done, 1 the job failed or was cancelled, 2 refused input, 3 a measure job fell
    under --fail-below, 4 a measure job shows a drop since its drift reference, 5 Redis was lost
    while waiting (the job may still run: optiflow watch ID)."""
    run_submit(
        job_file,
        wait_=wait_,
        apply_=apply_,
        timeout=timeout,
        as_json=as_json,
        fail_below=fail_below,
        history_dir=history_dir,
    )


def run_submit(
    job_file: Path,
    *,
    wait_: bool,
    apply_: bool,
    timeout: float | None,
    as_json: bool,
    fail_below: float | None,
    history_dir: Path,
    on_submitted: Callable[[str], None] | None = None,
    on_result: Callable[[OptimizeResult], None] | None = None,
    set_reference: bool = False,
    runs: int | None = None,
    measure_only: bool = False,
) -> None:
    """``optiflow submit``: OptiflowError for refused input, SystemExit(1, 3 or 4) as documented
    there. ``on_submitted(job_id)`` is called once the job is enqueued (an error after it is not
    the input's fault), ``on_result(result)`` once it has ended. ``set_reference`` (a measure job):
    it becomes the drift reference, measured ``runs`` times (default 12)."""
    if apply_ and not wait_:
        raise ValidationError("--apply needs --wait", field="--apply")
    if fail_below is not None and not 0 <= fail_below <= 1:
        raise ValidationError(f"must be a rate between 0 and 1, got {fail_below}", field="--fail-below")
    if timeout is not None and not timeout > 0:
        raise ValidationError(f"must be a positive number of seconds, got {timeout}", field="--timeout")
    if wait_:
        check_history_dir(history_dir)
    with _client() as client:
        if client.runtime.embedded:
            wait_ = True  # the embedded worker lives in this process: stay until the job is done
            check_history_dir(history_dir)
        started = time.monotonic()
        from optiflow.jobfile import load_job

        spec = load_job(job_file, store=client.runtime.store)
        if fail_below is not None:
            if spec.kind != "measure":
                raise ValidationError("only measure jobs have a pass-rate floor", field="--fail-below")
            spec = spec.model_copy(update={"fail_below": fail_below})
        if apply_ and spec.kind == "measure":
            raise ValidationError("a measure job changes nothing: nothing to apply", field="--apply")
        if measure_only and spec.kind != "measure":
            raise ValidationError(
                f"a {spec.kind} job: `optiflow measure` runs measure jobs (`optiflow submit`: the others)",
                field=str(job_file),
            )
        if set_reference or runs is not None:
            from optiflow.core.measure.spec import MeasureSpec

            if not isinstance(spec, MeasureSpec):
                raise ValidationError("only a measure job sets a reference", field="--set-reference")
            if not set_reference:
                spec = spec.model_copy(update={"runs": runs})
            job = client.set_reference(spec, runs=runs) if set_reference else client.submit(spec)
        else:
            job = client.submit(spec)
        if on_submitted is not None:
            on_submitted(job.id)
        # with --json, stdout holds nothing but the JSON document
        click.echo(f"submitted {job.id}", err=as_json)
        if not wait_:
            if as_json:
                echo(json.dumps({"job_id": job.id, "status": "queued"}))
            return
        with _lost_redis_ends_the_wait(job.id):
            result = _progress_then_result(job, timeout, quiet=as_json)
        if on_result is not None:
            on_result(result)
        _finish(
            client,
            result,
            apply=apply_,
            as_json=as_json,
            elapsed=time.monotonic() - started,
            history_dir=history_dir,
        )


@contextmanager
def _lost_redis_ends_the_wait(job_id: str) -> Iterator[None]:
    """Redis gone while waiting (the broker, the live counters): one line naming the job, so it
    can be followed later with ``optiflow watch``, and exit :data:`LOST` instead of a traceback."""
    from kombu.exceptions import OperationalError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeout

    try:
        yield
    except (RedisConnectionError, RedisTimeout, OperationalError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        click.echo(
            f"error[redis_unreachable]: lost Redis while waiting for job {job_id} ({reason}); "
            f"the job may still run: optiflow watch {job_id}",
            err=True,
        )
        sys.exit(LOST)


NO_WORKER_AFTER_S = 5.0
"""How long a job may sit queued before the CLI looks for a worker consuming the control queue."""


def no_worker_note(job: JobHandle) -> str | None:
    """A note when the job is still queued and no worker consumes the control queue (asked with
    Celery's remote control, one second at most), else None. Without it a distributed job with no
    worker sat at "Queued" silently until its 6 h timeout (issue 27)."""
    from optiflow.distributed.app import QUEUE_CONTROL

    client = job.client
    if client.runtime.embedded or job.status() != "queued":
        return None
    try:
        replies = client.app.control.inspect(timeout=1.0).active_queues() or {}
    except Exception:  # the broker went away: the wait reports that itself
        return None
    if any(q.get("name") == QUEUE_CONTROL for queues in replies.values() for q in queues or ()):
        return None
    where = redacted(client.settings.redis_url or client.settings.broker_url or "")
    return (
        f"note: job {job.id} is queued and no worker consumes the {QUEUE_CONTROL} queue at {where} "
        f"(keys under {client.settings.key_prefix}:); it waits until one does: start one with "
        "`optiflow worker --role control` (or --role all)"
    )


@contextmanager
def _worker_watch(job: JobHandle, after_s: float = NO_WORKER_AFTER_S) -> Iterator[None]:
    """Say once, after ``after_s`` seconds, that no worker consumes the job's queue, if so."""
    import threading

    def look() -> None:
        note = no_worker_note(job)
        if note is not None:
            click.echo(note, err=True)

    timer = threading.Timer(after_s, look)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _progress_then_result(job: JobHandle, timeout: float | None, *, quiet: bool) -> OptimizeResult:
    """Progress lines (and a live bar on a terminal) on stderr until the job ends."""
    with _worker_watch(job):
        if quiet:
            return job.wait(timeout)
        from optiflow.interfaces.watch import watch as watch_job

        watch_job(job, out=sys.stderr, timeout=timeout, show_summary=False)
    return job.wait(timeout=30)  # already ended: answered from the database


@click.command()
@click.argument("job_id")
@click.option(
    "--verbosity",
    type=click.Choice(["minimal", "summary", "full"]),
    default="summary",
    show_default=True,
    help="progress lines and the closing summary",
)
@click.option("--timeout", type=float, default=None, help="seconds to watch at most")
def watch(job_id: str, verbosity: str, timeout: float | None) -> None:
    """Follow a job: progress lines, a live bar on a terminal, then the summary box.

    Starting late is fine: every event of the job is shown once, in order."""
    from optiflow.core.base import Verbosity
    from optiflow.interfaces.watch import watch as watch_job

    if timeout is not None and not timeout > 0:
        raise ValidationError(f"must be a positive number of seconds, got {timeout}", field="--timeout")
    with _job_client(job_id) as client:
        job = client.job(job_id)
        if client.runtime.embedded and job.status() == "running":
            echo(f"note: job {job_id} runs in the embedded worker of the process that submitted it")
        level = cast("Verbosity", verbosity)  # click.Choice checked it
        with _lost_redis_ends_the_wait(job_id):
            result = watch_job(job, out=sys.stdout, verbosity=level, timeout=timeout)
        if not result.ok:
            sys.exit(1)


@click.command()
@click.argument("job_id")
def status(job_id: str) -> None:
    """Print a job's status."""
    with _job_client(job_id) as client:
        rec = client.job(job_id).record()
        echo(f"{rec.id} {rec.kind} {rec.name}: {rec.status} (step {rec.step_index})")
        if rec.error:
            echo(f"  error: {rec.error}")


@click.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True)
@click.option(
    "--history-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="optimize jobs: also write the YAML history file under this directory",
)
def report(job_id: str, as_json: bool, history_dir: Path | None) -> None:
    """Print a finished job's report."""
    if history_dir is not None:
        check_history_dir(history_dir)
    with _job_client(job_id) as client:
        job = client.job(job_id)
        result = job.result()
        if result is None:
            raise JobError(f"job {job_id} has not finished ({job.status()})", field="job")
        _finish(client, result, apply=False, as_json=as_json, elapsed=None, history_dir=history_dir)


@click.command()
@click.argument("job_id")
@click.option("--tag", default="stable", show_default=True)
@click.option(
    "--force", is_flag=True, help="apply an optimize job's best even if held-out data did not confirm it"
)
@click.option(
    "--reference-runs",
    type=click.IntRange(0, 100),
    default=None,
    help="runs of the drift reference measured after the write (default 12; 0: none)",
)
def apply(job_id: str, tag: str, force: bool, reference_runs: int | None) -> None:
    """Write a finished job's accepted modifications to TAG as a new version, then measure TAG as
    accepted: the reference the nightly drift check compares with (on the embedded default the
    command waits for that measure)."""
    from optiflow.core import kinds

    with _job_client(job_id) as client:
        if reference_runs is not None:
            client.reference_runs = reference_runs
        applied = client.apply(job_id, tag=tag, force=force)
        report = None if applied is not None else client.job(job_id).result()
        echo(applied_line(applied, kinds.unconfirmed(report.report if report else None)))
        for line in reference_lines(client):
            echo(line)


@click.command()
@click.argument("job_id")
def cancel(job_id: str) -> None:
    """Cancel a job: pending evaluations are skipped, temporary tags removed."""
    with _job_client(job_id) as client:
        job = client.job(job_id)
        status_ = job.status()
        if status_ in ("completed", "failed", "cancelled"):  # HTTP answers 409 job_conflict
            raise ConflictError(f"job {job_id} already {status_}: nothing to cancel", field="job")
        if job.runs_elsewhere(status_):
            from optiflow.interfaces.client import RUNS_ELSEWHERE

            raise JobError(f"job {job_id} {RUNS_ELSEWHERE}", field="job")
        job.cancel()
        if job.record().finished:
            echo(f"cancelled {job_id}")
        else:
            echo(f"cancel requested for {job_id}: pending evaluations are skipped, it ends at this step")


@click.command()
@click.argument("job_id")
@click.option("--force", is_flag=True, help="re-issue the pending step even if the job looks alive")
@click.option("--wait", "wait_", is_flag=True, help="wait for the result and print it")
@click.option("--timeout", type=float, default=None, help="seconds to wait at most")
def resume(job_id: str, force: bool, wait_: bool, timeout: float | None) -> None:
    """Resume a stalled job: launch its pending action again.

    Evaluations that already finished come from the eval cache; no sample is counted twice.
    Control workers do this by themselves for jobs stalled longer than OPTIFLOW_STALE_AFTER_S.
    On the embedded default the job continues in this process, so the command waits."""
    with _job_client(job_id) as client:
        job = client.job(job_id)
        started = time.monotonic()
        echo(f"{job_id}: {job.resume(force=force)}")
        if client.runtime.embedded or wait_:
            result = job.wait(timeout)
            _finish(client, result, apply=False, as_json=False, elapsed=time.monotonic() - started)


@click.command(name="jobs")
@click.option("--status", "status_", default=None)
def jobs_command(status_: str | None) -> None:
    """List recent jobs."""
    with _client() as client:
        for rec in client.runtime.jobs.summaries(status_):  # summary columns only
            echo(f"{rec.id}  {rec.status:<9} {rec.kind:<8} {rec.name}  {rec.created_at:%Y-%m-%d %H:%M:%S}")


@click.command()
@click.option("--role", type=click.Choice(["eval", "control", "all"]), default="all", show_default=True)
@click.option(
    "--concurrency",
    "-c",
    type=click.IntRange(1, MAX_WORKER_CONCURRENCY),
    default=None,
    help="eval: threads (default 32); control: processes (default 2)",
)
@click.option("--loglevel", default="INFO", show_default=True)
def worker(role: str, concurrency: int | None, loglevel: str) -> None:
    """Run a Celery worker for a role (needs OPTIFLOW_REDIS_URL)."""
    from optiflow.distributed.app import QUEUE_CONTROL, QUEUE_EVAL, create_app

    s = settings()
    if not s.distributed:
        raise ValidationError("set OPTIFLOW_REDIS_URL to run a worker process", field="OPTIFLOW_REDIS_URL")
    s.limits()  # bad OPTIFLOW_MODEL_LIMITS: one line naming the field, exit 2, before Celery starts
    app = create_app(s, embedded=False)  # an eval worker prints its limits at worker_init
    queues = {"eval": QUEUE_EVAL, "control": QUEUE_CONTROL, "all": f"{QUEUE_CONTROL},{QUEUE_EVAL}"}[role]
    argv = ["worker", "-Q", queues, f"--loglevel={loglevel}", "-n", f"{role}@%h"]
    if role == "control":
        argv += ["-P", "prefork", "-c", str(concurrency or 2)]
    else:
        argv += ["-P", "threads", "-c", str(concurrency or 32)]
    app.worker_main(argv)


DEMO_TAG = "demo"  # the demo's baseline tag: nothing writes it, so every demo starts from the same prompt


def redacted(url: str) -> str:
    """A service URL without its password, fit to print."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _demo_where(client: Client, ns: str, key: str) -> list[str]:
    s = client.settings
    store = {"filesystem": f"files under {s.home / 'store'}", "sql": "the jobs database"}.get(
        s.effective_store, f"Redis {redacted(s.redis_url or '')}, keys under {s.key_prefix}:"
    )
    if s.effective_store == "memory":
        store = "memory (gone when this command ends)"
    return [
        f"  baseline: {ns}/{key} as shipped (tag {DEMO_TAG!r}, which nothing writes: each demo starts"
        " from the same prompt, whatever was applied to stable)",
        f"  job: {redacted(s.effective_database_url)}",
        f"  temporary tags: {store} (removed when the job ends); stable: only `optiflow apply` writes it",
    ]


@click.command()
@click.option("--job", "job_file", type=click.Path(path_type=Path), default=None, help="default: the example")
@click.option("--json", "as_json", is_flag=True)
def demo(job_file: Path | None, as_json: bool) -> None:
    """Run the shipped example's compress job end to end and print the report.

    The job starts from the prompt as shipped (baseline tag ``demo``, which nothing writes), so
    the demo shows the same story after ``optiflow apply`` changed stable."""
    job_file = job_file or example_job()
    if not job_file.exists():
        raise ValidationError(
            "example job not found; run from an optiflow checkout or pass --job", field=str(job_file)
        )
    with _client() as client:
        embedded = client.runtime.embedded
        mode = "embedded worker" if embedded else f"workers via {redacted(client.settings.redis_url or '')}"
        echo(f"optiflow demo: {job_file} ({mode})")
        started = time.monotonic()
        from optiflow.jobfile import load_job

        base = "tag" if load_job(job_file).kind == "measure" else "baseline_tag"
        job = client.submit_file(job_file, **{base: DEMO_TAG})
        spec = client.runtime.spec(job.id)
        if not as_json:
            for line in _demo_where(client, spec.prompt.ns, spec.prompt.key):
                echo(line)
        echo(f"submitted {job.id}")
        result = _progress_then_result(job, client.settings.job_timeout_s, quiet=as_json)
        _finish(client, result, apply=False, as_json=as_json, elapsed=time.monotonic() - started, cost=True)
        if result.ok and not as_json:
            echo(f"\napply it with: optiflow apply {job.id}")


COMMANDS = [submit, status, watch, report, apply, cancel, resume, jobs_command, worker, demo]
