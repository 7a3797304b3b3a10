"""The model policy (pure): which models, endpoints and params a job document from HTTP may use.

A job document sent over HTTP is untrusted. Every model call it causes is made by the server,
with the server's provider keys (``OPENAI_API_KEY`` ...), so a document that chooses the endpoint
(``api_base``, or a ``base_url`` / ``api_key`` / ``extra_headers`` param handed to litellm) sends
those keys wherever it likes, and reads the answer back in the job's error. The policy closes
that door:

- a model is allowed only if the operator listed it (:class:`AllowedModel`: a litellm name, or a
  pattern such as ``openai/*`` for a provider's models), with exactly the ``api_base`` listed
  with it (none unless the operator named one); the simulated ``optiflow/sim`` is always allowed:
  it runs in the worker and calls nothing;
- params are allowed by name from :data:`SAFE_PARAMS` (generation controls that cannot redirect
  a call or carry a secret; ``sim_*`` options for the simulated model) plus what the operator adds;
  everything else (``api_key``, ``api_base``, ``base_url``, ``api_version``, ``organization``,
  ``headers``, ``extra_headers``, ``extra_body``, ``custom_llm_provider``, ``aws_*``, ``vertex_*``,
  ``mock_response``, ...) is refused. An allowlist, so a param litellm adds tomorrow is refused too.

Every place a document reaches a model is checked: every :class:`~optiflow.core.model.ModelConfig`
in the spec wherever it sits (the job's model, the compress strategy's model, an ``llm_judge``
check's model, an LLM rewrite optimizer's model), and every model-param mapping that is layered
onto the job's model (``baseline_model_params``, the treatment factor's ``model_params``, a grid
or random search's ``space``), where a ``model`` value must itself be an allowed model.

The CLI and the Python client do not apply it: their user is the operator.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from fnmatch import fnmatchcase
from typing import Any

from pydantic import BaseModel, Field, model_validator

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.dataset import Dataset
from optiflow.core.measure.spec import MeasureSpec
from optiflow.core.model import ModelConfig
from optiflow.core.optimize.configuration import ParamDomain
from optiflow.core.optimize.search import GridSearchSpec, RandomSearchSpec, SearchDimension
from optiflow.core.optimize.spec import OptimizeSpec
from optiflow.core.prompt import Prompt
from optiflow.errors import ValidationError

SIM_MODEL = "optiflow/sim"
SIM_PREFIX = "optiflow/"

SAFE_PARAMS: frozenset[str] = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "response_format",
        "reasoning_effort",
        "stream",
        "model",  # its value must be an allowed model
    }
)
"""Params a document may set on any allowed model: they shape the answer, never where the call
goes or what credentials it carries."""

SIM_PARAMS: frozenset[str] = frozenset(
    {
        "sim_latency_ms",
        "sim_ttft_ms",
        "sim_noise",
        "sim_error_rate",
        "sim_fail_attempts",
        "sim_error",
        "sim_seed",
        "sim_compress_drop_pct",
        "sim_style",
        "sim_rewrite_rules",
        "sim_pass_dist",
    }
)
"""The simulated model's options (:mod:`optiflow.llm.simulated`), allowed on ``optiflow/...`` models."""


class PolicyError(ValidationError):
    """A job document names a model, an endpoint or a param the server's policy does not allow."""

    code = "policy_violation"


class AllowedModel(Frozen):
    """A model documents may name: ``model`` is a litellm name or a pattern (``openai/*``,
    ``anthropic/claude-*``); ``api_base`` is the one endpoint documents may give with it (None:
    documents give none, and the provider's default endpoint is used)."""

    model: str = Field(min_length=1)
    api_base: str | None = None
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=100)
    """The environment variable holding this endpoint's own key, or None: no key is sent. The
    server's provider keys never go to an endpoint an entry names."""

    @model_validator(mode="after")
    def _own_key(self) -> AllowedModel:
        if self.api_key_env is not None and self.api_base is None:
            raise ValueError(
                f"{self.model}: api_key_env names the key of an entry's own api_base; without one, "
                "the provider's default endpoint and key are used"
            )
        return self

    def allows(self, model: str, api_base: str | None, api_key_env: str | None = None) -> bool:
        return (
            fnmatchcase(model, self.model)
            and _same_base(api_base, self.api_base)
            and api_key_env == self.api_key_env
        )


