"""Sentence-level provenance of a compression, and the meaning-bearing words it must keep (pure).

A bag-of-words check passes "Do not share order numbers." → "Share order numbers." (the negation
is a stop word), a changed number or code, two labels exchanged, and a rule dropped outright
(issue 31). This module reads both texts sentence by sentence:

1. **Split** the original and the proposal into sentences and clauses
   (:mod:`optiflow.core.sentences`: at ``.!?`` before a capital, at ``;``, at lines).
2. **Align** each proposal sentence with the original sentence(s) it comes from: candidates are
   the original sentences sharing its rarer words, found through an inverted index (a word in more
   than :data:`COMMON` original sentences does not vote), at most :data:`CANDIDATES` per sentence;
   the best becomes its source, and further candidates join (a merge) while they add support and
   keep enough of their own words. So every step is a bounded number of dict lookups per word:
   linear in the two texts, never sentence x sentence.
3. **Mark** each original sentence kept (the sole source of a proposal sentence), merged (one of
   several sources), or dropped.
4. **Compare the meaning-bearing words** of every kept sentence with the proposal sentences made
   from it, and of every proposal sentence with its sources (:func:`markers`): negations
   (not, no, never, n't, without, cannot, avoid…), exceptions (except, unless), restriction (only),
   modal force (must/always > should > may), numbers with their unit, codes and identifiers
   (``RFD-201``, ``GDPR``), placeholders, answer labels, and which label goes with which condition
   words (a label-condition pair swapped). Words inside double quotes are examples: their
   negations, modals, numbers and labels do not count (their codes and placeholders do).
5. **Dropped rules**: a dropped original sentence that carries an obligation or prohibition
   (a negation, must/always/should/required/never, only, except/unless), a number or a code is a
   rule the proposal removes.

Nothing here decides; :func:`optiflow.core.faithfulness.check` turns the findings into a verdict.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Literal

from optiflow.core import clauses
from optiflow.core.base import Frozen
from optiflow.core.sentences import examples, sentences
from optiflow.core.vocabulary import (
    AUXILIARY,
    AVOID,
    CONDITIONAL,
    EMPHASIS,
    EXAMPLE_LINE,
    EXCEPTION,
    LEADERS,
    NEGATION,
    NOT_AFTER_COMMA,
    NOT_PREFIXED,
    NUMBER_WORDS,
    ONLY,
    ORDERING,
    ORDERS,
    PERMIT,
    PROHIBIT,
    QUOTES,
    SEPARATORS,
    SHOULD,
    STOPWORDS,
    STRONG,
    VERDICT,
    stem,
    unit_word,
)

COMMON = 24
"""A word in more original sentences than this does not vote for a proposal sentence's source."""
CANDIDATES = 6
"""At most this many candidate sources are weighed per proposal sentence."""
MAX_SOURCES = 4
"""A proposal sentence merges at most this many original sentences."""
MERGE_GAIN = 0.15
"""A further source joins a proposal sentence when it adds at least this share of its weight..."""
STRICT_NEGATION = False
"""Also refuse a kept sentence that keeps fewer prohibitions than it had and states a prohibited
word un-negated ("do not let X influence you, and do not judge" -> "let X influence you, and do
not judge"). Off: without parts of speech it also refused honest merges of prohibitions on the
suite ("Avoid exclamation marks in excess and never use emojis" -> "No emojis; few exclamation
marks"); measured both ways in the report of issue 31."""
MARKER_SOURCES = 16
"""At most this many sentences join a proposal sentence for its numbers, codes and labels (a list
of codes merged from as many rules)."""
MARKER_KEEP = 0.2
"""A sentence stating a proposal sentence's number, code or label joins its sources when the
proposal sentence keeps at least this share of its other words (else the marker moved: a swap)."""
MERGE_KEEP = 0.25
"""...and the proposal sentence keeps at least this share of the source's own weight."""
SHOWN = 160
"""Characters of a sentence kept in the map (the report shows the map, not the texts again)."""
MAP_LIMIT = 100
"""Sentences of each text kept in the map (a section has tens; the rest are counted, not listed)."""
FINDINGS = 50
"""Findings kept (the verdict names the first; the report lists the dropped rules)."""

