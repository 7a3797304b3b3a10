"""What the simulated model answers to judges (pure string work, linear in the request):
the score judge (``<expected>`` in ``<output>``) and the faithfulness judge (``<a>`` and ``<b>``
impose the same instructions when every meaning-bearing word of A is in B). The tag readers are
shared with :mod:`optiflow.llm.simulated`."""

from __future__ import annotations

import json

from optiflow.core.reading import Reader
from optiflow.core.sentences import sentences


def tagged(text: str, tag: str, *, last: bool = False) -> str | None:
    """The text between ``<tag>`` and ``</tag>`` (the first closing one; ``last``: the last), by
    plain string search: a regex ``<tag>(.*?)</tag>`` rescans to the end from every unclosed tag."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    i = text.find(opening)
    if i < 0:
        return None
    j = text.rfind(closing) if last else text.find(closing, i + len(opening))
    if j < i + len(opening):
        return None
    return text[i + len(opening) : j]


def all_tagged(text: str, tag: str) -> list[str]:
    opening, closing = f"<{tag}>", f"</{tag}>"
    out: list[str] = []
    i = text.find(opening)
    while i >= 0:
        j = text.find(closing, i + len(opening))
        if j < 0:
            break
        out.append(text[i + len(opening) : j])
        i = text.find(opening, j + len(closing))
    return out


def norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def judge_reply(user: str) -> str:
    expected = tagged(user, "expected")
    output = tagged(user, "output", last=True)
    if expected is None or output is None:
        return json.dumps({"score": 0.0, "reason": "no <expected> or <output> to compare"})
    want = norm(expected)
    ok = bool(want) and want in norm(output)
    reason = "the output contains the expected answer" if ok else "the expected answer is missing"
    return json.dumps({"score": 1.0 if ok else 0.0, "reason": reason})


def same_reply(user: str) -> str:
    """The faithfulness judge's answer: text B imposes the same instructions as text A when every
    meaning-bearing word of A (negations, exceptions, only, numbers, codes, placeholders, labels
    stated outside quotes: :mod:`optiflow.core.provenance`) is in B."""
    a, b = tagged(user, "a"), tagged(user, "b", last=True)
    if a is None or b is None:
        return json.dumps({"same": False, "reason": "no <a> or <b> to compare"})
    missing = sorted(_meaning(a) - _meaning(b))
    if missing:
        return json.dumps({"same": False, "reason": f"B lacks {', '.join(missing[:5])}"})
    return json.dumps({"same": True, "reason": "B keeps every negation, number, code and label of A"})


def _meaning(text: str) -> set[str]:
    reader = Reader(())
    out: set[str] = set()
    for t in sentences(text):
        out.update(k for k in reader.read(t).markers if k in ("neg", "exc", "only") or ":" in k)
    return {k for k in out if not k.startswith("q")}


__all__ = ["all_tagged", "judge_reply", "norm", "same_reply", "tagged"]
