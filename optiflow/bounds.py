"""Every number a job document sets is bounded where it is admitted (issue 27).

The spec models bound what they can on their own (runs, rounds, ``k``, timeouts). What only the
whole job can tell is checked here, with a :class:`~optiflow.errors.ValidationError` naming the
field, before anything is written:

- sizes that cost memory or worker time per candidate: ``max_section_chars``, the rewrite
  optimizer's ``max_length``, ``max_failing`` and ``recent_iterations``, ``max_failing_examples``,
  a grid's points (the product of its value lists), a search's ``seed``;
- the simulated model's latencies (``sim_latency_ms``, ``sim_ttft_ms``) wherever a value can be
  set: the job's model, ``baseline_model_params``, the treatment's model params, a grid or random
  search's space (``grid.space.sim_latency_ms: [1e9]`` was admitted while ``params`` refused
  60,001 ms);
- ``sim_*`` params only where every model they can reach is the simulated one: they are checked
  against the effective model (``baseline_model_params: {model: openai/gpt-4o-mini,
  sim_latency_ms: 5}`` sent ``sim_latency_ms`` to the provider).

Job sizes (samples x runs x candidates) are :func:`optiflow.core.limits.check_limits`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from optiflow.core.model import MAX_SIM_LATENCY_MS, SIM_LATENCY_PARAMS, ModelConfig
from optiflow.core.optimize.rewrite import RewriteOptimizerSpec
from optiflow.core.optimize.search import GridSearchSpec, RandomSearchSpec
from optiflow.core.optimize.spec import OptimizeSpec
from optiflow.core.policy import SIM_PREFIX, model_configs
from optiflow.errors import ValidationError

if TYPE_CHECKING:
    from optiflow.core.kinds import AnySpec

MAX_SECTION_CHARS = 200_000
"""The largest ``max_section_chars`` (ten times the default): a candidate's section, and what a
rewrite or a demonstrations candidate may grow one to (``1e12`` with k=4 and 3 candidates cost 142 s
of worker time and a 12 MB job record)."""
MAX_EXAMPLES = 1_000
"""The most failing examples (or recent iterations) one rewrite request may carry."""
MAX_GRID_POINTS = 10_000
"""The most points a grid search may have (the product of its value lists; they are listed whole)."""
MAX_SEED = 2**63 - 1


def check_bounds(spec: AnySpec) -> None:
    """ValidationError naming the field for the first number above its bound (see the module)."""
    if isinstance(spec, OptimizeSpec):
        _check_optimize(spec)
    check_sim_latencies(spec)
    check_sim_params(spec)


def _at_most(value: int, bound: int, field: str, why: str) -> None:
    if value > bound:
        raise ValidationError(f"{value:,} is above the limit of {bound:,} ({why})", field=field)


def _check_optimize(spec: OptimizeSpec) -> None:
    _at_most(spec.max_section_chars, MAX_SECTION_CHARS, "max_section_chars", "characters of one section")
    _at_most(spec.max_failing_examples, MAX_EXAMPLES, "max_failing_examples", "examples per request")
    opt = spec.optimizer
    if isinstance(opt, RewriteOptimizerSpec):
        _at_most(opt.max_length, MAX_SECTION_CHARS, "optimizer.max_length", "characters of one section")
        _at_most(opt.max_failing, MAX_EXAMPLES, "optimizer.max_failing", "examples per request")
        _at_most(opt.recent_iterations, MAX_EXAMPLES, "optimizer.recent_iterations", "iterations per request")
    elif isinstance(opt, GridSearchSpec):
        points = math.prod(len(v) for v in opt.space.values())
        if points > MAX_GRID_POINTS:
            sizes = " x ".join(f"{len(v)} ({k})" for k, v in opt.space.items())
            raise ValidationError(
                f"{sizes} = {points:,} points, above the limit of {MAX_GRID_POINTS:,} (a grid is listed)",
                field="optimizer.space",
            )
    elif isinstance(opt, RandomSearchSpec) and not 0 <= opt.seed <= MAX_SEED:
        raise ValidationError(f"must be between 0 and {MAX_SEED}", field="optimizer.seed")


# -- the simulated model's params -------------------------------------------------------------------
def _values(spec: AnySpec) -> Iterator[tuple[str, str, Any]]:
    """(param name, field, value) of every value a document gives a model param that layers onto
    the job's model: baseline params, the treatment's domains, a search's space."""
    for name, value in spec.baseline_model_params.items():
        yield name, f"baseline_model_params.{name}", value
    if not isinstance(spec, OptimizeSpec):
        return
    opt = spec.optimizer
    if isinstance(opt, GridSearchSpec):
        for name, values in opt.space.items():
            for i, value in enumerate(values):
                yield name, f"optimizer.space.{name}.{i}", value
    elif isinstance(opt, RandomSearchSpec):
        for name, dim in opt.space.items():
            for i, value in enumerate(dim.choices or ()):
                yield name, f"optimizer.space.{name}.choices.{i}", value
            for end in ("min", "max"):
                if getattr(dim, end) is not None:
                    yield name, f"optimizer.space.{name}.{end}", getattr(dim, end)
    if spec.treatment is not None:  # a search's default treatment is its space, checked above
        for name, domain in spec.treatment.model_params.items():
            for i, value in enumerate(domain.choices or ()):
                yield name, f"treatment.model_params.{name}.choices.{i}", value
            for end in ("min", "max"):
                if getattr(domain, end) is not None:
                    yield name, f"treatment.model_params.{name}.{end}", getattr(domain, end)