_TOKEN = re.compile(
    r"\$\{\w+\}|\d+(?:[.,]\d+)*[\w%'\u2019-]*|[^\W\d_][\w'\u2019-]*|[,;:\"\u201c\u201d()\u2264\u2265]|[<>]=?"
)
_ARROWS = str.maketrans({"\u2192": ":", "\u2019": "'"})


@dataclass(slots=True)
class Sentence:
    """One sentence or clause, read: its content words (stemmed, labels and markers apart) and its
    meaning-bearing words."""

    text: str
    words: set[str] = field(default_factory=set)
    markers: dict[str, str] = field(default_factory=dict)
    """Marker key -> how it reads in the text (``neg`` -> "not", ``num:14 day`` -> "14 days")."""
    modal: set[int] = field(default_factory=set)
    """Modal force present: 3 must/always, 2 should, 1 may."""
    bindings: dict[str, set[str]] = field(default_factory=dict)
    """Condition word -> the labels its clause states (a clause stating exactly one label)."""
    lead: str = ""
    """Its first word(s), lowercased: an instruction verb there makes it an order."""
    negated: set[str] = field(default_factory=set)
    """The words a prohibition governs (the first content word after it: "do not *add*")."""
    plain: set[str] = field(default_factory=set)
    """Its other content words."""
    negations: int = 0
    """How many prohibitions it states (a proposal sentence keeping fewer dropped one)."""
    prohibits: bool = False
    """A negation in the form of a prohibition (never, avoid, do not, don't, must not, no ... at
    the start), not a description ("read by a program and not by a person")."""
    clause_order: str = ""
    """An instruction verb opening a later clause ("When a customer asks, reply ..."): an order."""
    defines: bool = False
    """It states a label as a verdict ("is positive", "as negative", "positive:")."""

    @property
    def rule(self) -> str:
        """What makes it a rule (empty: none): its first prohibition, exception, restriction,
        number or code; its modal obligation; an order (:data:`ORDERS`); a label it states (not in
        an example answer line such as ``Answer: ...``)."""
        for key, shown in self.markers.items():
            kind = key.split(":", 1)[0]
            if (kind in ("num", "code") and "${" not in key) or (
                kind == "label" and any(c.isdigit() for c in key)
            ):
                return shown  # a label like RFD-201 is a code
        if self.prohibits:
            return self.markers.get("neg", "not")
        verb = self.lead.split(" ", 1)[0]
        order = (verb in ORDERS and not self.lead.startswith(("keep in", "note ", "thank you"))) or bool(
            self.clause_order
        )
        verb = verb if verb in ORDERS else self.clause_order
        if order or self.modal & {2, 3}:
            for key in ("neg", "exc", "only", "modal"):
                if key in self.markers:
                    return self.markers[key]
        if order:
            return verb
        if self.lead.split(" ", 1)[0] in CONDITIONAL:
            return self.lead.split(" ", 1)[0]  # "If several apply, the first one wins"
        if self.defines and not self.lead.endswith(":"):
            for key, shown in self.markers.items():
                if key.startswith("label:"):
                    return shown
        return ""


def _label_grams(labels: Sequence[str]) -> dict[tuple[str, ...], str]:
    out: dict[tuple[str, ...], str] = {}
    for lab in labels:
        toks = tuple(t.lower() for t in _TOKEN.findall(lab) if t not in SEPARATORS)
        if 1 <= len(toks) <= 3:
            out[toks] = lab
    return out


def _tokens(text: str) -> list[str]:
    """The words, numbers, placeholders and punctuation of ``text``; an arrow ("->", "=>", "→")
    reads as the colon it stands for, not as "greater than"."""
    return _TOKEN.findall(text.replace("->", ":").replace("=>", ":").translate(_ARROWS))


_MAY_BE = frozenset({"be", "have"})
"""After "may": a possibility ("may be read later"), not a permission."""
_Kind = tuple[str, str, str, int, str, str]
"""A token's (kind, lowered, stem or value, modal force, marker key, unit written into it)."""


