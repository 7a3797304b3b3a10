"""Extractive compression, the pure part: a section as numbered pieces, rebuilt from those kept.

LLMLingua's idea done with the job's own model: the section is split into sentences and clauses
(:func:`pieces`), the model names the pieces to keep by number, and the section is rebuilt from
the original text of those pieces only (:func:`rebuild`). A weak model can choose badly — the
gate judges the choice — but it cannot write an answer or a greeting in place of an instruction.

Splitting: wrapped lines are joined (a line break ends a piece only after ``.!?:`` or a closing
quote, before a bullet or at a blank line); a piece ends after ``.!?`` followed by a space and
a capital (or after a quoted sentence so followed), and at ``;``, outside double quotes.
A piece holding a ``${param}`` placeholder is always kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from optiflow.core.base import Frozen

_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")
_LINE_END = re.compile(r"""[.!?:]["')\]]?\s*$|["']\s*$""")


class Piece(Frozen):
    """One sentence or clause of a section: its text (whitespace collapsed) and the logical line
    of the original it is on (kept pieces of different lines stay on different lines)."""

    text: str
    line: int = 0

    @property
    def pinned(self) -> bool:
        return "${" in self.text


def logical_lines(body: str) -> list[str]:
    """The body's lines with wrapped lines joined (what a reader sees as one line or sentence run)."""
    return [text for text, _ in _segments(body)]


def _segments(body: str) -> list[tuple[str, bool]]:
    """Logical lines: wrapped lines joined; (text, starts after a blank line or a hard break)."""
    out: list[tuple[str, bool]] = []
    current: list[str] = []
    for line in body.splitlines():
        if not line.strip():
            if current:
                out.append((" ".join(current), True))
                current = []
            continue
        if current and (_BULLET.match(line) or _LINE_END.search(current[-1])):
            out.append((" ".join(current), True))
            current = []
        current.append(line.strip())
    if current:
        out.append((" ".join(current), True))
    return out


def _split(text: str) -> list[str]:
    """Sentences and clauses of one logical line, never inside double quotes."""
    parts: list[str] = []
    start, quoted = 0, False
    for i, ch in enumerate(text):
        nxt, after = text[i + 1 : i + 2], text[i + 2 : i + 3]
        if ch == '"':
            quoted = not quoted
            if not quoted and text[i - 1 : i] in (".", "!", "?") and nxt == " " and after.isupper():
                parts.append(text[start : i + 1].strip())  # a quoted sentence ends the piece
                start = i + 1
            continue
        if quoted:
            continue
        if (ch in ".!?" and nxt == " " and (after.isupper() or after in '"(')) or (ch == ";" and nxt == " "):
            parts.append(text[start : i + 1].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def pieces(body: str) -> tuple[Piece, ...]:
    out: list[Piece] = []
    for n, (segment, _) in enumerate(_segments(body)):
        out.extend(Piece(text=text, line=n) for text in _split(" ".join(segment.split())))
    return tuple(out)


def numbered(ps: Iterable[Piece]) -> str:
    """The pieces as the model sees them: one per line, ``[n] text``, numbered from 1."""
    return "\n".join(f"[{i}] {p.text}" for i, p in enumerate(ps, 1))


def chosen(reply: str, count: int) -> frozenset[int] | None:
    """The piece numbers (1-based) a reply names within range; None when it names none (a number
    longer than ``count`` is out of range unread: ``int`` refuses more than 4,300 digits)."""
    width = len(str(count))
    found = {int(n) for n in re.findall(r"\d+", reply) if len(n) <= width and 1 <= int(n) <= count}
    return frozenset(found) or None


def rebuild(ps: tuple[Piece, ...], keep: Iterable[int]) -> str:
    """The section from the kept pieces (1-based numbers; pinned pieces always), in order, lines
    kept where the original broke them."""
    wanted = set(keep)
    parts: list[str] = []  # joined once: ``out = out + text`` per piece is quadratic (issue 27)
    line = -1
    for i, p in enumerate(ps, 1):
        if i not in wanted and not p.pinned:
            continue
        if parts:
            parts.append("\n" if p.line != line else " ")
        parts.append(p.text)
        line = p.line
    return "".join(parts)


__all__ = ["Piece", "chosen", "logical_lines", "numbered", "pieces", "rebuild"]