def check_sim_latencies(spec: AnySpec) -> None:
    """A simulated latency is a number of milliseconds in ``[0, MAX_SIM_LATENCY_MS]`` wherever it
    is set (the job's own model params are checked by :class:`~optiflow.core.model.ModelConfig`)."""
    for name, field, value in _values(spec):
        if name not in SIM_LATENCY_PARAMS:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValidationError(f"expected a number of milliseconds, got {value!r}", field=field)
        if not 0 <= value <= MAX_SIM_LATENCY_MS:
            message = f"must be between 0 and {MAX_SIM_LATENCY_MS:g} ms, got {value:g}"
            raise ValidationError(message, field=field)


def _models(spec: AnySpec) -> Iterator[tuple[str, str]]:
    """(model, field) of every model the job's evaluated configuration can take."""
    yield spec.model.model, "model.model"
    for name, field, value in _values(spec):
        if name == "model" and isinstance(value, str):
            yield value, field


def _sim_params(spec: AnySpec) -> Iterator[str]:
    """The fields setting a ``sim_*`` param on the job's evaluated configuration."""
    for name in spec.model.params:
        if name.startswith("sim_"):
            yield f"model.params.{name}"
    for name, field, _ in _values(spec):
        if name.startswith("sim_"):
            yield field


def check_sim_params(spec: AnySpec) -> None:
    """``sim_*`` params only on simulated models: checked against every model the evaluated
    configuration can take (``baseline_model_params.model``, a searched ``model``), and each other
    model of the job (strategy, judge, rewrite) against its own params."""
    sim_fields = list(dict.fromkeys(_sim_params(spec)))
    if sim_fields:
        real = next(((m, f) for m, f in _models(spec) if not m.startswith(SIM_PREFIX)), None)
        if real is not None:
            _refuse(sim_fields[0], *real)
    for path, config in model_configs(spec):
        if path == "model":
            continue
        _check_config(config, path)


def _check_config(config: ModelConfig, path: str) -> None:
    if config.model.startswith(SIM_PREFIX):
        return
    sim = next((name for name in config.params if name.startswith("sim_")), None)
    if sim is not None:
        _refuse(f"{path}.params.{sim}", config.model, f"{path}.model")


def _refuse(field: str, model: str, where: str) -> None:
    name = next(p for p in reversed(field.split(".")) if p.startswith("sim_"))
    raise ValidationError(
        f"{name} is an option of the simulated model ({SIM_PREFIX}...), but this job can run {model!r} "
        f"({where}), and litellm would send it to that provider: sim_* params are for simulated models",
        field=field,
    )


__all__ = ["MAX_GRID_POINTS", "MAX_SECTION_CHARS", "check_bounds", "check_sim_latencies", "check_sim_params"]
