"""Rule-based section compression: deterministic, offline, pure.

What it does to a body, in order:

1. drops filler phrases ("please note that", "it is important to", "in order to" -> "to", ...),
   matched case-insensitively on word boundaries, re-capitalizing a sentence start it exposes;
2. drops a sentence that repeats an earlier one of the same body (compared case- and
   whitespace-insensitively);
3. collapses runs of spaces and tabs, and of blank lines, and strips trailing spaces.

It never touches ``${param}`` placeholders and keeps the line structure (bullets stay bullets),
so it is safe but modest; the LLM strategy is the one that rewrites.
"""

from __future__ import annotations

import re

# (pattern, replacement). Longer phrases first so "it is very important to" wins over "to".
FILLER_PHRASES: tuple[tuple[str, str], ...] = (
    (r"please (?:be aware|note|keep in mind|remember) that\s+", ""),
    (r"(?:it is|it's) (?:very |extremely |really )?important to note that\s+", ""),
    (r"(?:it is|it's) (?:very |extremely |really )?important to\s+", ""),
    (r"(?:it should be noted|it is worth noting|it is worth mentioning) that\s+", ""),
    (r"as (?:previously|already) (?:mentioned|stated|noted),?\s+", ""),
    (r"needless to say,?\s+", ""),
    (r"at (?:all times|the end of the day)(?=[\s.,;])", ""),
    (r"in order to\b", "to"),
    (r"due to the fact that\b", "because"),
    (r"for the purpose of\b", "for"),
    (r"in the event that\b", "if"),
    (r"at this point in time\b", "now"),
    (r"with regard to\b", "about"),
    (r"in a timely manner\b", "promptly"),
    (r"(?:basically|essentially|actually),?\s+(?=\w)", ""),
    (r"make sure (?:that )?you\s+", ""),
    (r"you (?:should|must) always\s+", "always "),
)

_COMPILED = tuple((re.compile(rf"\b{p}", re.IGNORECASE), r) for p, r in FILLER_PHRASES)
_ANY_FILLER = re.compile("|".join(rf"\b{p}" for p, _ in FILLER_PHRASES), re.IGNORECASE)
"""One look for any filler: a sentence without one skips the phrase-by-phrase substitutions (a body
of many short lines or sentences cost 17 substitutions each, several seconds per megabyte)."""
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=\S)")
_PLACEHOLDER = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")


def compress_text(body: str) -> str:
    """The body with filler phrases and repeated sentences removed and whitespace collapsed."""
    seen: set[str] = set()
    out_lines: list[str] = []
    for line in body.splitlines():
        if not line.strip():
            out_lines.append("")
            continue
        kept: list[str] = []
        for sentence in _SENTENCE.split(line):
            short = _drop_fillers(sentence)
            key = " ".join(short.split()).casefold().strip(" -*")
            if key and key in seen:
                continue
            if key:
                seen.add(key)
            kept.append(short)
        text = " ".join(s for s in kept if s.strip())
        text = re.sub(r"[ \t]+", " ", text).rstrip()
        if not text.strip() and line.strip():
            continue  # the whole line was a repeat
        out_lines.append(text)
    result = "\n".join(out_lines)
    return re.sub(r"\n{3,}", "\n\n", result).strip("\n")


def _drop_fillers(sentence: str) -> str:
    if _ANY_FILLER.search(sentence) is None:
        return re.sub(r"[ \t]{2,}", " ", sentence)
    out = sentence
    for pattern, repl in _COMPILED:
        out = _sub_keep_placeholders(pattern, repl, out)
    out = re.sub(r"[ \t]{2,}", " ", out)
    return _recapitalize(sentence, out)


def _sub_keep_placeholders(pattern: re.Pattern[str], repl: str, text: str) -> str:
    if "${" not in text:
        return pattern.sub(repl, text)
    # Substitute only between placeholders so a ``${name}`` is never altered.
    parts: list[str] = []
    last = 0
    for m in _PLACEHOLDER.finditer(text):
        parts.append(pattern.sub(repl, text[last : m.start()]))
        parts.append(m.group(0))
        last = m.end()
    parts.append(pattern.sub(repl, text[last:]))
    return "".join(parts)


def _recapitalize(before: str, after: str) -> str:
    """If a filler removed the start of a sentence, capitalize the new first letter."""
    b = before.lstrip(" -*\t")
    a = after.lstrip(" -*\t")
    if not a or not b or not b[0].isupper() or a[0].isupper():
        return after
    prefix = after[: len(after) - len(a)]
    return prefix + a[0].upper() + a[1:]


__all__ = ["FILLER_PHRASES", "compress_text"]
