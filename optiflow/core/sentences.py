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
    r"[ \t\n]+(?![ \t\na-z])|(?<=;)[ \t\n]+(?![ \t\n])"
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
    at ``.!?`` (and one closing quote or bracket) before a space and not a lowercase letter (nor
    after "e.g.", "i.e.", "vs.", "incl.", "approx."), a
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
    before it (one that opens with ``Word:`` or ends in a quote): an example and its answer are
    one unit, so an answer moved to another example is a label changed, not the same sentence."""
    out = Examples()
    out.answers = set()
    for t in texts:
        head, colon, _ = t[:24].partition(":")
        prev = out[-1] if out else ""
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


SHORT_LINE = 60
"""A line shorter than this that ends without punctuation, followed by a line opening with a
capital, is a line of its own (a list item, an example's answer), not prose wrapped."""


def _line_breaks(text: str) -> str:
    """``text`` with a blank line after each short unpunctuated line that a capitalised line
    follows ("Output: FAIL" / "An applicant passes only if ..."): one pass over the lines."""
    if "\n" not in text:
        return text
    lines = text.split("\n")
    out = [lines[0]]
    for prev, line in pairwise(lines):
        end = prev.rstrip()
        if end and len(end) < SHORT_LINE and end[-1].isalnum() and line.lstrip()[:1].isupper():
            out.append("")
        out.append(line)
    return "\n".join(out)


def _answered(text: str) -> bool:
    """An example line that carries its own answer after the input ("Input: ... Output: X")."""
    low = text[:MAX_SENTENCE].lower()
    return any(f" {w}:" in low for w in EXAMPLE_LINE)


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
