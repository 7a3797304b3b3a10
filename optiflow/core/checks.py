"""Checks: how one model output is judged against a sample's expectation.

The pure checks are computed here. ``regex`` needs a linear-time engine, ``llm_judge`` a model
call and ``python`` an import run under a time bound; all three are injected by the caller
(:mod:`optiflow.evaluator`, with :mod:`optiflow.checking`) so this module stays pure.
"""

from __future__ import annotations

import json
import math
import re  # only for the fixed number pattern below; user patterns go through ``search``
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, StrictFloat

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.model import ModelConfig


class Score(Frozen):
    value: float = Field(ge=0.0, le=1.0)
    passed: bool
    reason: str = ""


def _norm(text: str, case_sensitive: bool) -> str:
    text = " ".join(text.split())
    return text if case_sensitive else text.casefold()


class ExactCheck(Frozen):
    type: Literal["exact"] = "exact"
    case_sensitive: StrictBool = False


class ContainsCheck(Frozen):
    """Passes when the output contains ``value`` (default: the sample's expected text or any of a list)."""

    type: Literal["contains"] = "contains"
    value: str | None = None
    case_sensitive: StrictBool = False


class RegexCheck(Frozen):
    """Passes when ``pattern`` occurs in the output. Patterns are RE2 syntax (linear time: no
    lookaround, backreferences or possessive quantifiers); others are refused at submission."""

    type: Literal["regex"] = "regex"
    pattern: str | None = None  # default: the sample's expected value is the pattern


class JsonFieldCheck(Frozen):
    """Parses the output as JSON and compares ``field`` (dotted path) with the expectation."""

    type: Literal["json_field"] = "json_field"
    field: str = Field(min_length=1)


class NumericCheck(Frozen):
    type: Literal["numeric"] = "numeric"
    tolerance: StrictFloat = Field(default=0.0, ge=0.0)
    relative: StrictBool = False


class LLMJudgeCheck(Frozen):
    type: Literal["llm_judge"] = "llm_judge"
    model: ModelConfig
    rubric: str = Field(min_length=1)
    threshold: StrictFloat = Field(default=0.5, ge=0.0, le=1.0)


class PythonCheck(Frozen):
    """``function`` is ``package.module:callable`` or ``package.module.callable``; it must be in
    the worker's allowlist (``OPTIFLOW_PYTHON_CHECKS``)."""

    type: Literal["python"] = "python"
    function: str = Field(min_length=3)


CheckSpec = Annotated[
    ExactCheck | ContainsCheck | RegexCheck | JsonFieldCheck | NumericCheck | LLMJudgeCheck | PythonCheck,
    Field(discriminator="type"),
]

Judge = Callable[[LLMJudgeCheck, str, JSONValue, JSONValue], Score]
PythonResolver = Callable[[str], Callable[..., Any]]
RegexSearch = Callable[[str, str], bool]
"""``search(pattern, text)``: whether the pattern occurs in the text (a linear-time engine)."""


class CheckNotAvailable(Exception):
    """Raised when a check needs a regex engine, judge or resolver that was not supplied."""


def run_check(
    check: CheckSpec,
    output: str,
    expected: JSONValue,
    *,
    input: JSONValue = None,
    judge: Judge | None = None,
    resolve_python: PythonResolver | None = None,
    search: RegexSearch | None = None,
) -> Score:
    """Judge one output. Never raises for a bad output: that is a failing score with a reason."""
    if isinstance(check, ExactCheck):
        ok = _norm(output, check.case_sensitive) == _norm(_text(expected), check.case_sensitive)
        return _bool(ok, "exact match" if ok else f"expected {_text(expected)!r}")
    if isinstance(check, ContainsCheck):
        wanted = [check.value] if check.value is not None else _texts(expected)
        hay = _norm(output, check.case_sensitive)
        hit = next((w for w in wanted if _norm(w, check.case_sensitive) in hay), None)
        return _bool(hit is not None, f"contains {hit!r}" if hit is not None else f"missing {wanted!r}")
    if isinstance(check, RegexCheck):
        if search is None:
            raise CheckNotAvailable("regex check needs a regex engine (optiflow.checking.regex_search)")
        pattern = regex_pattern(check, expected)
        ok = search(pattern, output)
        return _bool(ok, f"matches /{pattern}/" if ok else f"no match for /{pattern}/")
    if isinstance(check, JsonFieldCheck):
        return _json_field(check, output, expected)
    if isinstance(check, NumericCheck):
        return _numeric(check, output, expected)
    if isinstance(check, LLMJudgeCheck):
        if judge is None:
            raise CheckNotAvailable("llm_judge check needs a judge")
        return judge(check, output, expected, input)
    if resolve_python is None:
        raise CheckNotAvailable("python check needs a resolver")
    fn = resolve_python(check.function)
    result = fn(output, expected)
    if isinstance(result, Score):
        return result
    if isinstance(result, bool):
        return _bool(result, check.function)
    value = float(result)
    return Score(value=min(max(value, 0.0), 1.0), passed=value >= 0.5, reason=check.function)


def regex_pattern(check: RegexCheck, expected: JSONValue) -> str:
    """The pattern a regex check applies to one sample: its own, else the sample's expected value."""
    return check.pattern if check.pattern is not None else _text(expected)


def _bool(ok: bool, reason: str) -> Score:
    return Score(value=1.0 if ok else 0.0, passed=ok, reason=reason)


def _text(value: JSONValue) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def _texts(value: JSONValue) -> list[str]:
    if isinstance(value, list):
        return [_text(v) for v in value]
    return [_text(value)]


def _json_field(check: JsonFieldCheck, output: str, expected: JSONValue) -> Score:
    text = output.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        return _bool(False, f"output is not JSON: {exc.msg}")
    except ValueError:  # an integer of more than 4,300 digits
        return _bool(False, "output is not JSON this check reads: a number too long")
    except RecursionError:
        return _bool(False, "output is not JSON this check reads: nested too deep")
    for part in check.field.split("."):
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return _bool(False, f"field {check.field!r} missing")
    want = expected.get(check.field, expected) if isinstance(expected, dict) else expected
    ok = data == want
    return _bool(ok, f"{check.field} == {want!r}" if ok else f"{check.field} is {data!r}, expected {want!r}")


_NUMBER = re.compile(r"-?\d+(?:[.,]\d+)?(?:[eE][-+]?\d+)?")


def _numeric(check: NumericCheck, output: str, expected: JSONValue) -> Score:
    m = _NUMBER.search(output.replace(",", ""))
    if m is None:
        return _bool(False, "no number in output")
    try:
        got = float(m.group(0))
        want = float(expected) if isinstance(expected, int | float | str) else math.nan
    except ValueError:
        return _bool(False, f"expected value {expected!r} is not a number")
    tol = check.tolerance * abs(want) if check.relative else check.tolerance
    ok = abs(got - want) <= tol
    return _bool(
        ok, f"{got} within {tol} of {want}" if ok else f"{got} differs from {want} by more than {tol}"
    )
