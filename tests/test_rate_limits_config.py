"""``OPTIFLOW_MODEL_LIMITS``: routes from inline JSON or a file, matching, one clear line naming
the field for a bad document (``optiflow worker`` exits 2), what a worker prints, the page's JSON."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from optiflow.core.rate_limits import ModelLimits, RouteLimit, parse_model_limits
from optiflow.distributed.ratelimit import build_limiter, describe, startup_lines
from optiflow.errors import ConfigError
from optiflow.llm.limiter import LocalLimiterBackend
from optiflow.settings import Settings

DOC = (
    '{"openai-4o": {"model": "openai/gpt-4o*", "rpm": 500, "tpm": 200000, "concurrency": 64},'
    ' "openai/gpt-4o-mini": {"rpm": 1200},'
    ' "local": {"model": "openai/smollm2", "api_base": "http://127.0.0.1:8012/v1/", "concurrency": 4}}'
)


def test_routes_match_in_order_by_glob_and_api_base() -> None:
    limits = Settings(model_limits=DOC).limits()
    assert [r.name for r in limits.routes] == ["openai-4o", "openai/gpt-4o-mini", "local"]
    assert limits.route_for("openai/gpt-4o-2024-08-06").name == "openai-4o"  # type: ignore[union-attr]
    assert limits.route_for("openai/gpt-4o-mini").name == "openai-4o"  # type: ignore[union-attr]  # first match
    assert limits.route_for("openai/smollm2", "http://127.0.0.1:8012/v1").name == "local"  # type: ignore[union-attr]
    assert limits.route_for("openai/smollm2", "http://127.0.0.1:9999/v1") is None
    assert limits.route_for("optiflow/sim") is None
    assert not Settings(model_limits=None).limits()


def test_a_limits_file_in_yaml(tmp_path: Path) -> None:
    path = tmp_path / "limits.yaml"
    path.write_text("openai/gpt-4o-mini:\n  rpm: 1200\n  tpm: 150000\n  burst_s: 1\n")
    (route,) = Settings(model_limits=str(path)).limits().routes
    assert (route.rpm, route.tpm, route.burst_s, route.concurrency) == (1200, 150000, 1, None)


@pytest.mark.parametrize(
    ("doc", "field", "message"),
    [
        ('{"a": {"rpm": 0}}', "OPTIFLOW_MODEL_LIMITS: a.rpm", "greater than 0"),
        ('{"a": {"rpm": "fast"}}', "OPTIFLOW_MODEL_LIMITS: a.rpm", "valid number"),
        ('{"a": {"rmp": 5}}', "OPTIFLOW_MODEL_LIMITS: a.rmp", "unknown field"),
        ('{"a": {}}', "OPTIFLOW_MODEL_LIMITS: a", "at least one of rpm, tpm, concurrency"),
        ('{"a": 5}', "OPTIFLOW_MODEL_LIMITS: a", "expected a mapping"),
        ('{"a": {"concurrency": 1.5}}', "OPTIFLOW_MODEL_LIMITS: a.concurrency", "integer"),
        ('{"a":', "OPTIFLOW_MODEL_LIMITS", "invalid JSON"),
        ("[1, 2]", "OPTIFLOW_MODEL_LIMITS", "expected a mapping"),
        ("/no/such/limits.yaml", "OPTIFLOW_MODEL_LIMITS", "neither inline JSON nor an existing file"),
    ],
)
def test_bad_documents_name_the_field(doc: str, field: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        Settings(model_limits=doc).limits()
    assert err.value.field == field and message in err.value.message


def test_worker_refuses_bad_limits_with_one_line(
    monkeypatch: pytest.MonkeyPatch, cli_runner: Callable[..., tuple[int, str, str]]
) -> None:
    monkeypatch.setenv("OPTIFLOW_REDIS_URL", "redis://127.0.0.1:6379/13")
    monkeypatch.setenv("OPTIFLOW_MODEL_LIMITS", '{"openai/gpt-4o": {"rpm": -1}}')
    code, out, err = cli_runner("worker", "--role", "eval")
    assert code == 2 and out == ""
    assert err.strip() == (
        "error[config_error]: OPTIFLOW_MODEL_LIMITS: openai/gpt-4o.rpm: Input should be greater than 0"
    )


def test_startup_lines_say_what_is_enforced_and_where() -> None:
    lines = startup_lines(Settings(model_limits=DOC, redis_url="redis://127.0.0.1:6379/13"))
    assert lines == [
        "model limits (shared by the fleet in Redis, max wait 1800 s):",
        "  openai-4o (openai/gpt-4o*): 500 rpm, 200000 tpm, 64 concurrent, burst 0.1 s",
        "  openai/gpt-4o-mini: 1200 rpm, burst 0.1 s",
        "  local (openai/smollm2 at http://127.0.0.1:8012/v1): 4 concurrent, burst 0.1 s",
    ]
    assert "none" in startup_lines(Settings(model_limits=None))[0]
    embedded = startup_lines(Settings(model_limits=DOC, redis_url=None), embedded=True)
    assert embedded[0].startswith("model limits (in this process")


def test_describe_is_json_for_the_page() -> None:
    settings = Settings(model_limits=DOC, redis_url=None, broker_url=None)
    limiter = build_limiter(settings, embedded=True)
    assert limiter is not None and isinstance(limiter.backend, LocalLimiterBackend)
    rows = describe(settings, limiter)
    assert [r["name"] for r in rows] == ["openai-4o", "openai/gpt-4o-mini", "local"]
    assert rows[0] | {"paused_s": 0} == {
        "name": "openai-4o",
        "model": "openai/gpt-4o*",
        "api_base": None,
        "rpm": 500.0,
        "tpm": 200000.0,
        "concurrency": 64,
        "burst_s": 0.1,
        "factor": 1.0,
        "effective_rpm": 500.0,
        "effective_tpm": 200000.0,
        "paused_s": 0,
        "in_flight": 0,
        "backlog_s": 0.0,
        "shared": False,
    }
    assert build_limiter(Settings(model_limits=None), embedded=True) is None


def test_parse_is_pure_and_keeps_order() -> None:
    limits = parse_model_limits({"b": {"rpm": 1}, "a": {"tpm": 2}})
    assert isinstance(limits, ModelLimits) and [r.name for r in limits.routes] == ["b", "a"]
    assert RouteLimit(name="x", model="m", concurrency=1).describe() == "x (m): 1 concurrent, burst 0.1 s"
