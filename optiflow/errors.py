"""Errors raised by optiflow.

Every error derives from :class:`OptiflowError` and carries a stable ``code`` that scripts and
HTTP clients can match on. The tree is shallow on purpose: catch ``OptiflowError`` for "anything
optiflow refused", or one of the direct subclasses for a family.
"""

from __future__ import annotations

import re


class OptiflowError(Exception):
    """Root of every optiflow error. ``code`` is stable; ``field`` names the offending input."""

    code: str = "optiflow_error"

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        if self.field:
            return f"{self.field}: {self.message}"
        return self.message


class ConfigError(OptiflowError):
    """A setting or environment variable is missing or wrong."""

    code = "config_error"


class ValidationError(OptiflowError):
    """User input (spec, prompt file, dataset, CLI argument, HTTP body) is invalid."""

    code = "validation_error"


class NotFoundError(OptiflowError):
    """A prompt, tag, version or job does not exist."""

    code = "not_found"


class StoreError(OptiflowError):
    """A store backend failed (connection, conflict that retries could not resolve)."""

    code = "store_error"


class StaleOverrideError(StoreError):
    """An override was made against a section body that has since changed."""

    code = "stale_override"


class PromptChangedError(StaleOverrideError):
    """The stored prompt is not the one a write was made against (sections added, removed,
    changed, re-flagged frozen, retitled or reordered, or the user message changed, since the job
    read it): nothing was written. ``added`` / ``removed`` / ``changed`` / ``frozen`` /
    ``retitled`` name the sections by path (``rules/tone``)."""

    code = "prompt_changed"

    def __init__(
        self,
        message: str,
        *,
        field: str | None = "prompt",
        added: tuple[str, ...] = (),
        removed: tuple[str, ...] = (),
        changed: tuple[str, ...] = (),
        frozen: tuple[str, ...] = (),
        retitled: tuple[str, ...] = (),
        reordered: bool = False,
        user: bool = False,
    ) -> None:
        super().__init__(message, field=field)
        self.added, self.removed, self.changed, self.frozen = added, removed, changed, frozen
        self.retitled, self.reordered, self.user = retitled, reordered, user


class ModelProviderError(OptiflowError):
    """A model call failed permanently (after retries for transient errors)."""

    code = "model_provider_error"


class JobError(OptiflowError):
    """A job failed, was cancelled, or did not finish in time."""

    code = "job_error"


class ConflictError(JobError):
    """The job is not in a state that allows this (resume a finished job, a live one without force)."""

    code = "job_conflict"


class BudgetExhaustedError(JobError):
    """The job's budget (``max_cost_usd`` / ``max_tokens``) is spent: a model call was not made."""

    code = "budget_exhausted"


__all__ = [
    "BudgetExhaustedError",
    "ConfigError",
    "ConflictError",
    "JobError",
    "ModelProviderError",
    "NotFoundError",
    "OptiflowError",
    "PromptChangedError",
    "StaleOverrideError",
    "StoreError",
    "ValidationError",
]


# a traceback's frame lines are indented with spaces: "\n\s+File" rescanned every run of blank
# lines from each of its newlines (quadratic, issue 27)
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|\n[ \t]+File \"")
# an absolute path of two or more parts (not the path of a URL: no word, ':', '/' or '.' before it)
_PATH = re.compile(r"(?<![\w:/.~-])(?:[A-Za-z]:)?[\\/](?:[\w.@+~-]+[\\/])+(?P<name>[\w.@+~-]*)")
MAX_PUBLIC_MESSAGE = 1000


def public_message(text: str) -> str:
    """An error text fit for a job's result, an event or an API answer: no traceback (what
    follows ``Traceback (most recent call last)`` is cut), no server path (an absolute path keeps
    only its last part), one line, at most :data:`MAX_PUBLIC_MESSAGE` characters. The full error
    goes to the log."""
    cut = _TRACEBACK.search(text)
    if cut is not None:
        text = text[: cut.start()]
    text = _PATH.sub(lambda m: m.group("name") or "<path>", text)
    text = " ".join(text.split()).rstrip(" :")
    if len(text) > MAX_PUBLIC_MESSAGE:
        text = text[: MAX_PUBLIC_MESSAGE - 3] + "..."
    return text or "internal error"
