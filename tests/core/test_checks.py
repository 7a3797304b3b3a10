"""Every check type, with the python allowlist and the llm_judge (through the simulated model)."""

from __future__ import annotations

import pytest

from optiflow.checking import regex_search
from optiflow.core.checks import (
    CheckNotAvailable,
    ContainsCheck,
    ExactCheck,
    JsonFieldCheck,
    LLMJudgeCheck,
    NumericCheck,
    PythonCheck,
    RegexCheck,
    Score,
    run_check,
)
from optiflow.core.dataset import Sample
from optiflow.core.model import ModelConfig
from optiflow.core.prompt import Prompt
from optiflow.errors import ModelProviderError, ValidationError
from optiflow.evaluator import evaluate, python_resolver
from optiflow.llm.judge import judge, parse_score

SIM = ModelConfig(model="optiflow/sim")
JUDGE = LLMJudgeCheck(model=SIM, rubric="The answer gives the right reference code.", threshold=0.5)
ALLOWED = "tests.core.test_checks:starts_with_expected"


def starts_with_expected(output: str, expected: object) -> bool:
    return output.startswith(str(expected))


def half_score(output: str, expected: object) -> float:
    return 0.5


def scored(output: str, expected: object) -> Score:
    return Score(value=0.9, passed=True, reason="custom")


def test_exact() -> None:
    assert run_check(ExactCheck(), "  Hello   World ", "hello world").passed
    assert not run_check(ExactCheck(case_sensitive=True), "Hello world", "hello world").passed
    assert run_check(ExactCheck(), "42", 42).passed


def test_contains() -> None:
    assert run_check(ContainsCheck(), "your code is RFD-201.", "rfd-201").passed
    assert not run_check(ContainsCheck(case_sensitive=True), "your code is RFD-201.", "rfd-201").passed
    assert run_check(ContainsCheck(), "code B", ["A", "B"]).passed
    s = run_check(ContainsCheck(value="thanks"), "Thanks a lot", "ignored")
    assert s.passed and s.value == 1.0
    miss = run_check(ContainsCheck(), "nothing", "RFD-201")
    assert not miss.passed and miss.value == 0.0 and "missing" in miss.reason


def test_regex() -> None:
    assert run_check(
        RegexCheck(pattern=r"[A-Z]{3}-\d{3}"), "code SHP-404 it is", None, search=regex_search
    ).passed
    assert run_check(RegexCheck(), "order 123", r"order \d+", search=regex_search).passed
    assert not run_check(RegexCheck(pattern=r"^\d+$"), "abc", None, search=regex_search).passed
    with pytest.raises(CheckNotAvailable):  # no engine, no backtracking fallback
        run_check(RegexCheck(pattern="a"), "a", None)


def test_json_field() -> None:
    check = JsonFieldCheck(field="code")
    assert run_check(check, '{"code": "R-1", "answer": "x"}', "R-1").passed
    assert run_check(check, '```json\n{"code": "R-1"}\n```', {"code": "R-1"}).passed
    assert not run_check(check, '{"code": "R-2"}', "R-1").passed
    assert "not JSON" in run_check(check, "plain text", "R-1").reason
    assert run_check(JsonFieldCheck(field="items.1"), '{"items": [1, 2]}', 2).passed
    assert "missing" in run_check(JsonFieldCheck(field="nope"), "{}", 1).reason


def test_numeric() -> None:
    assert run_check(NumericCheck(), "The total is 42.", 42).passed
    assert run_check(NumericCheck(tolerance=0.5), "about 1,000.3 euros", 1000).passed
    assert not run_check(NumericCheck(tolerance=0.1), "41.5", "42").passed
    assert run_check(NumericCheck(tolerance=0.05, relative=True), "105", 100).passed
    assert not run_check(NumericCheck(), "no number", 1).passed
    assert not run_check(NumericCheck(), "5", "five").passed


def test_python_allowlist() -> None:
    resolve = python_resolver([ALLOWED, "tests.core.test_checks.half_score", "tests.core.test_checks:scored"])
    assert run_check(PythonCheck(function=ALLOWED), "RFD-201 ok", "RFD-201", resolve_python=resolve).passed
    assert not run_check(
        PythonCheck(function=ALLOWED), "ok RFD-201", "RFD-201", resolve_python=resolve
    ).passed
    # dotted and colon forms name the same function
    half = run_check(
        PythonCheck(function="tests.core.test_checks:half_score"), "x", "y", resolve_python=resolve
    )
    assert half.value == 0.5 and half.passed
    assert (
        run_check(
            PythonCheck(function="tests.core.test_checks.scored"), "x", "y", resolve_python=resolve
        ).reason
        == "custom"
    )


def test_python_refuses_functions_outside_the_allowlist() -> None:
    resolve = python_resolver([ALLOWED])
    with pytest.raises(ValidationError) as err:
        run_check(PythonCheck(function="os:system"), "x", "y", resolve_python=resolve)
    assert (
        "'os:system'" in str(err.value)
        and "allowlist" in str(err.value)
        and err.value.field == "check.function"
    )
    with pytest.raises(ValidationError, match="cannot be imported"):
        python_resolver(["nowhere.module:fn"])("nowhere.module:fn")
    with pytest.raises(CheckNotAvailable):
        run_check(PythonCheck(function=ALLOWED), "x", "y")


def test_python_check_refused_before_any_model_call(monkeypatch: pytest.MonkeyPatch) -> None:
    from optiflow.llm import completion

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model must not be called")

    monkeypatch.setattr(completion, "complete", boom)
    prompt = Prompt(ns="t", key="k", sections=({"path": "a", "body": "Be nice."},))  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"os\.getcwd"):
        evaluate(
            prompt=prompt,
            overrides=None,
            sample=Sample(id="1", input="hi", expected="x"),
            check=PythonCheck(function="os.getcwd"),
            model=SIM,
            run=0,
            experiment_id="e",
            python_checks=[ALLOWED],
        )


def test_llm_judge_through_the_simulated_model() -> None:
    good = run_check(JUDGE, "Your reference code is RFD-201.", "RFD-201", judge=judge)
    assert good.passed and good.value == 1.0 and "judge score 1.00" in good.reason
    bad = run_check(JUDGE, "I have forwarded your message.", "RFD-201", judge=judge)
    assert not bad.passed and bad.value == 0.0
    strict = JUDGE.model_copy(update={"threshold": 1.0})
    assert run_check(strict, "code RFD-201", "RFD-201", judge=judge).passed
    with pytest.raises(CheckNotAvailable):
        run_check(JUDGE, "x", "y")


def test_llm_judge_provider_error_raises() -> None:
    broken = JUDGE.model_copy(
        update={"model": ModelConfig(model="optiflow/sim", params={"sim_error": "auth", "sim_error_rate": 1})}
    )
    with pytest.raises(ModelProviderError, match="judge call failed"):
        judge(broken, "out", "exp", None)


@pytest.mark.parametrize(
    ("text", "score"),
    [
        ('{"score": 0.8, "reason": "ok"}', 0.8),
        ('Sure!\n```json\n{"score": 1}\n```', 1.0),
        ("Score: 7/10", 0.7),
        ("I'd give it a score of 4 out of 5.", 0.8),
        ("Rating: 9", 0.9),
        ("85%", 0.85),
        ("0.25", 0.25),
        ("PASS", 1.0),
        ("fail", 0.0),
        ('{"score": true}', 1.0),
        ("no idea", None),
    ],
)
def test_parse_score(text: str, score: float | None) -> None:
    got = parse_score(text)
    assert got == (pytest.approx(score) if score is not None else None)
