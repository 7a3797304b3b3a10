"""The model policy on parsed job documents: every place a document reaches a model or a param."""

from __future__ import annotations

from typing import Any

import pytest

from optiflow.core.policy import SAFE_PARAMS, AllowedModel, ModelPolicy, PolicyError, model_configs
from optiflow.jobfile import load_job, load_job_data
from tests.support.workers import ROOT

SIM = {"model": "optiflow/sim"}
OPENAI = {"model": "openai/gpt-4o-mini"}


def compress(**changes: Any) -> Any:
    return load_job(ROOT / "examples" / "support-bot" / "job.yaml", overrides=changes)


def rewrite(**changes: Any) -> Any:
    return load_job(ROOT / "examples" / "weak-helpdesk" / "job.yaml", overrides=changes)


def search(space: dict[str, Any], optimizer: str = "grid", **changes: Any) -> Any:
    spec = compress()
    doc = {
        "kind": "optimize",
        "prompt": spec.prompt.model_dump(mode="json"),
        "dataset": [s.model_dump(mode="json") for s in spec.dataset.samples],
        "check": {"type": "contains"},
        "model": SIM,
        "optimizer": {"type": optimizer, "space": space, **({"samples": 2} if optimizer == "random" else {})},
        **changes,
    }
    return load_job_data(doc, source="doc")


def refused(policy: ModelPolicy, spec: Any) -> tuple[str | None, str]:
    with pytest.raises(PolicyError) as info:
        policy.check(spec)
    assert info.value.code == "policy_violation"
    return info.value.field, info.value.message


DEFAULT = ModelPolicy.build()


def test_the_simulated_model_with_generation_and_sim_params_is_allowed() -> None:
    params = {"temperature": 0.2, "max_tokens": 50, "sim_latency_ms": 1, "sim_noise": 0.1}
    DEFAULT.check(compress(model={**SIM, "params": params}))
    DEFAULT.check(rewrite())
    DEFAULT.check(search({"temperature": [0.0, 0.5]}))
    DEFAULT.check(search({"temperature": {"min": 0.0, "max": 1.0}}, optimizer="random"))


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (lambda: compress(model=OPENAI), "model.model"),
        (lambda: compress(model={**SIM, "api_base": "http://127.0.0.1:9/v1"}), "model.api_base"),
        (lambda: compress(strategy={"type": "llm", "model": OPENAI}), "strategy.model.model"),
        (
            lambda: compress(check={"type": "llm_judge", "model": OPENAI, "rubric": "right?"}),
            "check.model.model",
        ),
        (lambda: rewrite(optimizer={"type": "llm_rewrite", "model": OPENAI}), "optimizer.model.model"),
        (lambda: compress(faithfulness={"judge": {"model": OPENAI}}), "faithfulness.judge.model.model"),
        (lambda: search({"model": ["optiflow/sim", "openai/gpt-4o"]}), "optimizer.space.model"),
        (
            lambda: search({"model": {"choices": ["optiflow/sim", "ollama/llama3"]}}, optimizer="random"),
            "optimizer.space.model",
        ),
        (lambda: search({"model": {"min": 0, "max": 1}}, optimizer="random"), "optimizer.space.model"),
        (
            lambda: search(
                {"temperature": [0.1]},
                treatment={"model_params": {"temperature": {}, "model": {"choices": ["x/y"]}}},
            ),
            "treatment.model_params.model",
        ),
        (lambda: compress(model={**SIM, "params": {"model": "openai/gpt-4o"}}), "model.params.model"),
        (lambda: compress(baseline_model_params={"model": "openai/gpt-4o"}), "baseline_model_params.model"),
    ],
)
def test_a_model_or_endpoint_outside_the_policy_is_refused_naming_the_field(spec: Any, field: str) -> None:
    assert refused(DEFAULT, spec())[0] == field


@pytest.mark.parametrize(
    "param",
    [
        "api_key",
        "api_base",
        "base_url",
        "api_version",
        "organization",
        "headers",
        "extra_headers",
        "extra_body",
        "custom_llm_provider",
        "aws_access_key_id",
        "aws_bedrock_runtime_endpoint",
        "vertex_credentials",
        "mock_response",
        "something_litellm_adds_next_year",
    ],
)
def test_a_param_outside_the_allowlist_is_refused_wherever_it_sits(param: str) -> None:
    value = "http://127.0.0.1:9/v1"
    assert refused(DEFAULT, compress(model={**SIM, "params": {param: value}}))[0] == f"model.params.{param}"
    judge = {"type": "llm_judge", "model": {**SIM, "params": {param: value}}, "rubric": "right?"}
    assert refused(DEFAULT, compress(check=judge))[0] == f"check.model.params.{param}"
    assert refused(DEFAULT, compress(baseline_model_params={param: value}))[0] == (
        f"baseline_model_params.{param}"
    )
    assert refused(DEFAULT, search({param: [value]}))[0] == f"optimizer.space.{param}"


def test_sim_options_are_allowed_only_on_the_simulated_model() -> None:
    policy = ModelPolicy.build(["openai/*"])
    policy.check(compress(model={**SIM, "params": {"sim_error_rate": 0.1}}))
    field, message = refused(policy, compress(model={**OPENAI, "params": {"sim_error_rate": 0.1}}))
    assert field == "model.params.sim_error_rate" and "temperature" in message


def test_operator_lists_models_providers_and_endpoints() -> None:
    policy = ModelPolicy.build(
        ["openai/*", {"model": "openai/smollm2", "api_base": "http://127.0.0.1:8012/v1"}], params=["tools"]
    )
    openai = compress(model=OPENAI, strategy={"type": "rule"})
    policy.check(openai)
    policy.check(compress(model={"model": "openai/smollm2", "api_base": "http://127.0.0.1:8012/v1/"}))
    policy.check(compress(model={**OPENAI, "params": {"tools": []}}))
    assert refused(policy, compress(model={"model": "anthropic/claude-3"}))[0] == "model.model"
    # an endpoint is allowed only with the model it was listed with, and only that endpoint
    field, message = refused(policy, compress(model={**OPENAI, "api_base": "http://127.0.0.1:8012/v1"}))
    assert field == "model.api_base" and "endpoint" in message
    field, _ = refused(policy, compress(model={"model": "openai/smollm2", "api_base": "http://10.0.0.1/v1"}))
    assert field == "model.api_base"
    assert (
        refused(policy, compress(model={**OPENAI, "params": {"api_key": "sk-x"}}))[0]
        == "model.params.api_key"
    )


def test_the_simulated_model_is_always_allowed_and_entries_are_not_repeated() -> None:
    policy = ModelPolicy.build(["optiflow/sim", AllowedModel(model="openai/gpt-4o")])
    assert [m.model for m in policy.models] == ["optiflow/sim", "openai/gpt-4o"]
    assert policy.params == SAFE_PARAMS
    assert {"api_key", "api_base", "base_url", "extra_headers"}.isdisjoint(SAFE_PARAMS)


def test_model_configs_finds_every_model_in_a_spec() -> None:
    judge = {"type": "llm_judge", "model": SIM, "rubric": "right?"}
    assert [p for p, _ in model_configs(compress(check=judge))] == ["check.model", "model", "strategy.model"]
    assert [p for p, _ in model_configs(rewrite())] == ["model", "optimizer.model"]
