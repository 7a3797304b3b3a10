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