class Reader:
    """Reads sentences of one text pair: each distinct token classified once (a dict lookup per
    token after that), labels matched by their words."""

    def __init__(self, labels: Sequence[str]) -> None:
        grams = _label_grams(labels)
        self.single = {g[0]: lab for g, lab in grams.items() if len(g) == 1}
        self.multi = {g: lab for g, lab in grams.items() if len(g) > 1}
        self.first = {g[0] for g in self.multi}
        self.longest = max((len(g) for g in self.multi), default=0)
        self.cache: dict[str, tuple[str, str, str, int, str, str]] = {}
        self.quoted = False

    def kind(self, tok: str) -> tuple[str, str, str, int, str, str]:
        """(kind, lowered, stem or value, modal force, marker key, unit written into it) of a token."""
        low = tok.lower()
        if tok in QUOTES:
            return ("quote", low, "", 0, "", "")
        if tok[0] in "<>\u2264\u2265":
            return ("stop", low, "", 0, "", "")  # a comparison: its direction is read by clauses
        if low in SEPARATORS:
            return ("sep", low, "", 0, "", "")
        if low in self.single:
            lab = self.single[low]
            return ("label", low, lab, 0, f"label:{lab}", "")
        if tok.startswith("${"):
            return ("code", low, tok, 0, f"code:{tok}", "")
        digit = any(c.isdigit() for c in tok)
        if (digit and not tok[0].isdigit()) or (
            tok.isupper() and sum(c.isalpha() for c in tok) >= 2 and tok not in EMPHASIS
        ):
            return ("code", low, tok.upper(), 0, f"code:{tok.upper()}", "")
        if tok[0].isdigit():
            j = 0
            while j < len(tok) and (tok[j].isdigit() or tok[j] in ".,"):
                j += 1
            value, rest = tok[:j].rstrip(".,"), tok[j:].lstrip("-")
            if rest and rest.isupper():
                return ("code", low, tok.upper(), 0, f"code:{tok.upper()}", "")
            return (
                "num",
                low,
                value,
                0,
                f"num:{value}",
                unit_word(rest) or ("percent" if rest == "%" else ""),
            )
        if low in NUMBER_WORDS:
            return ("numword", low, NUMBER_WORDS[low], 0, f"num:{NUMBER_WORDS[low]}", "")
        force = 3 if low in STRONG else 2 if low in SHOULD else 1 if low in PERMIT else 0
        if low in NEGATION or low.endswith("n't"):
            return ("neg", low, "", force, "neg", "")
        if low in EXCEPTION:
            return ("exc", low, stem(low), 0, "exc", "")
        if low in AVOID:
            return ("avoid", low, stem(low), 0, "neg", "")
        if low in ONLY:
            return ("only", low, "", 0, "only", "")
        if low in STOPWORDS or len(low) < 2:
            return ("stop", low, "", force, "", "")
        if len(low) > 6 and low.startswith(("un", "non")) and not low.startswith(NOT_PREFIXED):
            return ("word", low, stem(low), force, "qneg", "")  # "unconfirmed": a negation told in a word
        return ("word", low, stem(low), force, "", "")

    def _label_at(self, kinds: list[tuple[str, str, str, int, str, str]], i: int) -> tuple[str, int]:
        for n in range(min(self.longest, len(kinds) - i), 1, -1):
            lab = self.multi.get(tuple(k[1] for k in kinds[i : i + n]), "")
            if lab:
                return lab, n
        return "", 0

    def read(self, text: str) -> Sentence:
        """One sentence's words and markers, in one pass over its tokens (a double quote left open
        runs on into the next sentence)."""
        s = Sentence(text=text)
        markers, words = s.markers, s.words
        tokens = _tokens(text)
        kinds = self._kinds(tokens)
        bind = any(
            k[0] == "label" or k[1] in self.first or (k[0] == "code" and k[1][0] != "$") for k in kinds
        )
        _lead(s, kinds)
        segments: list[tuple[set[str], set[str]]] = [(set(), set())]
        quoted = self.quoted
        n_tok = len(tokens)
        scope = 0  # tokens left in which a content word is governed by a negation
        i = 0
        while i < n_tok:
            kind, low, value, force, key, _inline = kinds[i]
            if kind == "word":
                if not quoted and force and not (force == 1 and i + 1 < n_tok and kinds[i + 1][1] in _MAY_BE):
                    s.modal.add(force)
                    markers.setdefault("modal", tokens[i])
                if key:
                    markers.setdefault(key, tokens[i])
                if scope and not quoted:
                    s.negated.add(value)
                    scope = 0
                else:
                    s.plain.add(value)
                words.add(value)
                if bind:
                    segments[-1][1].add(value)
                i += 1
                continue
            if kind == "stop":
                scope = max(scope - 1, 0)
                if not quoted and force:
                    s.modal.add(force)
                    markers.setdefault("modal", tokens[i])
                i += 1
                continue
            tok = tokens[i]
            if kind == "quote":
                quoted = not quoted if tok == '"' else tok == "\u201c"
            elif kind == "sep":
                if tok == "," and i + 1 < n_tok and not s.clause_order:
                    nxt = kinds[i + 1][1]
                    if nxt in ORDERS and nxt not in NOT_AFTER_COMMA:
                        s.clause_order = nxt
                if bind:
                    segments.append((set(), set()))
            elif kind == "label" or (bind and low in self.first):
                n = 1
                if kind != "label":
                    value, n = self._label_at(kinds, i)
                    if not value:
                        kind = "word"
                if value:
                    if not quoted:
                        markers[f"label:{value}"] = value
                        segments[-1][0].add(value)
                        before = kinds[i - 1][1] if i else ""
                        after = kinds[i + n][1] if i + n < n_tok else ""
                        if before in VERDICT or after == ":":
                            s.defines = True
                    else:
                        markers[f"qlabel:{value}"] = value
                    words.add("=" + value.lower())
                    i += n
                    continue
                if low not in STOPWORDS and len(low) > 1:
                    words.add(stem(low))
            elif kind == "avoid":
                before = kinds[i - 1][1] if i else ""
                if not quoted and (
                    i == 0 or before in ORDERING or (before == "to" and i > 1 and kinds[i - 2][1] == "try")
                ):
                    markers.setdefault(key, tok)
                    scope = 4
                    s.negations += 1
                    s.prohibits = True
                words.add(value)
            elif kind == "code":
                markers[key] = tok
                if tok[0] != "$":
                    words.add(low)
                    if bind and not quoted:
                        segments[-1][0].add(value)  # a code goes with its condition as a label does
            elif kind in ("num", "numword"):
                _number(s, tokens, i, kinds[i], quoted=quoted)
            else:  # neg, exc, only
                if not quoted:
                    markers.setdefault(key, tok)
                    if kind == "neg":
                        before = kinds[i - 1][1] if i else ""
                        if (
                            low in PROHIBIT
                            or low.endswith("n't")
                            or before in AUXILIARY
                            or before in ORDERS
                            or i == 0
                        ):
                            s.prohibits = True
                            s.negations += 1
                            scope = 3
                    if force:
                        s.modal.add(force)
                        markers.setdefault("modal", tok)
                if kind == "exc":
                    words.add(value)
                    if bind:
                        segments[-1][1].add(value)
            i += 1
        self.quoted = quoted
        if bind:
            _bind(s, segments)
        return s

    def _kinds(self, tokens: list[str]) -> list[_Kind]:
        """Each token's kind tuple (:meth:`kind`), through the reader's cache."""
        return [self.cached(t) for t in tokens]

    def cached(self, tok: str) -> _Kind:
        k = self.cache.get(tok)
        if k is None:
            k = self.cache[tok] = self.kind(tok)
        return k


