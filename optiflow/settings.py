"""Settings from ``OPTIFLOW_*`` environment variables, built only at the edges (CLI, workers).

With nothing set, everything runs on this machine with no services: an in-process worker, SQLite
and a filesystem store under ``OPTIFLOW_HOME`` (default ``./.optiflow``). Pointing
``OPTIFLOW_REDIS_URL`` (and optionally ``OPTIFLOW_BROKER_URL`` / ``OPTIFLOW_DATABASE_URL``) at
real servers makes the same code distributed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import pydantic
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from optiflow.errors import ConfigError

ENV_PREFIX = "OPTIFLOW_"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    home: Path = Field(default=Path(".optiflow"), description="local state for the embedded mode")
    redis_url: str | None = Field(default=None, description="Redis for store, cache, broker, results")
    broker_url: str | None = Field(default=None, description="Celery broker; defaults to redis_url")
    result_backend: str | None = Field(default=None, description="Celery results; defaults to redis_url")
    database_url: str | None = Field(default=None, description="SQLAlchemy URL; default SQLite in home")
    store: Literal["auto", "memory", "filesystem", "redis", "sql"] = "auto"
    key_prefix: str = Field(default="optiflow", description="prefix of every Redis key optiflow writes")
    python_checks: list[str] = Field(default_factory=list, description="allowlist for python checks")
    eval_concurrency: int = Field(default=16, ge=1, le=512)
    check_timeout_s: float = Field(
        default=10,
        gt=0,
        le=600,
        description="a python check still running after this long is killed; its evaluation fails",
    )
    job_timeout_s: float = Field(default=6 * 3600, gt=0)
    max_evaluations_per_job: int = Field(
        default=50_000,
        ge=1,
        description="largest samples x runs a job may ask for (its baseline's evaluations); larger "
        "documents are refused at submission",
    )
    max_iterations_cap: int = Field(
        default=200, ge=1, description="largest max_iterations an optimize job may ask for"
    )
    stale_after_s: float = Field(
        default=300,
        gt=0,
        description="a running job with no evaluation and no step for this long is resumed by the "
        "control worker (keep it above the model timeout)",
    )
    recover_interval_s: float = Field(default=30, gt=0, description="how often control workers look")
    task_events: bool = Field(
        default=False,
        description="workers always send task events; off by default because Flower turns them on "
        "while it runs (its enable_events broadcast), so nobody pays for events nobody watches",
    )

    http_host: str = Field(default="127.0.0.1", description="address `optiflow serve` listens on")
    http_port: int = Field(default=8765, ge=0, le=65535, description="port `optiflow serve` listens on")

    @property
    def distributed(self) -> bool:
        return bool(self.broker_url or self.redis_url)

    @property
    def effective_database_url(self) -> str:
        return self.database_url or f"sqlite:///{(self.home / 'optiflow.db').resolve()}"

    @property
    def effective_store(self) -> Literal["memory", "filesystem", "redis", "sql"]:
        if self.store != "auto":
            return self.store
        return "redis" if self.redis_url else "filesystem"


def load_settings(**values: Any) -> Settings:
    """Settings from the environment (``values`` win); a bad value is a ConfigError naming its
    environment variable, one line, instead of pydantic's report."""
    try:
        return Settings(**values)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else ""
        var = f"{ENV_PREFIX}{name.upper()}"
        got = f" (got {os.environ[var]!r})" if var in os.environ and name not in values else ""
        raise ConfigError(f"{err['msg']}{got}", field=var) from None
    except SettingsError as exc:  # a list or mapping setting whose value is not JSON
        m = re.search(r'field "(\w+)"', str(exc))
        var = f"{ENV_PREFIX}{m.group(1).upper()}" if m else "environment"
        raise ConfigError(
            f'not valid JSON (got {os.environ.get(var, "")!r}); e.g. ["pkg.module:fn"]', field=var
        ) from None
