"""``optiflow watch`` and ``submit --wait``: a job's events as progress lines, a live bar, a summary.

Events come from the job's events table (each once, in order, by ``seq``), so a watcher that
starts late, or reconnects, sees the whole story. The bar reads the running step's live counter
(evaluations done / total, from the eval workers) between events.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, TextIO

from optiflow.core import kinds
from optiflow.core.base import Verbosity
from optiflow.core.records import (
    BEST_CANDIDATE_CHANGED,
    PROGRESS_CHANGED,
    RUN_FINISHED,
    RUN_STATUS_CHANGED,
    Event,
)
from optiflow.core.result import OptimizeResult
from optiflow.errors import JobError

if TYPE_CHECKING:
    from optiflow.interfaces.client import JobHandle

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
    """One progress line per event, as the job's kind tells it."""
    return kinds.event_line(kind, name, event)


class Bar:
    """A one-line bar redrawn in place on a terminal: done/total, rate, ETA. The rate counts the
    evaluations seen done since the bar started (a watcher that starts late does not credit the
    past to its first second), and shows only after a second."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.started = time.monotonic()
        self.first_done: int | None = None
        self.shown = False

    def draw(self, done: int, total: int, best: str) -> None:
        if self.first_done is None:
            self.first_done = done
        elapsed = time.monotonic() - self.started
        rate = (done - self.first_done) / elapsed if elapsed >= 1.0 else None
        eta = (total - done) / rate if rate and total >= done else None
        filled = int(BAR_WIDTH * done / total) if total else 0
        text = (
            f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total} evaluations"
            f"  {'?' if rate is None else f'{rate:.0f}'}/s"
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
    result = job.result()
    return None if result is None else kinds.closing_line(result.report, name)


def summary(result: OptimizeResult, verbosity: Verbosity = "summary") -> str:
    """The closing text: ``minimal`` one line, else the summary box of every kind (``summary``:
    the report and what it cost, ``full`` with its stats)."""
    from optiflow.interfaces.console import summary_box

    if result.report is None:
        return f"job {result.job_id}: {result.status}" + (f" ({result.error})" if result.error else "")
    return summary_box(result, verbosity)