class ModelPolicy(Frozen):
    models: tuple[AllowedModel, ...] = (AllowedModel(model=SIM_MODEL),)
    params: frozenset[str] = SAFE_PARAMS

    @classmethod
    def build(
        cls,
        models: Iterable[str | Mapping[str, Any] | AllowedModel] = (),
        params: Iterable[str] = (),
        *,
        allow_sim: bool = True,
    ) -> ModelPolicy:
        """The simulated model (unless ``allow_sim`` is False: a production server need not run a
        test model for strangers) and ``models``; :data:`SAFE_PARAMS` and ``params``."""
        entries = [AllowedModel(model=SIM_MODEL)] if allow_sim else []
        for m in models:
            entry = (
                m
                if isinstance(m, AllowedModel)
                else AllowedModel(model=m)
                if isinstance(m, str)
                else AllowedModel.model_validate(m)
            )
            if entry not in entries:
                entries.append(entry)
        return cls(models=tuple(entries), params=SAFE_PARAMS | frozenset(params))

    def describe(self) -> str:
        text = ", ".join(m.model + (f" at {m.api_base}" if m.api_base else "") for m in self.models)
        return text or "none"

    # -- checks ---------------------------------------------------------------------------------
    def check(self, spec: CompressSpec | OptimizeSpec | MeasureSpec) -> None:
        """Refuse ``spec`` (:class:`PolicyError`, naming the field) if any model, endpoint or
        param it would use is outside the policy."""
        for path, config in model_configs(spec):
            self.check_model(config, path)
        base = spec.model
        self.check_params(spec.baseline_model_params, "baseline_model_params", base)
        if isinstance(spec, OptimizeSpec):  # the optimizer first: a default treatment comes from it
            opt = spec.optimizer
            if isinstance(opt, GridSearchSpec):
                for name, values in opt.space.items():
                    self._check_values(name, values, f"optimizer.space.{name}", base)
            elif isinstance(opt, RandomSearchSpec):
                for name, dim in opt.space.items():
                    self._check_dimension(name, dim, f"optimizer.space.{name}", base)
            for name, domain in spec.factor.model_params.items():
                self._check_domain(name, domain, f"treatment.model_params.{name}", base)

    def check_model(self, config: ModelConfig, field: str) -> None:
        self.check_name(config.model, config.api_base, f"{field}.model", f"{field}.api_base")
        if not any(m.allows(config.model, config.api_base, config.api_key_env) for m in self.models):
            entry = next(m for m in self.models if m.allows(config.model, config.api_base, m.api_key_env))
            raise PolicyError(
                f"{config.api_key_env!r}: the key of {config.model!r}"
                + (f" at {config.api_base!r}" if config.api_base else "")
                + f" is the server's choice ({entry.api_key_env or 'none'})",
                field=f"{field}.api_key_env",
            )
        self.check_params(config.params, f"{field}.params", config)

    def check_name(self, model: str, api_base: str | None, field: str, base_field: str | None = None) -> None:
        """``model`` at ``api_base`` must be listed; ``field`` names the model, ``base_field`` the
        endpoint (default ``field``)."""
        if any(m.allows(model, api_base, m.api_key_env) for m in self.models):
            return
        if api_base is not None and any(m.allows(model, None) for m in self.models):
            raise PolicyError(
                f"{api_base!r}: a job document sent over HTTP may not choose the endpoint of "
                f"{model!r}; the server's operator does (OPTIFLOW_MODEL_POLICY)",
                field=base_field or field,
            )
        where = f" at {api_base!r}" if api_base else ""
        if model.startswith(SIM_PREFIX) and not any(m.model == SIM_MODEL for m in self.models):
            raise PolicyError(
                f"the simulated model {model!r} is turned off on this server (OPTIFLOW_HTTP_ALLOW_SIM)",
                field=field,
            )
        raise PolicyError(
            f"model {model!r}{where} is not allowed on this server (allowed: {self.describe()}; "
            "OPTIFLOW_ALLOWED_MODELS / OPTIFLOW_MODEL_POLICY)",
            field=field,
        )

    def check_params(self, params: Mapping[str, JSONValue], field: str, base: ModelConfig) -> None:
        for name, value in params.items():
            self._check_param_name(name, f"{field}.{name}", base)
            if name == "model":
                self._check_model_value(value, f"{field}.model", base)

    def _check_param_name(self, name: str, field: str, base: ModelConfig) -> None:
        if name in self.params or (name in SIM_PARAMS and base.model.startswith(SIM_PREFIX)):
            return
        raise PolicyError(
            f"param {name!r} is not allowed in a job document sent over HTTP: only generation "
            f"params ({', '.join(sorted(self.params))}) may be set; endpoints and credentials are "
            "the server's",
            field=field,
        )

    def _check_model_value(self, value: JSONValue, field: str, base: ModelConfig) -> None:
        if not isinstance(value, str):
            raise PolicyError(f"a model name is a string, got {value!r}", field=field)
        self.check_name(value, base.api_base, field)

    def _check_values(self, name: str, values: Iterable[JSONValue], field: str, base: ModelConfig) -> None:
        self._check_param_name(name, field, base)
        if name == "model":
            for value in values:
                self._check_model_value(value, field, base)

    def _check_domain(self, name: str, domain: ParamDomain, field: str, base: ModelConfig) -> None:
        if name == "model" and (domain.min is not None or domain.max is not None):
            raise PolicyError("a model is chosen from choices, not a range", field=field)
        self._check_values(name, domain.choices or (), field, base)

    def _check_dimension(self, name: str, dim: SearchDimension, field: str, base: ModelConfig) -> None:
        if name == "model" and dim.choices is None:
            raise PolicyError("a model is chosen from choices, not a range", field=field)
        self._check_values(name, dim.choices or (), field, base)


def model_configs(value: Any, path: str = "") -> Iterator[tuple[str, ModelConfig]]:
    """Every :class:`ModelConfig` inside ``value`` (models, tuples, mappings), with its dotted
    path (``check.model``, ``strategy.model``, ``optimizer.model``)."""
    if isinstance(value, ModelConfig):
        yield path, value
    elif isinstance(value, Dataset | Prompt):
        return  # data, no model in it (and possibly large)
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from model_configs(getattr(value, name), f"{path}.{name}" if path else name)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from model_configs(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from model_configs(item, f"{path}.{i}" if path else str(i))


def _same_base(given: str | None, allowed: str | None) -> bool:
    if given is None or allowed is None:
        return given is None and allowed is None
    return given.rstrip("/") == allowed.rstrip("/")


__all__ = [
    "SAFE_PARAMS",
    "SIM_MODEL",
    "SIM_PARAMS",
    "AllowedModel",
    "ModelPolicy",
    "PolicyError",
    "model_configs",
]
