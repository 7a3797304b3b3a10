"""Every Redis key optiflow writes, in one place.

Each function takes the configured prefix (``Settings.key_prefix``) first and returns a full key,
so one Redis can hold several deployments and tests can use a throwaway prefix. Names that go
into keys (ns, key, tag, ids) never contain ``:``; they are checked before a key is built.

Keys of one prompt share the Redis Cluster hash tag ``{ns/key}``, so a transaction over one
prompt's keys (WATCH / MULTI) stays on one slot.
"""

from __future__ import annotations


def _prompt_scope(prefix: str, ns: str, key: str) -> str:
    return f"{prefix}:{{{ns}/{key}}}"


def prompt(prefix: str, ns: str, key: str) -> str:
    """String: the prompt's JSON."""
    return f"{_prompt_scope(prefix, ns, key)}:prompt"


def overrides(prefix: str, ns: str, key: str, tag: str) -> str:
    """String: the JSON of what the tag holds (a PromptOverrides)."""
    return f"{_prompt_scope(prefix, ns, key)}:overrides:{tag}"


def tags(prefix: str, ns: str, key: str) -> str:
    """Set: the tags of the prompt that hold overrides."""
    return f"{_prompt_scope(prefix, ns, key)}:tags"


def versions(prefix: str, ns: str, key: str, tag: str) -> str:
    """List: the tag's versions as JSON, oldest first (append-only)."""
    return f"{_prompt_scope(prefix, ns, key)}:versions:{tag}"


# -- jobs: eval cache and signals (optiflow.distributed.cache) -----------------------------------
# The Celery broker's queues and bindings live under ``f"{prefix}:"`` too (kombu's
# ``global_keyprefix``), and so do Celery's result keys (``celery-task-meta-<id>``, group and chord
# keys: the result backend's own ``global_keyprefix``).


def eval_cache(prefix: str, scope: str, digest: str) -> str:
    """String, with TTL: a compact EvalResult. ``scope`` is a job id (or ``global``)."""
    return f"{prefix}:cache:{scope}:{digest}"


def cancelled(prefix: str, job_id: str) -> str:
    """String, with TTL: present once the job is cancelled; pending evaluations are skipped."""
    return f"{prefix}:job:{job_id}:cancelled"


def regressed(prefix: str, job_id: str, experiment_id: str) -> str:
    """String, with TTL: present once a candidate regressed; fail-fast skips the rest."""
    return f"{prefix}:job:{job_id}:regressed:{experiment_id}"


def probing(prefix: str, job_id: str, step: int | str) -> str:
    """String, with TTL: when the first of a step's probe evaluations began (epoch seconds,
    written once); the clock of the step's held evaluations' wait."""
    return f"{prefix}:job:{job_id}:probing:{step}"


def probed(prefix: str, job_id: str, step: int | str) -> str:
    """String counter, with TTL: a step's probe evaluations answered so far; the step's held
    evaluations wait for it to reach the probe's size."""
    return f"{prefix}:job:{job_id}:probed:{step}"


def progress(prefix: str, job_id: str) -> str:
    """Hash: the running step's ``step``, ``total`` and ``done`` evaluations and ``beat`` (the
    time of the last one): live progress, and the heartbeat recovery reads."""
    return f"{prefix}:job:{job_id}:progress"


def spend(prefix: str, job_id: str, counter: str) -> str:
    """String, with TTL: one counter of the job's spend (``usd``, ``tokens``, ``skipped``,
    ``over``), added to atomically by every worker (INCRBYFLOAT / INCRBY)."""
    return f"{prefix}:job:{job_id}:spend:{counter}"


def lock(prefix: str, name: str) -> str:
    """String, with TTL: a named lock (the recovery sweep, re-issuing one job's action)."""
    return f"{prefix}:lock:{name}"


def events_channel(prefix: str, job_id: str) -> str:
    """Pub/sub channel: the job's events as JSON, published after they are committed."""
    return f"{prefix}:events:{job_id}"
