"""``optiflow watch`` and ``submit --wait``: a job's events as progress lines, a live bar, a summary.

Events come from the job's events table (each once, in order, by ``seq``), so a watcher that
starts late, or reconnects, sees the whole story. The bar reads the running step's live counter
(evaluations done / total, from the eval workers) between events.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal, TextIO

from optiflow.core.history import (
    BEST_CANDIDATE_CHANGED,
    PROGRESS_CHANGED,
    RUN_FINISHED,
    RUN_STATUS_CHANGED,
    TRIAL_ADDED_OR_UPDATED,
    Event,
)
from optiflow.core.result import OptimizeResult
from optiflow.errors import JobError

if TYPE_CHECKING:
    from optiflow.interfaces.client import JobHandle

Verbosity = Literal["minimal", "summary", "full"]
BAR_WIDTH = 28


def follow(job: JobHandle, *, poll_s: float = 0.25, timeout: float | None = None) -> Iterator[Event]:
    """The job's events, each once and in order, until ``run_finished``."""
    for event in _stream(job, poll_s=poll_s, timeout=timeout):
        if event is not None:
            yield event


def _stream(job: JobHandle, *, poll_s: float, timeout: float | None) -> Iterator[Event | None]:
    """Events as they are committed; None after each poll that found none (a tick)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    seen = 0
    while True:
        batch = job.client.runtime.jobs.events(job.id, after_seq=seen)
        for event in batch:
            seen = event.seq
            yield event
            if event.type == RUN_FINISHED:
                return
        if deadline is not None and time.monotonic() > deadline:
            raise JobError(f"job {job.id} did not finish within {timeout}s", field="timeout")
        if not batch:
            yield None
            time.sleep(poll_s)


def line(kind: str, name: str, event: Event) -> str | None:
    """One progress line per event (seed 003's ``OPTIMIZE [use case] ...`` style)."""
    p = event.payload
    head = f"{kind.upper()} [{name}]"
    if isinstance(p.get("line"), str):  # a line the workflow wrote (seed 003's iteration lines)
        return str(p["line"])
    if kind == "optimize" and event.type in (
        TRIAL_ADDED_OR_UPDATED,
        PROGRESS_CHANGED,
        BEST_CANDIDATE_CHANGED,
    ):
        return None  # an optimize job speaks in iterations
    if event.type == RUN_STATUS_CHANGED:
        error = f": {p['error']}" if p.get("error") else ""
        return f"{head} {str(p['status']).capitalize()}{error}"
    if event.type == TRIAL_ADDED_OR_UPDATED:
        score = p.get("objective_score")
        shown = "-" if not isinstance(score, int | float) else f"{score:.2f}"
        name = p.get("name") or p["candidate_id"]
        return f"{head} Step {p['step_index']}: {name} score={shown} ({p['status']})"
    if event.type == BEST_CANDIDATE_CHANGED:
        return f"{head} ↑ NEW BEST {p['candidate_id']} score={p.get('score')}"
    if event.type == PROGRESS_CHANGED:
        return (
            f"{head} {p['evaluations_done']}/{p['evaluations_total']} evaluations; trials "
            f"{p['completed']} completed, {p['failed']} failed, {p['rejected']} rejected, "
            f"{p['running']} running"
        )
    return None


class Bar:
    """A one-line bar redrawn in place on a terminal: done/total, rate, ETA."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.started = time.monotonic()
        self.shown = False

    def draw(self, done: int, total: int, best: str) -> None:
        elapsed = max(time.monotonic() - self.started, 1e-6)
        rate = done / elapsed
        eta = (total - done) / rate if rate > 0 and total >= done else None
        filled = int(BAR_WIDTH * done / total) if total else 0
        text = (
            f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total} evaluations  {rate:.0f}/s"
            f"  ETA {'?' if eta is None else f'{eta:.0f}s'}{f'  best {best}' if best else ''}"
        )
        self.out.write(f"\r{text}\x1b[K")
        self.out.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            self.out.write("\r\x1b[K")
            self.out.flush()
            self.shown = False


def watch(
    job: JobHandle,
    *,
    out: TextIO | None = None,
    verbosity: Verbosity = "summary",
    timeout: float | None = None,
    live: bool | None = None,
    show_summary: bool = True,
) -> OptimizeResult:
    """Print the job's progress until it ends; return its result. ``live`` (default: ``out`` is
    a terminal) adds the in-place bar; ``show_summary`` closes with :func:`summary`."""
    out = out or sys.stderr
    live = out.isatty() if live is None else live
    rec = job.record()
    bar = Bar(out) if live else None
    done_before, total, best = 0, 0, ""
    for event in _stream(job, poll_s=0.25, timeout=timeout):
        if event is None:  # a tick between events: redraw the bar from the live counter
            live_progress = job.client.runtime.scratch.progress(job.id)
            done = done_before + (live_progress.done if live_progress else 0)
            if bar is not None:
                bar.draw(min(done, total) if total else done, total, best)
            continue
        if event.type == PROGRESS_CHANGED:
            done_before = int(event.payload.get("evaluations_done") or 0)
            total = int(event.payload.get("evaluations_total") or 0)
        if event.type == BEST_CANDIDATE_CHANGED:
            best = f"{event.payload.get('candidate_id')} ({event.payload.get('score')})"
        if event.type == RUN_STATUS_CHANGED and verbosity != "minimal":
            ended = _termination_line(job, rec.name)  # seed 003 names the reason before the end
            if ended:
                out.write(ended + "\n")
        text = line(rec.kind, rec.name, event)
        if bar is not None:
            bar.clear()
        if text is not None and verbosity != "minimal":
            out.write(text + "\n")
    if bar is not None:
        bar.clear()
    result = job.result()
    if result is None:  # run_finished is committed with the result; this cannot happen
        raise JobError(f"job {job.id} ended without a result", field="job")
    if show_summary:
        out.write(summary(result, verbosity) + "\n")
    out.flush()
    return result


def _termination_line(job: JobHandle, name: str) -> str | None:
    from optiflow.core.optimize.output import termination_line
    from optiflow.core.optimize.report import OptimizationHistory

    result = job.result()
    if result is None or not isinstance(result.report, OptimizationHistory):
        return None
    return termination_line(name, result.report.termination_reason)


def summary(result: OptimizeResult, verbosity: Verbosity = "summary") -> str:
    """The closing box: ``minimal`` one line, ``summary`` the report, ``full`` plus its stats
    (an optimize job: seed 003's summary box at that verbosity)."""
    from optiflow.core.compress import OptimizationReport
    from optiflow.interfaces.console import format_result

    report = result.report
    if report is None:
        return f"job {result.job_id}: {result.status}" + (f" ({result.error})" if result.error else "")
    if not isinstance(report, OptimizationReport):
        return format_result(result, verbosity=verbosity)
    if verbosity == "minimal":
        return (
            f"job {result.job_id}: {result.status}; accepted {len(report.modifications)}, "
            f"rejected {len(report.rejected)}, -{report.total_token_reduction} tokens"
        )
    body = format_result(result).splitlines()
    if verbosity != "full":
        body = [b for b in body if not b.lstrip().startswith("evaluations ")]
    width = max(len(b) for b in body) + 2
    top, bottom = "╔" + "═" * width + "╗", "╚" + "═" * width + "╝"
    return "\n".join([top, *(f"║ {b.ljust(width - 1)}║" for b in body), bottom])
