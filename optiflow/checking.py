"""Running checks so that no output, no pattern and no check function can hang a process.

:mod:`optiflow.core.checks` holds the check specs and the pure judging logic; what needs a
third-party engine or a time bound lives here, and :mod:`optiflow.evaluator` injects it:

- ``regex`` checks run on RE2 (``google-re2``; ``bench/regex_engines.md`` has the measurement):
  time linear in the output whatever the pattern, and the GIL released while it matches.
  Patterns are compiled once per process. A pattern RE2 does not support (lookaround,
  backreferences, ...) is refused at submission by :func:`compile_pattern`, naming the field.
- A check reads at most :data:`MAX_CHECK_CHARS` characters of output; a longer output is an
  error of its evaluation. The pure checks (exact, contains, regex, json_field, numeric) are
  linear in what they read, so the cap bounds their time (``bench/regex_engines.md``, last table).
- ``python`` checks (only functions in the worker's allowlist, ``OPTIFLOW_PYTHON_CHECKS``) run in
  a small pool of separate processes (pebble); one still running after ``timeout_s`` is killed and
  its evaluation fails with :class:`CheckTimeout`, so a looping check costs one process for
  ``timeout_s``, never a stuck worker thread.
- ``llm_judge`` is a model call, bounded by its model's ``timeout`` and ``retries``.
"""

from __future__ import annotations

import atexit
import importlib
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import TimeoutError as FutureTimeout
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from optiflow.core.checks import PythonResolver
from optiflow.errors import OptiflowError, ValidationError

if TYPE_CHECKING:
    from pebble import ProcessPool

MAX_CHECK_CHARS = 1_000_000
"""The most characters of one output a check reads; a longer output fails its evaluation."""
DEFAULT_CHECK_TIMEOUT_S = 10.0
PYTHON_CHECK_PROCESSES = max(1, min(4, os.cpu_count() or 1))
MAX_PATTERN_CHARS = 10_000


class CheckTimeout(OptiflowError):
    """A check ran longer than its time bound (or found no free process within it)."""

    code = "check_timeout"


# -- regex on RE2 ---------------------------------------------------------------------------------
@lru_cache(maxsize=1024)
def compile_pattern(pattern: str, field: str = "check.pattern") -> Any:
    """The compiled RE2 pattern; ValidationError naming ``field`` when RE2 cannot run it."""
    import re2

    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValidationError(f"regex longer than {MAX_PATTERN_CHARS} characters", field=field)
    options = re2.Options()
    options.log_errors = False  # the refusal below says it once, to the user
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValidationError(
            f"unsupported regex {pattern!r}: {reason} (patterns run on RE2, linear time: no "
            "lookaround, backreferences or possessive quantifiers)",
            field=field,
        ) from None


def regex_search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` (RE2 syntax) occurs in ``text``: the engine of ``regex`` checks."""
    return compile_pattern(pattern).search(text) is not None


# -- python checks in separate processes -----------------------------------------------------------
def canonical(path: str) -> str:
    return path.strip().replace(":", ".")


def python_resolver(
    allowlist: Iterable[str], *, timeout_s: float = DEFAULT_CHECK_TIMEOUT_S
) -> PythonResolver:
    """Resolves ``package.module:callable`` (or dotted) paths, only those in ``allowlist``, to a
    callable that runs the function in a check process, killed after ``timeout_s``."""
    allowed = frozenset(canonical(a) for a in allowlist if a.strip())

    def resolve(path: str) -> Callable[..., Any]:
        if canonical(path) not in allowed:
            raise ValidationError(
                f"python check function {path!r} is not in the allowlist (OPTIFLOW_PYTHON_CHECKS)",
                field="check.function",
            )
        import_callable(path)  # refuse an unimportable one here, before any model call

        def bounded(output: str, expected: Any) -> Any:
            return run_python_check(path, output, expected, timeout_s=timeout_s)

        return bounded

    return resolve


def import_callable(path: str) -> Callable[..., Any]:
    text = path.strip()
    candidates: list[tuple[str, list[str]]]
    if ":" in text:
        head, _, tail = text.partition(":")
        candidates = [(head, tail.split("."))]
    else:
        parts = text.split(".")
        candidates = [(".".join(parts[:i]), parts[i:]) for i in range(len(parts) - 1, 0, -1)]
    for module_name, attrs in candidates:
        try:
            obj: Any = importlib.import_module(module_name)
        except ImportError:
            continue
        try:
            for attr in attrs:
                obj = getattr(obj, attr)
        except AttributeError:
            break
        if callable(obj):
            return obj  # type: ignore[no-any-return]
        break
    raise ValidationError(f"python check function {path!r} cannot be imported", field="check.function")


def _call_in_child(path: str, output: str, expected: Any) -> Any:
    """Runs in a check process."""
    return import_callable(path)(output, expected)


_pool: ProcessPool | None = None
_pool_lock = threading.Lock()


def _check_pool() -> ProcessPool:
    """The process's pool of check processes, started on first use. Forkserver: its processes
    are forked from a clean single-threaded server, never from a worker full of threads."""
    global _pool
    from pebble import ProcessPool

    with _pool_lock:
        if _pool is None or not _pool.active:
            methods = multiprocessing.get_all_start_methods()
            context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
            if "forkserver" in methods:
                context.set_forkserver_preload(["optiflow.core.checks"])
            _pool = ProcessPool(max_workers=PYTHON_CHECK_PROCESSES, context=context)
            atexit.register(stop_check_processes)
        return _pool


def stop_check_processes() -> None:
    """Stop the check processes of this process (at exit; tests)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.stop()  # type: ignore[no-untyped-call]
        pool.join(timeout=5)


def run_python_check(path: str, output: str, expected: Any, *, timeout_s: float) -> Any:
    """``path(output, expected)`` in a check process: its return value, CheckTimeout when it runs
    longer than ``timeout_s`` (the process is killed) or waits too long for a process. A check
    that kills its own process raises pebble's ProcessExpired (a crash of the check)."""
    future = _check_pool().schedule(_call_in_child, args=(path, output, expected), timeout=timeout_s)
    try:
        # pebble's timeout counts from the start of the call; the wait for a free process is
        # bounded here too, so a burst of slow checks cannot queue callers without limit.
        return future.result(timeout=2 * timeout_s + 5)
    except FutureTimeout:
        future.cancel()  # type: ignore[no-untyped-call]
        raise CheckTimeout(f"python check {path} ran longer than {timeout_s:g}s", field="check") from None


__all__ = [
    "DEFAULT_CHECK_TIMEOUT_S",
    "MAX_CHECK_CHARS",
    "CheckTimeout",
    "compile_pattern",
    "import_callable",
    "python_resolver",
    "regex_search",
    "run_python_check",
    "stop_check_processes",
]
