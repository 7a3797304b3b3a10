"""Overrides stores. See :mod:`optiflow.stores.base` for the Protocol.

The Redis and SQL backends are imported on first use, so importing this package stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from optiflow.errors import ConfigError
from optiflow.stores.base import OverridesStore
from optiflow.stores.filesystem import FilesystemOverridesStore
from optiflow.stores.memory import MemoryOverridesStore

if TYPE_CHECKING:
    from optiflow.settings import Settings
    from optiflow.stores.redis import RedisOverridesStore
    from optiflow.stores.sql import SqlOverridesStore

__all__ = [
    "FilesystemOverridesStore",
    "MemoryOverridesStore",
    "OverridesStore",
    "RedisOverridesStore",
    "SqlOverridesStore",
    "open_store",
]


def open_store(settings: Settings) -> OverridesStore:
    """The store ``settings.effective_store`` names; close it when done."""
    kind = settings.effective_store
    if kind == "memory":
        return MemoryOverridesStore()
    if kind == "filesystem":
        return FilesystemOverridesStore(settings.check_home() / "store")
    if kind == "redis":
        from optiflow.stores.redis import RedisOverridesStore

        if not settings.redis_url:
            raise ConfigError("store 'redis' needs OPTIFLOW_REDIS_URL", field="OPTIFLOW_REDIS_URL")
        return RedisOverridesStore(settings.redis_url, prefix=settings.key_prefix)
    from optiflow.stores.sql import SqlOverridesStore

    return SqlOverridesStore(settings.effective_database_url)


def __getattr__(name: str) -> Any:
    if name == "RedisOverridesStore":
        from optiflow.stores.redis import RedisOverridesStore

        return RedisOverridesStore
    if name == "SqlOverridesStore":
        from optiflow.stores.sql import SqlOverridesStore

        return SqlOverridesStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
