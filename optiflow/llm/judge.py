"""The ``llm_judge`` check: a model grades an output against a rubric.

:func:`judge` matches :data:`optiflow.core.checks.Judge`. The grader is told to answer with JSON
``{"score": <0..1>, "reason": "..."}``; :func:`parse_score` also understands ``Score: 7/10``,
``85%``, a bare number and pass/fail words, normalizing to 0..1 (a number above 1 is read as out
of 10, above 10 as out of 100). ``passed`` is ``score >= check.threshold``. A failed judge call
raises :class:`~optiflow.errors.ModelProviderError` (the evaluator records it as the result's
error); an unparseable answer is a failing score whose reason says so.
"""

from __future__ import annotations

import json
import re

from optiflow.core.base import JSONValue
from optiflow.core.checks import LLMJudgeCheck, Score
from optiflow.errors import ModelProviderError
from optiflow.llm.markers import JUDGE_MARKER

JUDGE_SYSTEM = f"""{JUDGE_MARKER}
You are a strict grader. Grade the assistant output against the rubric and the expected answer.
Answer with JSON only: {{"score": <number from 0 to 1>, "reason": "<one short sentence>"}}."""

# A number starts where a run of digits starts and takes the run whole (possessive): a pattern
# free to start anywhere in a run and give digits back rescanned the run from each of its digits
# (a reply of 1,000 digits: 0.1 s; issue 27). Neither changes a match: a match inside a run has
# one at its start, and no digit given back can be followed by what follows a number here.
_NUM = r"(-?(?<!\d)\d++(?:\.\d++)?)"
_KEYED = re.compile(
    rf"(?:score|rating|grade)[\"'*]*+\s*+(?:(?:[:=]|\bis\b|\bof\b)\s*+)?{_NUM}"
    rf"(?:\s*+(?:/|out of)\s*+{_NUM})?",
    re.I,
)
_FRACTION = re.compile(rf"{_NUM}\s*(?:/|out of)\s*{_NUM}", re.I)
_PERCENT = re.compile(rf"{_NUM}\s*%")
_BARE = re.compile(_NUM)
_PASS_WORDS = re.compile(r"\b(pass(?:ed|es)?|yes|correct)\b", re.I)
_FAIL_WORDS = re.compile(r"\b(fail(?:ed|s|ure)?|incorrect|wrong)\b", re.I)


def _text(value: JSONValue) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def judge_messages(
    check: LLMJudgeCheck, output: str, expected: JSONValue, input: JSONValue
) -> list[dict[str, str]]:
    user = (
        f"<rubric>\n{check.rubric}\n</rubric>\n\n"
        f"<input>\n{_text(input)}\n</input>\n\n"
        f"<expected>{_text(expected)}</expected>\n\n"
        f"<output>\n{output}\n</output>"
    )
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def _scale(value: float, denominator: float | None = None) -> float:
    if denominator is not None and denominator > 0:
        value = value / denominator
    elif value > 10:
        value = value / 100
    elif value > 1:
        value = value / 10
    return min(1.0, max(0.0, value))


def _objects(text: str) -> list[str]:
    r"""What ``re.finditer(r"\{.*?\}", text, re.S)`` finds (each ``{`` to the next ``}``), by string
    search: the pattern rescans to the end of the text from every unclosed ``{``."""
    out: list[str] = []
    i = text.find("{")
    while i >= 0:
        j = text.find("}", i + 1)
        if j < 0:
            break
        out.append(text[i : j + 1])
        i = text.find("{", j + 1)
    return out


def _json(candidate: str) -> object:
    try:
        return json.loads(candidate)
    except (ValueError, RecursionError):  # not JSON, an int of > 4,300 digits, nested too deep
        return None


def parse_score(text: str) -> float | None:
    """A 0..1 score from a grader's answer, or None when there is none."""
    for candidate in _objects(text):
        data = _json(candidate)
        if isinstance(data, dict):
            for key in ("score", "rating", "grade"):
                v = data.get(key)
                if isinstance(v, bool):
                    return 1.0 if v else 0.0
                if isinstance(v, int | float):
                    return _scale(float(v))
                if isinstance(v, str):
                    inner = parse_score(v)
                    if inner is not None:
                        return inner
    for pattern in (_KEYED, _FRACTION):
        keyed = pattern.search(text)
        if keyed:
            den = keyed.group(2)
            return _scale(float(keyed.group(1)), float(den) if den else None)
    percent = _PERCENT.search(text)
    if percent:
        return _scale(float(percent.group(1)), 100.0)
    bare = _BARE.search(text)
    if bare:
        return _scale(float(bare.group(1)))
    if _PASS_WORDS.search(text) and not _FAIL_WORDS.search(text):
        return 1.0
    if _FAIL_WORDS.search(text):
        return 0.0
    return None


def judge(check: LLMJudgeCheck, output: str, expected: JSONValue, input: JSONValue = None) -> Score:
    """Grade ``output`` with ``check.model``; passed when the score reaches ``check.threshold``."""
    from optiflow.llm.completion import complete

    result = complete(
        check.model, judge_messages(check, output, expected, input), metadata={"purpose": "judge"}
    )
    if result.error is not None:
        raise ModelProviderError(f"judge call failed: {result.error}", field="check.model")
    score = parse_score(result.output)
    if score is None:
        snippet = " ".join(result.output.split())[:80]
        return Score(value=0.0, passed=False, reason=f"judge gave no score: {snippet!r}")
    reason = ""
    for candidate in _objects(result.output):
        data = _json(candidate)
        if isinstance(data, dict) and isinstance(data.get("reason"), str):
            reason = data["reason"]
            break
    passed = score >= check.threshold
    return Score(
        value=score, passed=passed, reason=f"judge score {score:.2f}" + (f": {reason}" if reason else "")
    )


__all__ = ["JUDGE_MARKER", "JUDGE_SYSTEM", "judge", "judge_messages", "parse_score"]
