"""Candidate validation: every reason code, and what gets accepted."""

from __future__ import annotations

from typing import Any

import pytest

from optiflow.core.optimize.configuration import TreatmentFactor, config_hash, make_config
from optiflow.core.optimize.protocol import CandidateProposal
from optiflow.core.optimize.validation import CandidateValidator, ValidationOutcome

from .conftest import PROMPT

TREATMENT = TreatmentFactor.model_validate(
    {"sections": ["rules"], "model_params": {"temperature": {"min": 0, "max": 2}}}
)
BASE = make_config({("rules",): "rule_a"}, {"temperature": 0.7})


def validate(
    *configs: Any, parents: tuple[str, ...] = ("c0",), limit: int = 5, **kw: Any
) -> ValidationOutcome:
    v = CandidateValidator(PROMPT, TREATMENT, max_section_chars=kw.pop("max_chars", 100))
    proposals = [
        CandidateProposal(configuration=c, parent_candidate_ids=parents) if isinstance(c, dict) else c
        for c in configs
    ]
    return v.validate(
        proposals,
        known_candidates=kw.pop("known", ("c0",)),
        seen_hashes=kw.pop("seen", {config_hash(BASE): "c0"}),
        max_candidates=limit,
        step_index=3,
        iteration=2,
    )


def code(config: Any, **kw: Any) -> str:
    outcome = validate(config, **kw)
    assert not outcome.accepted, outcome
    (rejection,) = outcome.rejected
    assert rejection.step_index == 3 and rejection.iteration == 2
    return rejection.reason_code


def cfg(rules: Any = "rule_b", temperature: Any = 0.2, **extra_sections: Any) -> dict[str, Any]:
    return {"sections": {"rules": rules, **extra_sections}, "model_params": {"temperature": temperature}}


def test_a_valid_proposal_is_accepted_in_canonical_form() -> None:
    outcome = validate(cfg(rules="rule_b  \n"))
    (a,) = outcome.accepted
    assert a.configuration == {"sections": {"rules": "rule_b"}, "model_params": {"temperature": 0.2}}
    assert a.config_hash == config_hash(cfg())
    assert a.parent_candidate_ids == ("c0",)
    assert outcome.rejected == ()


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("not a mapping", "invalid_shape"),
        ({"sections": {"rules": "x"}, "model_params": {"temperature": 1}, "extra": 1}, "invalid_shape"),
        ({"sections": ["rules"], "model_params": {}}, "invalid_shape"),
        ({"sections": {"rules": "x"}}, "invalid_shape"),  # temperature missing
        ({"sections": {"bad path!": "x"}, "model_params": {"temperature": 1}}, "invalid_shape"),
        (cfg(nope="x"), "unknown_section"),
        (cfg(intro="You are a bot for ${company}, always."), "frozen_section"),
        (cfg(style="Be long."), "fixed_factor"),
        ({"sections": {"rules": "x"}, "model_params": {"temperature": 1, "top_p": 1}}, "fixed_factor"),
        (cfg(rules=""), "invalid_value"),
        (cfg(rules=3), "invalid_value"),
        (cfg(rules="x" * 101), "invalid_value"),
        (cfg(rules="uses ${company}"), "invalid_value"),  # adds a placeholder
        (cfg(temperature=3.0), "invalid_value"),
        (cfg(temperature=float("nan")), "invalid_value"),
        (cfg(temperature=[1]), "invalid_value"),
    ],
)
def test_reason_codes(config: Any, expected: str) -> None:
    assert code(config) == expected


def test_frozen_section_is_its_own_code_even_outside_the_treatment() -> None:
    outcome = validate(cfg(intro="changed ${company}"))
    assert outcome.rejected[0].reason_code == "frozen_section"
    assert "frozen" in outcome.rejected[0].message


def test_unknown_parent() -> None:
    assert code(cfg(), parents=("c9",)) == "unknown_parent"
    assert code(cfg(), parents=("c0", "zz")) == "unknown_parent"


def test_duplicate_of_an_evaluated_candidate_and_within_the_batch() -> None:
    outcome = validate(BASE, cfg(), {"model_params": {"temperature": 0.20}, "sections": {"rules": "rule_b"}})
    assert [r.reason_code for r in outcome.rejected] == ["duplicate", "duplicate"]
    assert outcome.rejected[0].duplicate_of == "c0"
    assert outcome.rejected[0].config_hash == config_hash(BASE)
    assert outcome.rejected[1].proposed_index == 2
    assert outcome.rejected[1].duplicate_of == "proposal 1 of this step"
    assert [a.proposed_index for a in outcome.accepted] == [1]


def test_over_limit() -> None:
    outcome = validate(cfg(rules="rule_1"), cfg(rules="rule_2"), cfg(rules="rule_3"), limit=2)
    assert [a.proposed_index for a in outcome.accepted] == [0, 1]
    assert [(r.proposed_index, r.reason_code) for r in outcome.rejected] == [(2, "over_limit")]


def test_rejection_keeps_lineage_and_rationale() -> None:
    p = CandidateProposal(configuration=BASE, parent_candidate_ids=("c0",), rationale="same again")
    (r,) = validate(p).rejected
    assert r.parent_candidate_ids == ("c0",)
    assert r.rationale == "same again"
