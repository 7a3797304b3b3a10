"""Which samples an edit most likely breaks: the probe a guarded evaluation starts with (pure).

An edit that deletes text mostly hurts the samples that text was about: drop the sentence on
double charges and the questions on double charges fail first. So a set of edits is probed on
the samples whose input shares the most *rare* words with one sentence the set removes — the
sum of the shared words' inverse document frequency over the dataset's inputs, best sentence
wins — before its other evaluations are spent. Words every input uses weigh nothing; a sample
that shares no word with any removed sentence is never in the probe.

It is a prior, not a proof: the gate decides on every evaluation as before. A probe that misses
the regressing sample costs what fail-fast cost without it; one that finds it stops the set
after a handful of model calls even when hundreds of evaluations were queued at once.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from optiflow.core.base import JSONValue
from optiflow.core.dataset import Sample

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[^\W_]+")
_STOPWORDS = frozenset(
    {
        *("a", "an", "the", "my", "your", "our", "their", "his", "her", "its", "any", "some", "of"),
        *("for", "to", "about", "with", "on", "in", "at", "by", "from", "or", "and", "is", "are"),
        *("was", "were", "be", "been", "am", "do", "does", "did", "have", "has", "had", "that"),
        *("this", "these", "those", "it", "i", "me", "we", "you", "he", "she", "they", "them"),
        *("us", "can", "could", "would", "should", "will", "not", "no", "if", "so", "as", "but"),
        *("how", "what", "why", "when", "where", "who", "which", "there", "here", "than", "then"),
        *("just", "also", "very"),
    }
)


def words(text: str) -> frozenset[str]:
    """Lowercase content words, a plural ``s`` dropped from words longer than three letters."""
    out = set()
    for w in _WORD.findall(text.lower()):
        if w in _STOPWORDS:
            continue
        out.add(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
    return frozenset(out)


def sentences(text: str) -> frozenset[str]:
    """A body's sentences with whitespace normalized (wrapped lines joined)."""
    joined = " ".join(text.split())
    return frozenset(s for s in _SENTENCE_END.split(joined) if s)


def removed_sentences(edits: Iterable[tuple[str, str]]) -> frozenset[str]:
    """The sentences ``(before, after)`` body pairs drop."""
    out: set[str] = set()
    for before, after in edits:
        out |= sentences(before) - sentences(after)
    return frozenset(out)


def sample_text(value: JSONValue) -> str:
    """Every string (and number) in a sample's input, joined: the words a question carries."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping | list | tuple):
        parts = (sample_text(v) for v in (value.values() if isinstance(value, Mapping) else value))
        return " ".join(p for p in parts if p)
    return "" if value is None or isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class Relevance:
    """The dataset's inputs as word sets, with each word's weight (made once per job)."""

    samples: Sequence[Sample]

    @cached_property
    def _words(self) -> dict[str, frozenset[str]]:
        return {s.id: words(sample_text(s.input)) for s in self.samples}

    @cached_property
    def _idf(self) -> dict[str, float]:
        df = Counter(w for ws in self._words.values() for w in ws)
        n = len(self.samples)
        return {w: math.log(n / c) for w, c in df.items()}

    def scores(self, removed: Iterable[str], sample_ids: Iterable[str]) -> dict[str, float]:
        """Each sample's best overlap with one removed sentence (0.0: none)."""
        removed_words = [words(s) for s in removed]
        out = {}
        for sid in sample_ids:
            mine = self._words.get(sid, frozenset())
            out[sid] = max((sum(self._idf[w] for w in mine & r) for r in removed_words), default=0.0)
        return out

    def probe(self, removed: Iterable[str], sample_ids: Sequence[str], size: int) -> tuple[str, ...]:
        """Up to ``size`` of ``sample_ids`` that the removed sentences concern most, best first
        (ties in ``sample_ids`` order); none when nothing removed concerns any of them."""
        scores = self.scores(removed, sample_ids)
        ranked = sorted((sid for sid in sample_ids if scores[sid] > 0), key=lambda s: -scores[s])
        return tuple(ranked[:size])


def probe_size(watched: int) -> int:
    """How many samples a probe holds: the square root of the samples fail-fast watches, so a
    bigger dataset gets a wider probe while a probe stays a small part of the work."""
    return math.ceil(math.sqrt(watched)) if watched > 0 else 0


__all__ = ["Relevance", "probe_size", "removed_sentences", "sample_text", "sentences", "words"]
