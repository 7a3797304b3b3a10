"""A small compress job end to end on the real local model, through real workers on real Redis.

The point is that a real OpenAI-compatible model behind litellm goes through the whole
distributed path (proposal, baseline, candidate, the paired gate's rounds, the report), not what
it decides: two samples, one section, at most two runs a side, about a dozen model calls (the
server answers one request at a time, about a second each). ``make bench-real`` measures what it
decides on the whole example.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from optiflow.core.compress.spec import CompressSpec
from optiflow.core.model import ModelConfig
from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job
from optiflow.llm.local_model import LocalModelServer
from optiflow.settings import Settings
from tests.support.workers import ROOT, running_workers, worker_env

pytestmark = [pytest.mark.real_model, pytest.mark.redis, pytest.mark.workers]
EXAMPLE = ROOT / "examples" / "review-sentiment" / "job.yaml"


def small_spec(server: LocalModelServer) -> CompressSpec:
    full = load_job(EXAMPLE).dataset.split("train")
    # one of each label, so the baseline can pass one and fail one
    pos = next(s for s in full if s.expected == "positive")
    neg = next(s for s in full if s.expected == "negative")
    spec = load_job(
        EXAMPLE,
        overrides={
            "dataset": full.model_copy(update={"samples": (pos, neg)}),
            "eval_runs": 1,
            "min_section_tokens": 200,  # only the largest section: background
            # the paired gate, kept to two rounds; two samples may both fail once: not this test's point
            "gate": {"mode": "paired", "max_runs": 2, "min_baseline_pass_rate": 0.0},
            # the path, not the decisions: no ablation (two samples notice little), no faithfulness check
            "require_sensitivity": False,
        },
    )
    at = {"model": server.model, "api_base": server.api_base}
    assert spec.strategy.type == "llm"
    # a shorter proposal is enough here (the example's 256 tokens take most of a minute)
    params = {**spec.strategy.model.params, "max_tokens": 96}
    strategy = spec.strategy.model_copy(
        update={
            "model": spec.strategy.model.model_copy(update={**at, "params": params}),
            "faithfulness": False,
        }
    )
    # temperature 0: the two samples' answers are the same every run, so a baseline that passes
    # neither is a real failure of the path, not a sampling draw (at 0.7 it came out 0 of 2 at times)
    model = spec.model.model_copy(update={**at, "params": {**spec.model.params, "temperature": 0.0}})
    return spec.model_copy(update={"model": model, "strategy": strategy})


def test_served_model_answers_through_litellm(local_model: LocalModelServer) -> None:
    from optiflow.llm.completion import complete

    config = ModelConfig(
        model=local_model.model,
        api_base=local_model.api_base,
        params={"api_key": "local", "temperature": 0.0, "max_tokens": 4, "stream": False},
    )
    prompt = load_job(EXAMPLE).prompt
    sample = load_job(EXAMPLE).dataset.samples[0]
    out = complete(config, prompt.render(sample.input).messages())
    assert out.error is None, out.error
    assert out.output.strip()
    assert out.prompt_tokens > 100  # the verbose system prompt reached the model
    assert 0 < out.completion_tokens <= 4


def test_small_compress_job_on_workers(
    local_model: LocalModelServer, redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    spec = small_spec(local_model)
    env = worker_env(redis_url, redis_prefix, tmp_path)
    settings = Settings(
        redis_url=redis_url,
        key_prefix=redis_prefix,
        home=tmp_path,
        database_url=env["OPTIFLOW_DATABASE_URL"],
    )
    with (
        running_workers(env, tmp_path, eval_workers=1, eval_concurrency=2),
        Client(settings, embedded=False) as client,
    ):
        job = client.submit(spec)
        result = job.wait(timeout=240).raise_for_error()
        assert job.status() == "completed"
        tags = client.runtime.store.list_tags(spec.prompt.ns, spec.prompt.key)
    report = result.report
    assert report is not None
    stats = report.stats
    assert stats.errors == 0
    assert stats.model_calls >= len(spec.dataset) * spec.eval_runs  # the baseline, at least
    assert stats.proposal_calls == 1
    assert 0.0 < report.baseline_pass_rate <= 1.0
    decided = {m.section_path for m in report.modifications} | {r.section_path for r in report.rejected}
    assert decided <= {("background",)}
    assert not report.proposal_errors, report.proposal_errors
    assert [t for t in tags if t.startswith("opt-")] == []
