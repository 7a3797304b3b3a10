"""Settings from ``OPTIFLOW_*`` environment variables, built only at the edges (CLI, workers).

With nothing set, everything runs on this machine with no services: an in-process worker, SQLite
and a filesystem store under ``OPTIFLOW_HOME`` (default ``./.optiflow``). Pointing
``OPTIFLOW_REDIS_URL`` (and optionally ``OPTIFLOW_BROKER_URL`` / ``OPTIFLOW_DATABASE_URL``) at
real servers makes the same code distributed.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import pydantic
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError

from optiflow.errors import ConfigError

if TYPE_CHECKING:
    from optiflow.core.limits import JobLimits
    from optiflow.core.rate_limits import ModelLimits

ENV_PREFIX = "OPTIFLOW_"
# A list setting from the environment: comma-separated (``a,b``) or a JSON list (``["a", "b"]``).
Names = Annotated[tuple[str, ...], NoDecode]


MODEL_LIMITS_ENV = "OPTIFLOW_MODEL_LIMITS"


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

    model_limits: str | None = Field(
        default=None,
        description="rate limits per model route, shared by every worker: inline JSON "
        '(\'{"openai/gpt-4o-mini": {"rpm": 500, "tpm": 200000, "concurrency": 32}}\') or the path of '
        "a JSON / YAML file holding that mapping (see optiflow.core.rate_limits)",
    )
    limit_max_wait_s: float = Field(
        default=1800,
        gt=0,
        description="a model call that waited this long for its route's limiter gives up with a "
        "transient error (keep it below the broker's visibility timeout, 3600 s)",
    )

    http_host: str = Field(default="127.0.0.1", description="address `optiflow serve` listens on")
    http_port: int = Field(default=8765, ge=0, le=65535, description="port `optiflow serve` listens on")
    http_proxy_headers: bool = Field(
        default=False,
        description="trust X-Forwarded-Proto / X-Real-IP from a TLS-terminating proxy in front "
        "(the scheme the browser used decides the same-origin check)",
    )
    api_token: SecretStr | None = Field(
        default=None,
        description="bearer token every /api request must carry (Authorization: Bearer ...); "
        "required when the server listens beyond loopback",
    )
    allowed_hosts: Names = Field(
        default=(),
        description="Host header names the HTTP server answers besides the bound address, localhost, "
        "127.0.0.1 and ::1 (DNS rebinding); '*' answers any",
    )
    allowed_models: Names = Field(
        default=(),
        description="models a job document from HTTP may name besides the simulated optiflow/sim: "
        "litellm names, 'provider/*' for a provider's models",
    )
    http_allow_sim: bool = Field(
        default=True,
        description="whether job documents from HTTP may use the simulated model optiflow/sim (a "
        "production server need not run a test model for strangers)",
    )
    model_policy: Path | None = Field(
        default=None,
        description="a YAML/JSON file: models (names, or {model, api_base}) and extra params that job "
        "documents from HTTP may use",
    )
    max_body_bytes: int = Field(
        default=10 * 1024 * 1024, ge=1024, description="largest HTTP request body (413 above it)"
    )
    http_header_timeout_s: float = Field(
        default=10, gt=0, le=3600, description="a request's headers must arrive within this (else closed)"
    )
    http_body_timeout_s: float = Field(
        default=60, gt=0, le=3600, description="a request's body must arrive within this (else closed)"
    )
    http_max_bodies: int = Field(
        default=8, ge=1, le=10_000, description="job documents read at once (503 above: each may hold a body)"
    )
    http_max_streams: int = Field(
        default=200, ge=1, le=100_000, description="event streams (SSE) open at once (503 above)"
    )
    http_max_connections: int = Field(
        default=1000, ge=1, le=100_000, description="connections the server holds at once (closed above)"
    )
    max_sample_runs: int = Field(
        default=20_000, ge=1, description="samples x runs of one evaluation of a job's candidate"
    )
    max_job_evaluations: int = Field(
        default=1_000_000, ge=1, description="samples x runs x candidates of one job (its most runs counted)"
    )
    max_iterations: int = Field(default=100, ge=1, description="largest max_iterations of an optimize job")

    @field_validator("allowed_hosts", "allowed_models", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return tuple(part.strip() for part in text.split(",") if part.strip())
        return value

    @property
    def job_limits(self) -> JobLimits:
        """The caps every job document is checked against (:func:`optiflow.core.limits.check_limits`)."""
        from optiflow.core.limits import JobLimits

        return JobLimits(
            max_sample_runs=self.max_sample_runs,
            max_job_evaluations=self.max_job_evaluations,
            max_iterations=self.max_iterations,
        )

    def check_home(self) -> Path:
        """``home`` if it can be used, without creating anything: it is a writable folder, or the
        nearest folder above it that exists is; ConfigError naming ``OPTIFLOW_HOME`` otherwise."""
        path = self.home.resolve()
        existing = next((p for p in (path, *path.parents) if p.exists()), None)
        if existing is None or not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
            why = "not a folder" if existing is not None and not existing.is_dir() else "not writable"
            raise ConfigError(
                f"cannot create {str(self.home)!r}: {existing} is {why} (the folder for the local "
                "database and store; point OPTIFLOW_HOME at a writable one)",
                field="OPTIFLOW_HOME",
            )
        return self.home

    def ensure_home(self) -> Path:
        """``home``, created if needed; ConfigError naming ``OPTIFLOW_HOME`` when it cannot be (a
        traceback said it before: ``OPTIFLOW_HOME=/proc/1/nope optiflow jobs``, issue 27)."""
        try:
            self.home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot create {str(self.home)!r}: {exc.strerror or exc} (the folder for the local "
                "database and store; point OPTIFLOW_HOME at a writable one)",
                field="OPTIFLOW_HOME",
            ) from None
        return self.home

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

    def limits(self) -> ModelLimits:
        """The parsed ``OPTIFLOW_MODEL_LIMITS``; :class:`~optiflow.errors.ConfigError` naming the
        field (``OPTIFLOW_MODEL_LIMITS: openai-main.rpm``) when it is wrong."""
        from optiflow.core.rate_limits import parse_model_limits

        return parse_model_limits(_limits_document(self.model_limits), MODEL_LIMITS_ENV)


def _limits_document(raw: str | None) -> object:
    import json

    from optiflow.errors import ConfigError

    if raw is None or not raw.strip():
        return None
    text = raw.strip()
    if text[0] in "{[":
        from optiflow.errors import ValidationError
        from optiflow.files import check_document

        try:
            return check_document(json.loads(text), MODEL_LIMITS_ENV)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"invalid JSON: {exc.msg} (column {exc.colno})", field=MODEL_LIMITS_ENV
            ) from None
        except RecursionError:
            raise ConfigError("nested too deep", field=MODEL_LIMITS_ENV) from None
        except ValidationError as exc:
            raise ConfigError(exc.message, field=MODEL_LIMITS_ENV) from None
    path = Path(text).expanduser()
    if not path.is_file():
        raise ConfigError(f"neither inline JSON nor an existing file: {text}", field=MODEL_LIMITS_ENV)
    from optiflow.errors import ValidationError
    from optiflow.files import read_yaml

    try:
        return read_yaml(path)  # YAML is a superset of JSON
    except ValidationError as exc:
        raise ConfigError(exc.message, field=f"{MODEL_LIMITS_ENV}: {exc.field}") from None


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
