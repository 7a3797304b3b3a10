"""The adversarial corpus of the text-safety test: texts of any size that make a superlinear
reader show it.

A :class:`Family` is a recipe for a text of ``n`` characters. Two kinds:

- :data:`GENERIC`: what any text reader meets: one sentence of ``n`` characters, ``n / 9``
  distinct words, one huge token, runs of whitespace, punctuation, quotes and digits, deep
  nesting of every bracket (and of ``${``), unicode edge cases (combining marks, right-to-left
  text and overrides, astral characters, NUL; lone surrogates only where a reader can get them);
- :func:`derived`: from a module's own regular expressions, parsed with the standard library's
  regex parser (``re._parser``): for each pattern, every prefix of it made into text (``"do you"``,
  ``"do you "``, ``"do you x"`` for ``\\b(?:do you|...) [^.?!]*\\?``), every alternative of its
  branches, repeated. A pattern that backtracks re-scans from every start a prefix gives it;
  a scan that restarts per occurrence of a lead-in does too.

A derived family holds one block per example (each repeated to ``n / k`` characters), so a reader
that is quadratic on any one example is quadratic on the family.
"""

from __future__ import annotations

import ast
import inspect
import random
import re
import re._constants as C
import re._parser as sre_parse
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields, is_dataclass
from functools import lru_cache
from pathlib import Path

MAX_EXAMPLES = 24
"""Examples per pattern at most (evenly chosen among its prefixes and alternatives)."""
MAX_VARIANTS = 6
"""Alternatives tried per branch at most."""


@dataclass(frozen=True)
class Family:
    """``make(n)``: a text of exactly ``n`` characters."""

    name: str
    make: Callable[[int], str]
    surrogates: bool = False
    """Holds lone surrogates: only for readers that can receive them (JSON and YAML parsers)."""

    def text(self, n: int) -> str:
        return _text(self, n)


