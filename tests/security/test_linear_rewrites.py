"""Each pattern rewritten for linear time (issue 27) finds what the backtracking one found:
randomized differential tests on short texts, where the old pattern is still fast."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from optiflow.core import faithfulness
from optiflow.core.compress.extract import Piece, rebuild
from optiflow.core.optimize.params import ParameterBlockSpec
from optiflow.llm import judge

QUESTION = re.compile(r"\b(?:do you|would you like|can you|could you) [^.?!]*\?", re.IGNORECASE)
LINE = re.compile(
    r"^(?P<lead>[ \t]*(?:[-*][ \t]*)?)limit(?P<sep>[ \t]*:[ \t]*)(?P<value>[^\n#]*?)(?P<trail>[ \t]*(?:#[^\n]*)?)$",
    re.M,
)
_NUM = r"(-?\d+(?:\.\d+)?)"
OLD_JUDGE = {
    "_KEYED": re.compile(
        rf"(?:score|rating|grade)[\"'*]*\s*(?:[:=]|\bis\b|\bof\b)?\s*{_NUM}(?:\s*(?:/|out of)\s*{_NUM})?",
        re.I,
    ),
    "_FRACTION": re.compile(rf"{_NUM}\s*(?:/|out of)\s*{_NUM}", re.I),
    "_PERCENT": re.compile(rf"{_NUM}\s*%"),
    "_BARE": re.compile(_NUM),
}


def texts(pieces: list[str], count: int = 4000, seed: int = 27) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 16))) for _ in range(count)]


def same(a: re.Match[str] | None, b: re.Match[str] | None, text: str) -> None:
    assert (a is None) == (b is None), text
    if a is not None and b is not None:
        assert a.span() == b.span() and a.groups() == b.groups(), text


def check_all(pieces: list[str], old: re.Pattern[str], new: Callable[[str], re.Match[str] | None]) -> None:
    for text in texts(pieces):
        same(old.search(text), new(text), text)


def test_the_question_scan_finds_what_the_pattern_found() -> None:
    (question,) = [p for _, p in faithfulness.CHAT if isinstance(p, faithfulness._Question)]
    pieces = [
        "do you",
        "Do You",
        " ",
        "x",
        "?",
        ".",
        "!",
        "would you like",
        "can you",
        "could ",
        "you",
        "\n",
        "a",
    ]
    check_all(pieces, QUESTION, question.search)


def test_the_parameter_line_finds_what_the_lazy_pattern_found() -> None:
    block = ParameterBlockSpec.model_validate({"section": "b", "params": {"limit": {"type": "float"}}})
    line = block._line("limit")
    pieces = ["limit", ":", " ", "\t", "#", "x", "0.5", "\n", "-", "*", " # c", "lim"]
    for text in texts(pieces):
        a, b = LINE.search(text), line.search(text)
        same(a, b, text)
        if a is not None and b is not None:
            assert a.groupdict() == b.groupdict(), text


def test_the_judges_number_patterns_find_what_they_found() -> None:
    pieces = [
        "score",
        "Rating",
        " ",
        ":",
        "=",
        " is ",
        " of ",
        "7",
        "10",
        "-",
        ".",
        "5",
        "/",
        " out of ",
        "%",
        "x",
    ]
    for name, old in OLD_JUDGE.items():
        check_all(pieces, old, getattr(judge, name).search)


def test_the_judges_objects_are_what_the_lazy_pattern_found() -> None:
    old = re.compile(r"\{.*?\}", re.S)
    for text in texts(["{", "}", "x", '"score": 1', "\n", " "]):
        assert judge._objects(text) == [m.group(0) for m in old.finditer(text)], text


def test_rebuild_keeps_what_it_kept() -> None:
    ps = tuple(Piece(text=t, line=i // 2) for i, t in enumerate(["A.", "B ${x};", "C.", "D.", "E."]))
    assert rebuild(ps, [1, 3]) == "A. B ${x};\nC."
    assert rebuild(ps, [5]) == "B ${x};\nE."