def _lead(s: Sentence, kinds: Sequence[_Kind]) -> None:
    """The sentence's first words past its leaders (an example line's label and colon), and
    whether it opens with a prohibition ("No …", "Without …")."""
    lead = [k[1] for k in kinds[:5] if k[0] != "quote"]
    while lead and lead[0] in LEADERS:
        lead.pop(0)
    if lead:
        example = len(lead) > 1 and lead[1] == ":" and lead[0] in EXAMPLE_LINE
        s.lead = lead[0] + ":" if example else " ".join(lead[:2])
        if lead[0] in ("no", "without"):
            s.prohibits = True


def _number(s: Sentence, tokens: Sequence[str], i: int, kind_of: _Kind, *, quoted: bool) -> None:
    """A number (digits, or a number word with a unit) and its unit, as markers and words."""
    kind, _low, value, _force, key, inline = kind_of
    tok, n_tok = tokens[i], len(tokens)
    unit = inline or (unit_word(tokens[i + 1]) if i + 1 < n_tok else "")
    if kind == "numword":
        s.markers.setdefault("q" + key, tok)  # "one" may be a number: it makes one stated
    if not quoted and (kind == "num" or unit):
        s.markers[key] = tok
        if unit:
            shown = tok if inline or i + 1 >= n_tok else f"{tok} {tokens[i + 1]}"
            s.markers[f"{key} {unit}"] = shown
    if kind == "num":
        s.words.add(value)