@lru_cache(maxsize=2048)
def _text(family: Family, n: int) -> str:
    out = family.make(n)
    if len(out) < n:
        out = (out * (n // max(1, len(out)) + 1))[:n]
    return out[:n]


def repeat(unit: str) -> Callable[[int], str]:
    return lambda n: (unit * (n // len(unit) + 1))[:n]


def blocks(units: list[str]) -> Callable[[int], str]:
    """One block per unit, each the unit repeated to ``n / len(units)`` characters."""

    def make(n: int) -> str:
        size = max(1, n // len(units))
        return "".join(repeat(u)(size) for u in units)

    return make


def _distinct_words(n: int) -> str:
    """Distinct 8-letter words (distinct 6-letter prefixes too): ``n / 9`` of them."""
    rng = random.Random(27)
    letters = "abcdefghijklmnopqrstuvwxyz"
    seen: set[str] = set()
    words: list[str] = []
    size = 0
    while size < n:
        w = "".join(rng.choice(letters) for _ in range(8))
        if w[:6] in seen:
            continue
        seen.add(w[:6])
        words.append(w)
        size += 9
    return " ".join(words)


def _sentence(n: int) -> str:
    """One sentence of ``n`` characters: ordinary words, no sentence end until the last."""
    vocabulary = [
        "the",
        "customer",
        "asks",
        "about",
        "a",
        "refund",
        "and",
        "you",
        "reply",
        "with",
        "the",
        "code",
        "when",
        "it",
        "is",
        "below",
        "the",
        "limit",
        "questions",
        "about",
        "billing",
        "are",
        "filed",
        "under",
        "the",
        "label",
        "please",
        "note",
        "that",
        "it",
        "is",
        "important",
        "to",
    ]
    rng = random.Random(3)
    parts: list[str] = []
    size = 0
    while size < n - 1:
        w = rng.choice(vocabulary)
        parts.append(w)
        size += len(w) + 1
    return (" ".join(parts))[: n - 1] + "."


GENERIC: tuple[Family, ...] = (
    Family("one sentence", _sentence),
    Family("distinct words", _distinct_words),
    Family("one token", repeat("a")),
    Family("spaces", repeat(" ")),
    Family("blank lines", repeat("\n")),
    Family("whitespace mix", repeat(" \t\n \r\n\t")),
    Family("sentence ends", repeat(". ")),
    Family("sentences", repeat("A b. ")),
    Family("clauses", repeat("x; ")),
    Family("placeholder clauses", repeat("${a}; ")),
    Family("punctuation", repeat(".!?;:,")),
    Family("quotes", repeat("\"'`")),
    Family("digits", repeat("1")),
    Family("numbers", repeat("1.5,-2e3 ")),
    Family("nesting", blocks(["(", ")", "[", "]", "{", "}", "<a>", "</a>"])),
    Family("placeholders", blocks(["${", "$", "${a}", "{input}", "{{", "%s"])),
    Family("json", blocks(['{"a":', '["', "[", '"\\', "{"])),
    Family("yaml", blocks(["- ", "a: ", "&a *a ", "? ", "| ", "!!", "--- "])),
    Family("bullets", repeat("\n- x\n1. y\n* z")),
    Family("combining marks", repeat("e\u0301\u0302\u0303")),
    Family("right to left", repeat("\u202e\u05d0\u05d1 \u0627\u0644 \u202c")),
    Family("astral", repeat("\U0001d4b3\U0001f600 ")),
    Family("NUL", repeat("a\x00")),
    Family("lone surrogates", repeat("a\ud800\udfff"), surrogates=True),
)


# -- families derived from a module's regular expressions ------------------------------------------
_CATEGORY = {
    C.CATEGORY_DIGIT: "7",
    C.CATEGORY_NOT_DIGIT: "x",
    C.CATEGORY_SPACE: " ",
    C.CATEGORY_NOT_SPACE: "x",
    C.CATEGORY_WORD: "a",
    C.CATEGORY_NOT_WORD: "-",
    C.CATEGORY_LINEBREAK: "\n",
    C.CATEGORY_NOT_LINEBREAK: "x",
}
_CANDIDATES = "xa7 -,.\n:;!?/()[]{}\"'=_#Z\t"


def _in_set(items: list[tuple[object, object]]) -> str:
    """A character of a character class (``[...]``)."""
    negate = any(op is C.NEGATE for op, _ in items)
    if not negate:
        for op, av in items:
            if op is C.LITERAL:
                return chr(int(av))  # type: ignore[call-overload]
            if op is C.RANGE:
                return chr(av[0])  # type: ignore[index]
            if op is C.CATEGORY:
                return _CATEGORY.get(av, "x")  # type: ignore[call-overload]
        return "x"
    for ch in _CANDIDATES:
        if not any(_member(op, av, ch) for op, av in items):
            return ch
    return "\u00e9"


def _member(op: object, av: object, ch: str) -> bool:
    if op is C.LITERAL:
        return ch == chr(int(av))  # type: ignore[call-overload]
    if op is C.RANGE:
        return av[0] <= ord(ch) <= av[1]  # type: ignore[index, no-any-return]
    if op is C.CATEGORY:
        pattern = {
            C.CATEGORY_DIGIT: r"\d",
            C.CATEGORY_NOT_DIGIT: r"\D",
            C.CATEGORY_SPACE: r"\s",
            C.CATEGORY_NOT_SPACE: r"\S",
            C.CATEGORY_WORD: r"\w",
            C.CATEGORY_NOT_WORD: r"\W",
        }.get(av)  # type: ignore[call-overload]
        return pattern is not None and re.fullmatch(pattern, ch) is not None
    return False


def _atoms(parsed: sre_parse.SubPattern | list[tuple[object, object]]) -> list[tuple[object, object]]:
    """The pattern as a flat sequence: groups inlined (their prefixes are the pattern's prefixes)."""
    out: list[tuple[object, object]] = []
    for op, av in parsed:
        if op is C.SUBPATTERN:
            out += _atoms(av[-1])  # type: ignore[index]
        elif op is C.ATOMIC_GROUP:
            out += _atoms(av)  # type: ignore[arg-type]
        else:
            out.append((op, av))
    return out


_LITERALS = "literals"


def _words(seq: list[tuple[object, object]]) -> list[tuple[object, object]]:
    """Runs of literal characters as one item: a prefix ends between words, not inside one."""
    out: list[tuple[object, object]] = []
    for op, av in seq:
        if op is C.LITERAL and out and out[-1][0] == _LITERALS:
            out[-1] = (_LITERALS, str(out[-1][1]) + chr(int(av)))  # type: ignore[call-overload]
        elif op is C.LITERAL:
            out.append((_LITERALS, chr(int(av))))  # type: ignore[call-overload]
        else:
            out.append((op, av))
    return out


def _example(seq: list[tuple[object, object]], variant: int) -> str:
    out: list[str] = []
    for op, av in seq:
        if op == _LITERALS:
            out.append(str(av))
        elif op is C.LITERAL:
            out.append(chr(int(av)))  # type: ignore[call-overload]
        elif op is C.NOT_LITERAL:
            out.append("x" if chr(int(av)) != "x" else "y")  # type: ignore[call-overload]
        elif op is C.ANY:
            out.append("x")
        elif op is C.IN:
            out.append(_in_set(av))  # type: ignore[arg-type]
        elif op is C.CATEGORY:
            out.append(_CATEGORY.get(av, "x"))  # type: ignore[call-overload]
        elif op is C.BRANCH:
            alternatives = av[1]  # type: ignore[index]
            out.append(_example(_atoms(alternatives[variant % len(alternatives)]), variant))
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            low, _, item = av  # type: ignore[misc]
            out.append(_example(_atoms(item), variant) * max(1, min(int(low), 3)))
        elif op is C.SUBPATTERN:
            out.append(_example(_atoms(av[-1]), variant))  # type: ignore[index]
        elif op is C.ATOMIC_GROUP:
            out.append(_example(_atoms(av), variant))  # type: ignore[arg-type]
        elif op is C.AT and av is C.AT_BOUNDARY and "".join(out)[-1:].isalnum():
            out.append(" ")  # a word boundary after a word: a blank makes one
        # other anchors, ASSERT / ASSERT_NOT (lookaround), GROUPREF: no text of their own
    return "".join(out)


def _branching(seq: list[tuple[object, object]]) -> int:
    widest = 1
    for op, av in seq:
        if op is C.BRANCH:
            widest = max(widest, len(av[1]))  # type: ignore[index]
            for alt in av[1]:  # type: ignore[index]
                widest = max(widest, _branching(_atoms(alt)))
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            widest = max(widest, _branching(_atoms(av[2])))  # type: ignore[index]
    return min(widest, MAX_VARIANTS)


def examples(pattern: str, flags: int = 0, *, whole: bool = False) -> list[str]:
    """Every proper prefix of ``pattern`` made into text (``whole``: the whole pattern), for each
    of its branches' alternatives (at most :data:`MAX_EXAMPLES`, chosen evenly). Prefixes and
    whole matches make separate families: a search returns the leftmost match, so one whole match
    to the right of a run of prefixes would end every scan of them early."""
    try:
        seq = _words(_atoms(sre_parse.parse(pattern, flags)))
    except re.error:
        return []
    found: dict[str, None] = {}
    for variant in range(_branching(seq)):
        for k in [len(seq)] if whole else range(1, len(seq)):
            found[_example(seq[:k], variant)] = None
    out = [t for t in found if t]
    if len(out) > MAX_EXAMPLES:
        step = len(out) / MAX_EXAMPLES
        out = [out[int(i * step)] for i in range(MAX_EXAMPLES)]
    return out


def _joined(example: str, anchored: bool) -> str:
    """The unit a derived block repeats: each on a line of its own for a pattern anchored at a line
    start; else a word-like example gets a space after it."""
    if anchored:
        return example + "\n"
    return example + " " if example[-1:].isalnum() else example


def _anchored(pattern: str, flags: int) -> bool:
    try:
        parsed = sre_parse.parse(pattern, flags)
    except re.error:
        return False
    return bool(parsed) and parsed[0][0] is C.AT and parsed[0][1] in (C.AT_BEGINNING, C.AT_BEGINNING_STRING)


_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT)
MAX_RUNS = 4
"""Overlapping-repeat families per pattern at most."""


def _accepts(item: sre_parse.SubPattern, ch: str, flags: int) -> bool:
    try:
        return re._compiler.compile(item, flags).fullmatch(ch) is not None  # type: ignore[attr-defined]
    except (re.error, TypeError, ValueError):
        return False


def runs(pattern: str, flags: int = 0) -> list[str]:
    """For each repeat followed (later in the pattern) by another repeat whose character it also
    takes (``\\s*X?\\s*``, ``[^#]*?[ \\t]*$``): the text before the first, one character of its own,
    then the shared character, to be run long. Two repeats that share a character split a long
    run of it in every way before the pattern fails."""
    try:
        parsed = sre_parse.parse(pattern, flags)
        seq = _words(_atoms(parsed))
    except re.error:
        return []
    found: dict[str, None] = {}
    for variant in range(_branching(seq)):
        for k, (op, av) in enumerate(seq):
            if op not in _REPEATS:
                continue
            own = _example(_atoms(av[2]), variant)[:1]  # type: ignore[index]
            for o, a in seq[k + 1 :]:  # the next repeat the text can reach without a fixed part
                if o is C.AT:
                    continue
                if o not in _REPEATS:
                    break
                shared = _example(_atoms(a[2]), variant)[:1]  # type: ignore[index]
                if shared and own and _accepts(av[2], shared, parsed.state.flags):  # type: ignore[index]
                    found[_example(seq[:k], variant) + own + "\0" + shared] = None
                    break
                if a[0] > 0:  # type: ignore[index]
                    break
    return list(found)[:MAX_RUNS]


def _run(unit: str) -> Callable[[int], str]:
    """``unit`` (prefix, own character, NUL, shared character): the prefix and its character, then
    the shared character to the end, where a ``!`` and a line break end it (a run the pattern's
    tail then refuses)."""
    head, ch = unit.split("\0")

    def make(n: int) -> str:
        return (head + ch * n)[: max(0, n - 2)] + "!\n"

    return make


def derived(pattern: str, flags: int = 0, name: str = "") -> list[Family]:
    """The pattern's families: its prefixes repeated (each in a block of its own, and all in turn
    over the whole text: a scan from every lead-in to a tail that never comes is quadratic in the
    run of lead-ins), its whole matches repeated, and each of its overlapping repeats run long."""
    out = []
    label = name or pattern[:40]
    anchored = _anchored(pattern, flags)
    for whole in (False, True):
        units = [_joined(e, anchored) for e in examples(pattern, flags, whole=whole)]
        if units:
            out.append(Family(f"{'matches' if whole else 'prefixes'} of {label!r}", blocks(units)))
        if units and not whole and len(units) > 1:  # every prefix in turn, the whole text long
            out.append(Family(f"mixed prefixes of {label!r}", repeat("".join(units))))
    for unit in runs(pattern, flags):
        out.append(Family(f"run {unit.replace(chr(0), '')[-24:]!r} of {label!r}", _run(unit)))
    return out


# -- a module's patterns ---------------------------------------------------------------------------
_RE_FUNCTIONS = frozenset(
    {"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"}
)


def _compiled(value: object, depth: int = 0) -> Iterator[re.Pattern[str]]:
    """The compiled patterns in ``value``: itself, or inside its tuples, mappings, dataclasses,
    class attributes and instance attributes (a few levels deep)."""
    if depth > 3:
        return
    if isinstance(value, re.Pattern):
        yield value
    elif isinstance(value, tuple | list | frozenset | set):
        for item in value:
            yield from _compiled(item, depth + 1)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _compiled(item, depth + 1)
    elif is_dataclass(value) and not isinstance(value, type):
        for f in fields(value):
            yield from _compiled(getattr(value, f.name), depth + 1)
    elif isinstance(value, type) and value.__module__.startswith("optiflow."):
        for item in list(vars(value).values()):
            yield from _compiled(item, depth + 1)
    elif type(value).__module__.startswith("optiflow.") and hasattr(value, "__dict__"):
        yield from _compiled(type(value), depth + 1)
        for item in list(vars(value).values()):
            yield from _compiled(item, depth + 1)


def module_patterns(module: types.ModuleType) -> list[tuple[str, int]]:
    """(pattern, flags) of every regular expression of ``module``: the compiled ones it holds
    (also inside tuples and dataclasses) and the literal patterns of its ``re.*`` calls."""
    found: dict[str, int] = {}
    for value in vars(module).values():
        for p in _compiled(value):
            if isinstance(p.pattern, str):
                found.setdefault(p.pattern, p.flags & ~re.UNICODE)
    try:
        source = Path(inspect.getfile(module)).read_text()
    except (OSError, TypeError):
        source = ""
    for node in ast.walk(ast.parse(source)) if source else ():
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "re"
            and node.func.attr in _RE_FUNCTIONS
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.setdefault(node.args[0].value, 0)
    return list(found.items())


def families_of(sources: tuple[types.ModuleType | re.Pattern[str], ...]) -> list[Family]:
    """The derived families of ``sources``: every pattern of a module, or one compiled pattern."""
    out: dict[str, Family] = {}
    for source in sources:
        if isinstance(source, re.Pattern):
            patterns, where = [(str(source.pattern), source.flags & ~re.UNICODE)], ""
        else:
            patterns, where = module_patterns(source), source.__name__.rsplit(".", 1)[-1]
        for pattern, flags in patterns:
            for family in derived(pattern, flags, f"{where}: {pattern[:48]}" if where else pattern[:48]):
                out.setdefault(family.name, family)
    return list(out.values())


def composite(families: list[Family]) -> Family:
    """Every family in one text, a block of ``n / k`` characters each: the reader's deep check
    (a superlinear cost in the length of the whole text, such as concatenating its pieces one by
    one, shows only on a long text)."""

    def make(n: int) -> str:
        size = max(1, n // len(families))
        return "".join(f.text(size) for f in families)

    return Family(f"all {len(families)} families", make)


__all__ = ["GENERIC", "Family", "composite", "derived", "examples", "families_of", "module_patterns"]
