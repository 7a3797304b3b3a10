"""A compress job through real eval workers against the rate-limited provider: with the limiter
(shared in Redis by both eval workers) the provider answers (almost) no 429, and the job decides
as it does on the simulated model."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from optiflow.core.compress.spec import CompressSpec
from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job
from optiflow.settings import Settings
from tests.support.chaos import decisions, small
from tests.support.inline import run_inline
from tests.support.ratelimited_server import RateLimitedServer
from tests.support.workers import ROOT, running_workers, worker_env

pytestmark = [pytest.mark.redis, pytest.mark.workers]
EXAMPLE = ROOT / "examples" / "support-bot" / "job.yaml"
RPM = 2400  # 40 calls a second: the job is paced (about 15 s) without the test taking long


def test_job_on_two_eval_workers_passes_the_shared_limiter(
    redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    reference = small(load_job(EXAMPLE, overrides={"fail_fast": False}), samples=8, runs=1)  # type: ignore[arg-type]
    with RateLimitedServer(rpm=RPM, burst_s=1.0, latency_ms=10) as server:
        model = {
            "model": "openai/limited",
            "api_base": server.api_base,
            "params": {"api_key": "t", "stream": False},
        }
        spec = CompressSpec.model_validate(
            {**reference.model_dump(mode="json"), "model": model, "strategy": {"type": "llm", "model": model}}
        )
        limits = {"limited": {"model": "openai/limited", "rpm": RPM}}
        env = worker_env(redis_url, redis_prefix, tmp_path, OPTIFLOW_MODEL_LIMITS=json.dumps(limits))
        settings = Settings(
            redis_url=redis_url,
            key_prefix=redis_prefix,
            home=tmp_path,
            database_url=env["OPTIFLOW_DATABASE_URL"],
        )
        with (
            running_workers(env, tmp_path, eval_workers=2, eval_concurrency=8),
            Client(settings, embedded=False) as client,
        ):
            started = time.monotonic()
            result = client.submit(spec).wait(timeout=180).raise_for_error()
            wall = time.monotonic() - started
        stats = server.stats()
    assert result.report is not None
    assert decisions(result.report) == decisions(run_inline(reference))
    assert stats["accepted"] >= 30
    assert stats["rejected"] <= 0.01 * stats["accepted"] + 1, stats
    # paced by the limiter: never faster than the provider's rate (past its first burst of 10)
    assert wall >= (stats["accepted"] - 10) / (RPM / 60) * 0.9, (wall, stats)
    log = (tmp_path / "eval0.log").read_text()
    assert (
        "model limits (shared by the fleet in Redis" in log and f"limited (openai/limited): {RPM} rpm" in log
    )