def _bind(s: Sentence, segments: list[tuple[set[str], set[str]]]) -> None:
    """Which condition words go with which label: a clause stating exactly one label binds its
    words to it; a clause of labels alone ("positive or negative") joins the clause before it."""
    merged: list[tuple[set[str], set[str]]] = []
    for labs, words in segments:
        if not labs and not words:
            continue
        if labs and not words and merged:
            merged[-1][0].update(labs)
            continue
        merged.append((set(labs), set(words)))
    for labs, words in merged:
        if len(labs) == 1:
            (lab,) = labs
            for w in words:
                s.bindings.setdefault(w, set()).add(lab)


class OriginalSentence(Frozen):
    """An original sentence and what became of it."""

    text: str
    status: Literal["kept", "merged", "dropped"]
    into: tuple[int, ...] = ()
    """The proposal sentences made from it (0-based)."""
    rule: str = ""
    """What makes it a rule ("" when none): its obligation, prohibition, number or code."""


class ProposalSentence(Frozen):
    """A proposal sentence and where it comes from."""

    text: str
    sources: tuple[int, ...] = ()
    """The original sentences it comes from (0-based; empty: none found)."""
    support: float = 0.0
    """Weighted share of its content words found in its sources."""


class SentenceMap(Frozen):
    """The provenance of a proposal: every original sentence kept, merged or dropped, every
    proposal sentence with its sources."""

    original: tuple[OriginalSentence, ...] = ()
    proposal: tuple[ProposalSentence, ...] = ()
    """The first :data:`MAP_LIMIT` of each (``*_count``: how many there are)."""
    original_count: int = 0
    proposal_count: int = 0
    min_support: float = 1.0
    """The lowest support of a proposal sentence."""

    def dropped(self) -> tuple[OriginalSentence, ...]:
        return tuple(o for o in self.original if o.status == "dropped")


@dataclass(frozen=True)
class Finding:
    """A meaning-bearing word lost, changed or added in a kept sentence, or a rule dropped."""

    kind: Literal["changed", "dropped rule", "unsupported"]
    reason: str


def _short(text: str) -> str:
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "\u2026"


def _weight(word: str, df: dict[str, int], n: int) -> float:
    return math.log((n + 1) / (df.get(word, 0) + 0.5)) + 1.0


def align(
    original: Sequence[Sentence], proposal: Sequence[Sentence]
) -> tuple[list[tuple[int, ...]], list[float]]:
    """Each proposal sentence's sources and support (see the module docstring, step 2)."""
    postings: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(original):
        for w in s.words:
            bucket = postings[w]
            if len(bucket) <= COMMON:
                bucket.append(i)
    n = len(original)
    df = {w: len(b) for w, b in postings.items()}
    sources: list[tuple[int, ...]] = []
    supports: list[float] = []
    for p in proposal:
        weights = {w: _weight(w, df, n) for w in p.words}
        total = sum(weights.values())
        score: dict[int, float] = defaultdict(float)
        for w in p.words:
            hits = postings.get(w)
            if hits and len(hits) <= COMMON:
                for i in hits:
                    score[i] += weights[w]
        ranked = sorted(score, key=lambda i: (-score[i], i))[:CANDIDATES]
        chosen: list[int] = []
        covered: set[str] = set()
        for i in ranked:
            words = original[i].words
            gain = sum(weights[w] for w in p.words & words if w not in covered)
            if not chosen:
                chosen.append(i)
                covered |= p.words & words
                continue
            if len(chosen) >= MAX_SOURCES or not total or gain / total < MERGE_GAIN:
                continue
            own = {w: _weight(w, df, n) for w in words}
            kept = sum(v for w, v in own.items() if w in p.words)
            if own and kept / sum(own.values()) >= MERGE_KEEP:
                chosen.append(i)
                covered |= p.words & words
        sources.append(tuple(sorted(chosen)))
        supports.append(sum(weights[w] for w in covered) / total if total else 1.0)
    return sources, supports


