"""Every int, bool and float a job document can reach is strict: ``eval_runs: true`` or ``"3"``
is refused, never coerced. A field added later without ``Strict*`` fails here."""

from __future__ import annotations

import inspect
import types
import typing

import pydantic
import pytest
from pydantic import BaseModel

from optiflow.core.compress.spec import CompressSpec
from optiflow.core.measure.spec import MeasureSpec
from optiflow.core.optimize.spec import OptimizeSpec

SCALARS = (int, bool, float)


def _scalars(annotation: object) -> list[object]:
    """The int/bool/float types in an annotation (through unions, containers, Annotated)."""
    origin = typing.get_origin(annotation)
    if annotation in SCALARS:
        return [annotation]
    if origin is typing.Annotated:
        base, *meta = typing.get_args(annotation)
        if base in SCALARS and any(isinstance(m, pydantic.Strict) and m.strict for m in meta):
            return []  # StrictInt / StrictBool / StrictFloat
        return _scalars(base)
    if origin in (typing.Union, types.UnionType, tuple, list, dict) or (
        origin is not None and getattr(origin, "__name__", "") == "Mapping"
    ):
        return [s for a in typing.get_args(annotation) if a is not Ellipsis for s in _scalars(a)]
    return []


def _models(annotation: object) -> list[type[BaseModel]]:
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _models(a)]


def lax_fields() -> list[str]:
    seen: set[type[BaseModel]] = set()
    lax: list[str] = []
    todo: list[type[BaseModel]] = [CompressSpec, MeasureSpec, OptimizeSpec]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            strict = any(isinstance(m, pydantic.Strict) and m.strict for m in field.metadata)
            if _scalars(field.annotation) and not strict:
                lax.append(f"{model.__module__}.{model.__name__}.{name}: {field.annotation}")
            todo.extend(_models(field.annotation))
    assert len(seen) > 20, seen  # the walk reaches the nested models (checks, optimizers, policies)
    return lax


def test_every_scalar_field_of_a_job_document_is_strict() -> None:
    assert lax_fields() == []


@pytest.mark.parametrize("value", [True, "3", 3.0])
def test_eval_runs_is_not_coerced(value: object) -> None:
    from optiflow.errors import ValidationError
    from optiflow.jobfile import load_job_data
    from tests.interfaces.test_http import job_document

    with pytest.raises(ValidationError, match="valid integer") as refused:
        load_job_data({**job_document(2), "eval_runs": value}, source="doc")
    assert refused.value.field == "doc: eval_runs"
