"""Canonical configurations and their hash; the treatment factor's spec forms."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from optiflow.core.optimize.configuration import (
    ParamDomain,
    TreatmentFactor,
    canonical,
    config_hash,
    config_sections,
    make_config,
    normalize_value,
    with_params,
    with_section,
)


def test_hash_ignores_key_order_number_forms_and_blank_details() -> None:
    a = {"sections": {"b": "x", "a": "Body\nline"}, "model_params": {"temperature": 1, "top_p": 0.5}}
    b = {
        "model_params": {"top_p": 0.50, "temperature": 1.0},
        "sections": {"a": "Body  \r\nline\n\n", "b": "x"},
    }
    assert config_hash(a) == config_hash(b)
    assert canonical(b) == {
        "model_params": {"temperature": 1, "top_p": 0.5},
        "sections": {"a": "Body\nline", "b": "x"},
    }


def test_hash_sees_real_differences() -> None:
    base = make_config({("a",): "one"}, {"temperature": 0.2})
    assert config_hash(base) != config_hash(with_section(base, ("a",), "two"))
    assert config_hash(base) != config_hash(with_params(base, {"temperature": 0.3}))
    assert config_hash({"sections": {"a": "x y"}}) != config_hash(
        {"sections": {"a": "x  y"}}
    )  # inner spaces kept


def test_unicode_is_nfc_normalized_and_floats_rounded() -> None:
    composed, decomposed = "café", "cafe\u0301"
    assert config_hash(make_config({("a",): composed})) == config_hash(make_config({("a",): decomposed}))
    assert normalize_value(0.1 + 0.2) == 0.3
    assert normalize_value([1.0, True, None]) == [1, True, None]


def test_non_json_values_are_refused() -> None:
    with pytest.raises(ValueError):
        normalize_value(math.nan)
    with pytest.raises(ValueError):
        normalize_value({1, 2})


def test_config_helpers() -> None:
    cfg = make_config({("rules", "a"): "x"}, {"model": "m"})
    assert cfg == {"sections": {"rules/a": "x"}, "model_params": {"model": "m"}}
    assert config_sections(cfg) == {("rules", "a"): "x"}


def test_treatment_factor_forms() -> None:
    t = TreatmentFactor.model_validate({"sections": "rules/a", "model_params": ["temperature"]})
    assert t.sections == (("rules", "a"),)
    assert t.model_params == {"temperature": ParamDomain()}
    assert t.name == "sections:rules/a + model_params:temperature"
    assert t.type == "prompt sections + model params"
    with pytest.raises(ValidationError):
        TreatmentFactor()
    with pytest.raises(ValidationError):
        TreatmentFactor.model_validate({"sections": ["a", "a"]})


def test_param_domain() -> None:
    d = ParamDomain(min=0, max=1)
    assert d.violation(0.5) is None
    assert "above" in (d.violation(1.5) or "")
    assert "not a number" in (d.violation("x") or "")
    c = ParamDomain(choices=("gpt", "sim"))
    assert c.violation("sim") is None
    assert c.violation("other") is not None
    with pytest.raises(ValidationError):
        ParamDomain(min=2, max=1)