def _shares(o: Sentence, p: Sentence, known: set[str], unique: bool) -> bool:
    """``p`` keeps at least :data:`MARKER_KEEP` of ``o``'s own words (one of them when the marker
    is stated nowhere else, ``unique``): not the marker itself, not the words ``p``'s sources
    already give it (``known``). "Fraud tickets: RET-120" against "tickets about returns go to
    RET-120" shares only "tickets", which its source about fraud has: the code moved, it did not
    merge. "The review service (since 2021)" shares "service" with the one sentence stating 2021."""
    marked = {k.split(":", 1)[1].lower() for k in o.markers if ":" in k}
    words = {w for w in o.words if not w.startswith("=") and w not in marked and w not in known}
    shared = len(words & p.words)
    return bool(words) and (shared >= MARKER_KEEP * len(words) or (unique and shared >= 1))


def _lost(src: Iterable[Sentence], dst: Iterable[Sentence]) -> list[tuple[str, str]]:
    """Markers of ``src`` (key, as written) missing from ``dst``; a number's unit has a key of its
    own. A label inside quotes (``qlabel``) need not be kept, but makes the label stated."""
    have: set[str] = set()
    for d in dst:
        have.update(d.markers)
    out: list[tuple[str, str]] = []
    for s in src:
        for key, shown in s.markers.items():
            if key in have or key == "modal" or key.startswith("q"):
                continue
            if key in _SCOPE and _excused(key, have):
                continue  # "not ... unless" told as "only ...": one scope word for another
            if key.startswith(("label:", "num:")) and " " not in key and "q" + key in have:
                continue  # stated in quotes (an example answer), or as a word ("five to seven")
            out.append((key, shown))
    return out


_SCOPE = frozenset({"neg", "exc", "only"})


def _excused(key: str, have: set[str]) -> bool:
    """A scope word lost for another that tells the same rule: "never X unless Y" is "X only if
    Y" (a negation or an exception for "only", "only" for either, "unconfirmed" for "not")."""
    if key == "exc":
        return "only" in have
    if key == "neg":
        return "only" in have or "qneg" in have
    return "neg" in have or "exc" in have


_WHAT = {"neg": "the negation", "exc": "the exception", "only": "the restriction"}


def _name(key: str, shown: str) -> str:
    kind = key.split(":", 1)[0]
    if kind in _WHAT:
        return f"{_WHAT[kind]} {shown!r}"
    return {"num": "the number", "code": "the code", "label": "the label"}.get(kind, kind) + f" {shown!r}"


def _modal(src: Sequence[Sentence], dst: Sequence[Sentence], lost: bool) -> str:
    """How the modal force changed from ``src`` to ``dst`` ("" when it did not): what ``src``
    had that ``dst`` lost (``lost``), or what ``dst`` adds."""
    a: set[int] = set()
    b: set[int] = set()
    for s in src:
        a |= s.modal
    for d in dst:
        b |= d.modal
    shown_a = next((s.markers["modal"] for s in src if "modal" in s.markers), "")
    shown_b = next((s.markers["modal"] for s in dst if "modal" in s.markers), "")
    if lost:
        if 1 in a and 1 not in b:
            return f"drops the permission {shown_a!r}" + (f" (now {shown_b!r})" if shown_b else "")
        if 3 in a and 3 not in b and 2 in b:
            return f"weakens {shown_a!r} to {shown_b!r}"
        return ""
    if 1 in b and 1 not in a and 3 in a:
        return f"adds the permission {shown_b!r} where the original says {shown_a!r}"
    if 3 in b and 3 not in a and 2 in a:
        return f"strengthens {shown_a!r} to {shown_b!r}"
    return ""


