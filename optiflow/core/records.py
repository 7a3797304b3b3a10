"""What a job leaves behind, as records the repository stores and returns (seed 001).

- :class:`Trial`: one candidate's evaluation, keyed by ``candidate_id`` within its job, with its
  lineage (``parent_candidate_ids``), canonical ``config_hash``, ``status``, ``objective_score``
  and :class:`~optiflow.core.evaluation.TrialSummary`. Its per-(sample, run) items are
  :class:`~optiflow.core.evaluation.EvalResult` (``experiment_id`` is the candidate id).
- :class:`Rejection`: a proposal refused before evaluation, with a ``reason_code`` (the optimize
  job's candidate validation makes them; the repository stores them as they are).
- :class:`Event`: one thing that happened to a job, for a consumer to replay: a ``type``, a
  stable ``key`` (stored once per job: a repeat is dropped) and, once stored, a per-job ``seq``.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Literal

from pydantic import Field

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.evaluation import TrialSummary

TrialStatus = Literal["pending", "running", "completed", "failed", "cancelled", "timeout"]

RUN_STATUS_CHANGED = "run_status_changed"
PROGRESS_CHANGED = "progress_changed"
TRIAL_ADDED_OR_UPDATED = "trial_added_or_updated"
BEST_CANDIDATE_CHANGED = "best_candidate_changed"
RUN_FINISHED = "run_finished"
EVENT_TYPES = frozenset(
    {RUN_STATUS_CHANGED, PROGRESS_CHANGED, TRIAL_ADDED_OR_UPDATED, BEST_CANDIDATE_CHANGED, RUN_FINISHED}
)
"""The event types of issue 4; :class:`Event` accepts any snake_case type."""


class Trial(Frozen):
    """One candidate's evaluation within a job (the seed's trial / experiment)."""

    candidate_id: str = Field(min_length=1, max_length=200)
    step_index: int = Field(ge=0)
    status: TrialStatus = "running"
    overrides_tag: str | None = Field(default=None, max_length=200)
    parent_candidate_ids: tuple[str, ...] = ()
    config_hash: str | None = Field(default=None, max_length=64)
    configuration: dict[str, JSONValue] | None = None
    rationale: str | None = None
    objective_score: float | None = None
    summary: TrialSummary | None = None
    error: str | None = None
    extra: dict[str, JSONValue] = Field(default_factory=dict)
    """Algorithm-specific facts (iteration, validation score, acceptance, p-value...)."""
    created_at: datetime | None = None  # stamped by the repository
    updated_at: datetime | None = None


class Rejection(Frozen):
    """A proposal refused before any evaluation (seed 001 §6.3; a trial failure is not a
    rejection): which step and iteration, the proposal's index in its batch, the ``reason_code``
    and message, and what the validator knew of it (config hash, parents, rationale, the
    candidate it duplicates)."""

    step_index: int = Field(ge=0)
    reason_code: str = Field(min_length=1, max_length=64)
    message: str = ""
    iteration: int | None = Field(default=None, ge=0)
    proposed_index: int | None = Field(default=None, ge=0)
    candidate_id: str | None = Field(default=None, max_length=200)
    config_hash: str | None = Field(default=None, max_length=64)
    parent_candidate_ids: tuple[str, ...] = ()
    rationale: str | None = None
    duplicate_of: str | None = None
    key: str | None = Field(default=None, min_length=1, max_length=255)
    created_at: datetime | None = None  # stamped by the repository

    def dedupe_key(self) -> str:
        """``key`` when given, else derived from the content: the same rejection recorded twice
        (a redelivered step) is stored once."""
        if self.key is not None:
            return self.key
        content = self.model_dump(mode="json", exclude={"key", "created_at"})
        text = json.dumps(content, sort_keys=True, default=str)
        digest = hashlib.sha256(text.encode()).hexdigest()[:24]
        return f"{self.step_index}:{self.reason_code[:64]}:{digest}"


class Event(Frozen):
    """One event of a job. ``key`` is stable: storing an event whose key the job already has does
    nothing, so a retried write or a redelivered task cannot repeat it. ``seq`` (per job,
    increasing from 1) and ``created_at`` are assigned when it is stored."""

    type: str = Field(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_]*$")
    key: str = Field(min_length=1, max_length=255)
    payload: dict[str, JSONValue] = Field(default_factory=dict)
    job_id: str | None = None
    seq: int = Field(default=0, ge=0)
    created_at: datetime | None = None


__all__ = [
    "BEST_CANDIDATE_CHANGED",
    "EVENT_TYPES",
    "PROGRESS_CHANGED",
    "RUN_FINISHED",
    "RUN_STATUS_CHANGED",
    "TRIAL_ADDED_OR_UPDATED",
    "Event",
    "Rejection",
    "Trial",
    "TrialStatus",
]
