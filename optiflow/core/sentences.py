"""A text in sentences and clauses, for :mod:`optiflow.core.provenance` (pure): paragraphs and
bullets apart, wrapped lines joined, a clause at ``;``, fragments joined to their neighbour, and an
example's answer line joined to its example (:func:`examples`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise

from optiflow.core.vocabulary import EXAMPLE_LINE, INPUT_LINE

_END = re.compile(
    r"\n[ \t]*(?:\n|(?=[-*\u2022][ \t]|\d{1,3}[.)][ \t]|[A-Z][\w ]{0,20}:))"
    r"|(?:(?<=[.!?])|(?<=[.!?][\"')\]\u201d]))(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bvs\.)(?<!\bincl\.)(?<!\bapprox\.)"
    r"[ \t\n]+(?![ \t\na-z\u2192\u21d2]|[-=]>)|(?<=;)[ \t\n]+(?![ \t\n])"
)
MAX_SENTENCE = 1000
"""A longer run without a sentence end is read in pieces of this many characters (bounded work per
sentence: a proposal sentence is compared with at most a few original sentences of this size)."""
MIN_CHARS = 16
"""A piece shorter than this joins the sentence before it (the next one at the start of the text):
a fragment is no sentence of its own. It also bounds the work per character on texts of nothing
but sentence ends (a sentence takes tails only up to :data:`MAX_SENTENCE`: copying it per tail
stays bounded)."""


def sentences(text: str) -> list[str]:
    """Sentences and clauses: paragraphs and bullets apart, wrapped lines joined, a sentence ending
    at ``.!?`` (and one closing quote or bracket) before a space and not a lowercase letter nor an
    arrow (an example's answer: '"Where is it?" → WISMO'; nor after "e.g.", "i.e.", "vs.",
    "incl.", "approx."), a
    clause at ``;``; a piece under :data:`MIN_CHARS` joins the next. One regex split whose
    matches start only at a line break or after a fixed-width lookbehind: linear."""
    out: list[str] = []
    pending = ""
    for raw in _END.split(_line_breaks(text)):
        part = " ".join(raw.split())
        if not part:
            continue
        if len(part) <= 4 and part[:-1].isdigit() and part[-1] in ".)":
            continue  # a list item's number ("2."): no sentence, and no number the item states
        if len(part) < MIN_CHARS and out and not pending and len(out[-1]) < MAX_SENTENCE:
            out[-1] = f"{out[-1]} {part}"  # a short tail ("else accept.") belongs to the clause before
            continue
        pending = f"{pending} {part}" if pending else part
        if len(pending) >= MIN_CHARS:
            out.append(pending)
            pending = ""
    if pending:
        out.append(pending)
    if any(len(t) > MAX_SENTENCE for t in out):
        out = [c for t in out for c in _chunks(t)]
    return out


class Examples(list[str]):
    """Sentences, each example's answer line joined to the example before it (:func:`examples`)."""

    answers: set[str]


def examples(texts: Sequence[str]) -> Examples:
    """``texts`` with an answer line ("Answer: ...", "Output: ...") joined to the example line
    before it (one that opens with ``Word:`` or ends in a quote), and an example line's clauses
    (split at ";") joined again: an example and its answer are one unit, so an answer moved to
    another example is a label changed, not the same sentence."""
    out = Examples()
    out.answers = set()
    for t in texts:
        head, colon, _ = t[:24].partition(":")
        prev = out[-1] if out else ""
        if (
            prev.endswith(";")
            and prev not in out.answers
            and _opens_example(prev)
            and len(prev) < MAX_SENTENCE
        ):
            out[-1] = f"{prev} {t}"  # 'Input: licence: no; weekends: no → Output: FAIL': one example
            if _answered(out[-1]):
                out.answers.add(out[-1])
            continue
        if (
            colon
            and head.strip().lower() in EXAMPLE_LINE
            and prev
            and prev not in out.answers
            and len(prev) < MAX_SENTENCE
            and (prev.rstrip().endswith(('"', "\u201d")) or ":" in prev[:24])
        ):
            out[-1] = f"{prev} {t}"
            out.answers.add(out[-1])
        else:
            out.append(t)
            if colon and head.strip().lower() in INPUT_LINE and _answered(t):
                out.answers.add(t)  # 'Input: "..." Output: RFD-201' on one line
    return out


_QUOTES = "\"'\u201c\u2018"
_MAPS = ("\u2192", "->", "=>", "\u21d2")
"""Arrows: a line that maps ('"Late again." → NEG') is one example or rule, the next line another
unless it opens in lowercase with no arrow of its own (the mapping's own words wrapped)."""
SHORT_LINE = 60
"""A line shorter than this that ends without punctuation, followed by a line opening with a
capital, is a line of its own (a list item, an example's answer), not prose wrapped."""


def _line_breaks(text: str) -> str:
    """``text`` with a blank line after each short unpunctuated line that a capitalised line (or
    a quote opening with a capital) follows ("Output: FAIL" / "An applicant passes only if ...",
    '"Late again." → NEG' / '"Great fit!" → POS'), and after each line with an arrow that a line
    with an arrow, or not opening in lowercase, follows: one pass over the lines."""
    if "\n" not in text:
        return text
    lines = text.split("\n")
    out = [lines[0]]
    for prev, line in pairwise(lines):
        end = prev.rstrip()
        head = line.lstrip()[:2]
        opens = head[:1].isupper() or (head[:1] in _QUOTES and head[1:2].isupper())
        short = end and len(end) < SHORT_LINE and end[-1].isalnum() and opens
        mapped = any(a in end for a in _MAPS) and (not head[:1].islower() or any(a in line for a in _MAPS))
        if short or (head and mapped):
            out.append("")
        out.append(line)
    return "\n".join(out)


def _opens_example(text: str) -> bool:
    """A line that opens with an example's input ("Input:", "Example:", "Q:")."""
    head, colon, _ = text[:24].partition(":")
    return bool(colon) and head.strip().lower() in INPUT_LINE


def _answered(text: str) -> bool:
    """An example line that carries its own answer after the input ("Input: ... Output: X",
    'Example: "..." → AUTO')."""
    low = text[:MAX_SENTENCE].lower()
    return any(f" {w}:" in low for w in EXAMPLE_LINE) or any(a in low for a in _MAPS)


def _chunks(text: str) -> list[str]:
    """``text`` in pieces of at most :data:`MAX_SENTENCE` characters, cut at a space when there is
    one: every sentence is bounded, so the work per proposal sentence against its sources is."""
    out: list[str] = []
    start = 0
    while len(text) - start > MAX_SENTENCE:
        cut = text.rfind(" ", start + MAX_SENTENCE // 2, start + MAX_SENTENCE)
        cut = cut if cut > start else start + MAX_SENTENCE
        out.append(text[start:cut])
        start = cut + 1 if text[cut : cut + 1] == " " else cut
    out.append(text[start:])
    return out


__all__ = ["MAX_SENTENCE", "MIN_CHARS", "Examples", "examples", "sentences"]