def _negation_moved(o: Sentence, made: Sequence[Sentence]) -> str:
    """A prohibition of ``o`` whose word the proposal keeps un-negated, while it states fewer
    prohibitions: "do not let X influence you, and do not judge" -> "let X influence you, and do
    not judge". Only words ``o`` uses nowhere else un-negated."""
    if sum(m.negations for m in made) >= o.negations:
        return ""
    words: set[str] = set()
    negated: set[str] = set()
    for m in made:
        words |= m.words
        negated |= m.negated
    for w in sorted((o.negated - o.plain) & words):
        if w not in negated:
            return f"drops the negation of {w!r}"
    return ""


def _swapped(src: Sequence[Sentence], dst: Sentence) -> str:
    bound: dict[str, set[str]] = {}
    for s in src:
        for w, labs in s.bindings.items():
            bound.setdefault(w, set()).update(labs)
    for w, labs in dst.bindings.items():
        was = bound.get(w)
        if was and len(was) == 1 and not (labs & was):
            (old,) = was
            what = "codes" if any(c.isdigit() for c in old) else "labels"
            return f"swaps {what}: {w!r} goes with {sorted(labs)[0]!r} where the original says {old!r}"
    return ""


def _join_marked(
    orig: Sequence[Sentence], prop: Sequence[Sentence], sources: list[tuple[int, ...]], supports: list[float]
) -> None:
    """A proposal sentence's number, code or label joins its sources the original sentence that
    states it, when the proposal sentence shares that sentence's words (:func:`_shares`)."""
    where_marked: dict[str, int] = {}
    times_marked: dict[str, int] = defaultdict(int)
    for i, o in enumerate(orig):
        for key in o.markers:
            if key.startswith(("num:", "code:", "label:")):
                where_marked.setdefault(key, i)
                times_marked[key] += 1
    for j, p in enumerate(prop):
        have = {k for i in sources[j] for k in orig[i].markers}
        known = {w for i in sources[j] for w in orig[i].words}
        extra = {
            where_marked[k]
            for k in p.markers
            if k not in have
            and k in where_marked
            and where_marked[k] not in sources[j]
            and _shares(orig[where_marked[k]], p, known, times_marked[k] == 1)
        }
        if extra and sources[j]:
            sources[j] = tuple(sorted({*sources[j], *sorted(extra)[:MARKER_SOURCES]}))
            union = {w for i in sources[j] for w in orig[i].words}
            if p.words:
                supports[j] = max(supports[j], len(p.words & union) / len(p.words))


def provenance(
    original: str, proposal: str, labels: Sequence[str] = (), sentence_support: float = 0.0
) -> tuple[SentenceMap, list[Finding]]:
    """The sentence map of ``proposal`` against ``original``, and every finding (in order: changed
    words of kept sentences, unsupported proposal sentences are left to the caller, dropped rules)."""
    reader = Reader(labels)
    acronyms = cache(lambda: clauses.acronyms(_tokens(original)))
    orig_texts, prop_texts = examples(sentences(original)), examples(sentences(proposal))
    orig = [reader.read(t) for t in orig_texts]
    reader.quoted = False
    prop = [reader.read(t) for t in prop_texts]
    for s in (*orig, *prop):
        if s.text in orig_texts.answers or s.text in prop_texts.answers:
            s.lead = "answer:"  # an example with its answer: the label is the example's, no rule
            s.words = {w for w in s.words if not w.startswith("=")}  # its example finds its source
    orig_clauses = [clauses.read(_tokens(t), reader.cached) for t in orig_texts]
    prop_clauses = [clauses.read(_tokens(t), reader.cached) for t in prop_texts]
    sources, supports = align(orig, prop)
    _join_marked(orig, prop, sources, supports)
    into: list[list[int]] = [[] for _ in orig]
    for j, src in enumerate(sources):
        for i in src:
            into[i].append(j)
    findings: list[Finding] = []
    for j, src in enumerate(sources):
        if not src:
            continue
        srcs = [orig[i] for i in src]
        p = prop[j]
        where = f"in {_short(p.text)!r}"
        gone = _lost(srcs, [p])
        for key, shown in _lost([p], srcs):
            kind = key.split(":", 1)[0]
            lost_code = any(k.startswith("code:") for k, _ in gone)
            if kind == "code" and not any(c.isdigit() for c in key) and not lost_code:
                continue  # an acronym of the original's words ("GDPR"): new letters, same thing
            if kind == "code" and not lost_code and shown.upper() in acronyms():
                continue  # "2FA" for "two-factor authentication"
            was = next((old for k, old in gone if k.split(":", 1)[0] == kind != "neg"), None)
            if was is not None:
                what = f"changes {_name(key, was)} to {shown!r}"
            else:
                what = f"adds {_name(key, shown)}"
            findings.append(Finding("changed", f"{what} {where}"))
        why = (
            _modal(srcs, [p], lost=False)
            or _swapped(srcs, p)
            or clauses.polarity(prop_clauses[j], [orig_clauses[i] for i in src])
            or clauses.exception_moved(prop_clauses[j], [orig_clauses[i] for i in src])
            or clauses.direction(prop_clauses[j], [orig_clauses[i] for i in src])
            or clauses.weakened(prop_clauses[j], [orig_clauses[i] for i in src])
        )
        if why:
            findings.append(Finding("changed", f"{why} {where}"))
    named = clauses.names_added(prop_clauses, clauses.vocabulary(_tokens(original)))
    if named:
        findings.append(Finding("changed", named))
    for i, js in enumerate(into):
        if not js:
            continue
        made = [prop[j] for j in js]
        o = orig[i]
        ruled = o.defines or bool(o.rule)
        for key, shown in _lost([o], made):
            if key.startswith("label:") and not ruled:
                continue  # a label as a word of a description ("many negative reviews")
            if key in ("neg", "only") and not (ruled or o.prohibits):
                continue  # "an order that has not shipped has no invoice", told another way
            if key == "neg" and (
                clauses.traded(orig_clauses[i], [prop_clauses[j] for j in js])
                or any(prop_clauses[j].refuses and not orig_clauses[i].refuses for j in js)
            ):
                continue  # "never more than" told as "at most", "do not enter" as "stay out"
            findings.append(Finding("changed", f"drops {_name(key, shown)} of {_short(o.text)!r}"))
        why = _modal([o], made, lost=True) or (_negation_moved(o, made) if STRICT_NEGATION else "")
        if why:
            findings.append(Finding("changed", f"{why} of {_short(o.text)!r}"))
    for p, src, sup in zip(prop, sources, supports, strict=True):
        if sup < sentence_support:
            where = "no sentence of the original" if not src else f"{sup:.0%} of it in its source"
            findings.append(
                Finding("unsupported", f"says something the original does not: {_short(p.text)!r} ({where})")
            )
            break
    status: list[Literal["kept", "merged", "dropped"]] = []
    for i, js in enumerate(into):
        if not js:
            status.append("dropped")
            rule = orig[i].rule
            if rule:
                findings.append(
                    Finding("dropped rule", f"drops the rule {_short(orig[i].text)!r} ({rule!r})")
                )
        elif any(len(sources[j]) > 1 for j in js):
            status.append("merged")
        else:
            status.append("kept")
    smap = SentenceMap(
        original=tuple(
            OriginalSentence(text=_short(o.text), status=st, into=tuple(js[:MAP_LIMIT]), rule=o.rule)
            for o, st, js in zip(orig[:MAP_LIMIT], status, into, strict=False)
        ),
        proposal=tuple(
            ProposalSentence(text=_short(p.text), sources=src, support=round(sup, 4))
            for p, src, sup in zip(prop[:MAP_LIMIT], sources, supports, strict=False)
        ),
        original_count=len(orig),
        proposal_count=len(prop),
        min_support=round(min(supports, default=1.0), 4),
    )
    return smap, findings[:FINDINGS]


__all__ = [
    "Finding",
    "OriginalSentence",
    "ProposalSentence",
    "Reader",
    "Sentence",
    "SentenceMap",
    "align",
    "provenance",
    "sentences",
]
