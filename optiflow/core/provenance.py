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
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from typing import Literal

from optiflow.core import clauses
from optiflow.core.base import Frozen
from optiflow.core.reading import EXAMPLE_LEADS, Reader, Sentence, tokenize
from optiflow.core.sentences import examples, sentences
from optiflow.core.vocabulary import OPPOSITES, SPELLED, stem

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
        ranked = sorted(score, key=lambda i: (-score[i], len(original[i].words), i))[:CANDIDATES]
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
            if key.startswith(("label:", "num:")) and ("num:" in key or " " not in key) and "q" + key in have:
                continue  # stated in quotes (an example answer), as a word ("five to seven"), an age
            if key.startswith("num:") and key.endswith(" time") and "q" + key.removesuffix(" time") in have:
                continue  # "two times" for "twice"
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


_BOUND_WORDS = frozenset({"maximum", "max", "limit", "only"})
_BOUND_RUNS = frozenset({("up", "to"), ("at", "most"), ("no", "more", "than")})
"""Words of a limit ("up to", "at most", "no more than"): a permission that states one ("may place
up to 15 holds") is kept by the limit kept."""
_PERMITS_TOLD = frozenset({"can", "ok", "okay", "fine"})
"""Words that keep a permission ("Members can cancel", "Pesticide mentions OK"), though none makes
one: "can" is mostly ability ("you can find it in Settings"), no permission a proposal adds."""


def _modal(src: Sequence[Sentence], dst: Sequence[Sentence], lost: bool) -> str:
    """How the modal force changed from ``src`` to ``dst`` ("" when it did not): what ``src``
    had that ``dst`` lost (``lost``), or what ``dst`` adds."""
    a: set[int] = set()
    b: set[int] = set()
    for s in src:
        a |= s.modal
    for d in dst:
        b |= d.modal
    forbids = any(s.prohibits for s in src)  # "do not tell" is as strong as "must not say"
    shown_a = next((s.markers["modal"] for s in src if "modal" in s.markers), "")
    shown_b = next((s.markers["modal"] for s in dst if "modal" in s.markers), "")
    if lost:
        if 1 in a and 1 not in b and not _permission_kept(src, dst):
            return f"drops the permission {shown_a!r}" + (f" (now {shown_b!r})" if shown_b else "")
        if 3 in a and 3 not in b and 2 in b:
            return f"weakens {shown_a!r} to {shown_b!r}"
        return ""
    told = all("neg" in s.markers and "exc" in s.markers for s in src) and any(
        "only" in d.markers for d in dst
    )
    if 1 in b and 1 not in a and 3 in a and not told:  # "never X unless Y" is "may X only if Y"
        return f"adds the permission {shown_b!r} where the original says {shown_a!r}"
    if 3 in b and 3 not in a and not forbids and (2 in a or (1 in a and not told)):
        return f"strengthens {shown_a!r} to {shown_b!r}"  # "should" or "may offer" -> "must offer"
    return ""


def _permission_kept(src: Sequence[Sentence], dst: Sequence[Sentence]) -> bool:
    """``dst`` keeps the permission of ``src`` without a permission word: "allowed only in X" as
    "only in X", "may cancel" as "can cancel" or "OK", "may place up to 15 holds" as "max 15 holds"
    (the limit kept)."""
    if all("only" in s.markers for s in src) and any("only" in d.markers for d in dst):
        return True
    if any(not _PERMITS_TOLD.isdisjoint(_lowered(d.text)) for d in dst):
        return True
    limits = {k for s in src if _bounds(_lowered(s.text)) for k in s.markers if k.startswith("num:")}
    return bool(limits) and limits <= {k for d in dst for k in d.markers}


def _lowered(text: str) -> list[str]:
    return [t.lower() for t in tokenize(text)]


def _bounds(words: list[str]) -> bool:
    runs = {*pairwise(words), *zip(words, words[1:], words[2:], strict=False)}
    return not _BOUND_WORDS.isdisjoint(words) or not _BOUND_RUNS.isdisjoint(runs)


def _opposite(src: Sequence[Sentence], p: Sentence) -> str:
    """A word of ``p`` whose opposite (:data:`OPPOSITES`) its sources state instead, none of them
    negated ("closed on Sundays" -> "open on Sundays"; "do not reject" -> "accept" is left to the
    negation rules)."""
    if "neg" in p.markers or any("neg" in s.markers for s in src):
        return ""
    had: set[str] = set()
    for s in src:
        had |= s.words
    for w in sorted(p.words):
        for other in sorted(OPPOSITES.get(w, ())):
            if other in had and w not in had and other not in p.words:
                return f"says {SPELLED[w]!r} where the original says {SPELLED[other]!r}"
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
    """A condition word bound to another of the original's labels or codes than the original binds
    it to ("delays" -> positive where the original says negative). A label the original binds
    nothing to is no swap: "2FA: security settings" names a topic, it gives no answer."""
    bound: dict[str, set[str]] = {}
    for s in src:
        for w, labs in s.bindings.items():
            bound.setdefault(w, set()).update(labs)
    answers = {lab for labs in bound.values() for lab in labs}
    for w, labs in dst.bindings.items():
        was = bound.get(w)
        if was and len(was) == 1 and labs & answers and not (labs & was):
            (old,) = was
            what = "codes" if any(c.isdigit() for c in old) else "labels"
            new = sorted(labs & answers)[0]
            return f"swaps {what}: {w!r} goes with {new!r} where the original says {old!r}"
    return ""


ABBREVIATION_WORDS = 64
"""Source words an added code is compared with to see whether it abbreviates one (bounded work per
code: an adversarial proposal of thousands of capitals costs no more than a few per token)."""


def _quoted(key: str, sources: Sequence[Sentence]) -> bool:
    """The number of ``key`` ("num:3 day") is one a source states only inside quotes (an
    example's words, no marker of it)."""
    value = key.removeprefix("num:").split(" ", 1)[0]
    return any(value in s.words and f"num:{value}" not in s.markers for s in sources)


def _abbreviates(code: str, sources: Sequence[Sentence]) -> bool:
    """``code`` is one of its sources' words in capitals ("every REJECT gets a reason" for "give
    the reason when rejecting") or shortened ("DB", "Prod"): its letters in order, the first one
    first ("database", "production"); at most :data:`ABBREVIATION_WORDS` words looked at."""
    low = code.lower()
    if not low.isalpha():
        return False
    if stem(low) in {w for s in sources for w in s.words}:
        return True
    if len(low) > 6:
        return False
    seen = 0
    for s in sources:
        for w in s.words:
            if w[:1] != low[:1] or len(w) <= len(low):
                continue
            if _subsequence(low, w):
                return True
            seen += 1
            if seen >= ABBREVIATION_WORDS:
                return False
    return False


def _subsequence(short: str, word: str) -> bool:
    it = iter(word)
    return all(c in it for c in short)


def _join_marked(
    orig: Sequence[Sentence], prop: Sequence[Sentence], sources: list[tuple[int, ...]], supports: list[float]
) -> None:
    """A proposal sentence's number, code, label, negation, exception or "only" joins its sources
    the original sentences that state it, when the proposal sentence shares their words
    (:func:`_shares`): "Do not onboard users from sanctioned countries: if ..." merges "Users from
    sanctioned countries must not be onboarded" with the sentence it was aligned to."""
    where_marked: dict[str, list[int]] = defaultdict(list)
    for i, o in enumerate(orig):
        for key in o.markers:
            marked = key.startswith(("num:", "code:", "label:")) or key in _SCOPE
            if marked and len(where_marked[key]) <= MARKER_SOURCES:
                where_marked[key].append(i)
    for j, p in enumerate(prop):
        have = {k for i in sources[j] for k in orig[i].markers}
        known = {w for i in sources[j] for w in orig[i].words}
        extra: set[int] = set()
        for k in p.markers:
            stating = where_marked.get(k, [])
            if k in have and not k.startswith(("code:", "num:")):
                continue  # a label ("positive") or a negation its sources state pulls no more in
            once = len(stating) == 1
            extra.update(i for i in stating if i not in sources[j] and _shares(orig[i], p, known, once))
        if extra and sources[j]:
            sources[j] = tuple(sorted({*sources[j], *sorted(extra)[:MARKER_SOURCES]}))
            union = {w for i in sources[j] for w in orig[i].words}
            if p.words:
                supports[j] = max(supports[j], len(p.words & union) / len(p.words))


def _join_contained(
    orig: Sequence[Sentence], prop: Sequence[Sentence], sources: list[tuple[int, ...]], used: set[int]
) -> None:
    """An original sentence no proposal sentence comes from, all of whose content words (two or
    more) one proposal sentence states, joins that sentence's sources ("You cannot help with
    controlled substances." into "Help users request refills, but do not help with controlled
    substances"): the alignment picked the sentence's longer sources. At most
    :data:`MARKER_SOURCES` candidates looked at per sentence, through its rarest word."""
    by_word: dict[str, list[int]] = defaultdict(list)
    for j, p in enumerate(prop):
        if sources[j]:
            for w in p.words:
                if len(by_word[w]) < MARKER_SOURCES:
                    by_word[w].append(j)
    for i, o in enumerate(orig):
        if i in used or len(o.words) < 2 or o.example:
            continue
        rarest = min(o.words, key=lambda w: (len(by_word.get(w, ())), w))
        for j in by_word.get(rarest, ()):
            if o.words <= prop[j].words and len(sources[j]) < MARKER_SOURCES:
                sources[j] = tuple(sorted({*sources[j], i}))
                used.add(i)
                break


def _join_orphans(orig: Sequence[Sentence], prop: Sequence[Sentence], sources: list[tuple[int, ...]]) -> None:
    """An original sentence no proposal sentence comes from, stating a number, code or label that
    a proposal sentence states and its sources do not, joins that sentence's sources: it was merged
    in ("Each question has 4 options." into "5 questions, each with 4 options"), not dropped. Its
    own markers are then checked against the proposal sentence as any source's are. An example's
    answer label does not join it: an answer ("The sentiment is positive.") merges no example."""
    used = {i for src in sources for i in src}
    _join_contained(orig, prop, sources, used)
    stating: dict[str, list[int]] = defaultdict(list)
    for i, o in enumerate(orig):
        if i not in used:
            kinds = ("num:", "code:") if o.example else ("num:", "code:", "label:")
            for key in o.markers:
                if key.startswith(kinds) and len(stating[key]) < MARKER_SOURCES:
                    stating[key].append(i)  # an example's answer label is no rule merged in
    if not stating:
        return
    for j, p in enumerate(prop):
        if not sources[j]:
            continue
        have = {k for i in sources[j] for k in orig[i].markers}
        extra = {i for k in p.markers if k not in have for i in stating.get(k, ())}
        if extra:
            sources[j] = tuple(sorted({*sources[j], *sorted(extra)[:MARKER_SOURCES]}))


def provenance(
    original: str, proposal: str, labels: Sequence[str] = (), sentence_support: float = 0.0
) -> tuple[SentenceMap, list[Finding]]:
    """The sentence map of ``proposal`` against ``original``, and every finding (in order: changed
    words of kept sentences, unsupported proposal sentences are left to the caller, dropped rules)."""
    reader = Reader(labels)
    acronyms = cache(lambda: clauses.acronyms(tokenize(original)))
    orig_texts, prop_texts = examples(sentences(original)), examples(sentences(proposal))
    orig_tokens, prop_tokens = [tokenize(t) for t in orig_texts], [tokenize(t) for t in prop_texts]
    orig = [reader.read(t, k) for t, k in zip(orig_texts, orig_tokens, strict=True)]
    reader.quoted = False
    prop = [reader.read(t, k) for t, k in zip(prop_texts, prop_tokens, strict=True)]
    for s in (*orig, *prop):
        if s.text in orig_texts.answers or s.text in prop_texts.answers:
            s.lead, s.example = "answer:", True  # an example with its answer: it shows a rule
            s.words = {w for w in s.words if not w.startswith("=")}  # its example finds its source
    orig_clauses = [clauses.read(k, reader.cached) for k in orig_tokens]
    prop_clauses = [clauses.read(k, reader.cached) for k in prop_tokens]
    sources, supports = align(orig, prop)
    _join_marked(orig, prop, sources, supports)
    _join_orphans(orig, prop, sources)
    stated = {k for p in prop for k in p.markers}
    into: list[list[int]] = [[] for _ in orig]
    for j, src in enumerate(sources):
        for i in src:
            into[i].append(j)
    negated = [[c for c in r.clauses if c.negation and c.words] for r in prop_clauses]

    def negated_elsewhere(j: int) -> list[clauses.Clause]:
        """The negated clauses of the proposal's sentences next to ``j`` (a rule split at ";")."""
        return [c for k in (j - 1, j + 1) if 0 <= k < len(negated) for c in negated[k]]

    findings: list[Finding] = []
    for j, src in enumerate(sources):
        if not src:
            continue
        srcs = [orig[i] for i in src]
        p = prop[j]
        where = f"in {_short(p.text)!r}"
        gone = [(k, v) for k, v in _lost(srcs, [p]) if not (k.startswith("code:") and k in stated)]
        shown_input = all(o.example for o in srcs)  # examples: their inputs' words are no rule's
        for key, shown in _lost([p], srcs):
            kind = key.split(":", 1)[0]
            if key == "neg" and (
                clauses.cancelled(prop_clauses[j])
                or clauses.traded(prop_clauses[j], [orig_clauses[i] for i in src])
            ):
                continue  # "not ... without": two negations; "never exceed 10" for "at most 10"
            lost_code = any(k.startswith("code:") for k, _ in gone)
            if (
                kind == "code"
                and not lost_code
                and (shown.upper() in acronyms() or _abbreviates(shown, srcs))
            ):
                continue  # "GDPR", "2FA" for "two-factor authentication", "DB" for "database"
            if kind in ("num", "neg") and (shown_input or (kind == "num" and _quoted(key, srcs))):
                continue  # an example's input told without its quotes ('"a 3-day notice" → EVICT')
            was = next((old for k, old in gone if k.split(":", 1)[0] == kind != "neg"), None)
            if was is not None:
                what = f"changes {_name(key, was)} to {shown!r}"
            else:
                what = f"adds {_name(key, shown)}"
            findings.append(Finding("changed", f"{what} {where}"))
        why = (
            _modal(srcs, [p], lost=False)
            or _opposite(srcs, p)
            or _swapped(srcs, p)
            or (
                ""
                if shown_input
                else clauses.polarity(prop_clauses[j], [orig_clauses[i] for i in src], negated_elsewhere(j))
            )
            or clauses.exception_moved(prop_clauses[j], [orig_clauses[i] for i in src])
            or clauses.direction(prop_clauses[j], [orig_clauses[i] for i in src])
            or clauses.weakened(prop_clauses[j], [orig_clauses[i] for i in src])
            or clauses.units_changed(prop_clauses[j], [orig_clauses[i] for i in src])
        )
        if why:
            findings.append(Finding("changed", f"{why} {where}"))
    named = clauses.names_added(prop_clauses, clauses.vocabulary(tokenize(original)))
    if named:
        findings.append(Finding("changed", named))
    findings += _losses(orig, prop, into, orig_clauses, prop_clauses, stated)
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
    return _map(orig, prop, status, into, sources, supports), findings[:FINDINGS]


def _losses(
    orig: Sequence[Sentence],
    prop: Sequence[Sentence],
    into: Sequence[Sequence[int]],
    orig_clauses: Sequence[clauses.Read],
    prop_clauses: Sequence[clauses.Read],
    stated: set[str],
) -> list[Finding]:
    """What each original sentence the proposal keeps (``into``: the proposal sentences made of
    it) lost there: a marker, a permission or obligation, a negation moved; ``stated``: every
    marker the proposal states anywhere."""
    findings: list[Finding] = []
    for i, js in enumerate(into):
        if not js:
            continue
        made = [prop[j] for j in js]
        o = orig[i]
        ruled = o.defines or bool(o.rule)
        kept_words = set().union(*(m.words for m in made))  # all kept: the scope word was just cut
        if o.lead.startswith(EXAMPLE_LEADS):
            continue  # an example's details ("e.g. 'SW1A 1AA'"); what the proposal adds is checked above
        for key, shown in _lost([o], made):
            if key.startswith("label:") and not ruled:
                continue  # a label as a word of a description ("many negative reviews")
            if key in ("neg", "only") and not (ruled or o.prohibits or o.words <= kept_words):
                continue  # "an order that has not shipped has no invoice", told another way
            if key == "neg" and (
                clauses.traded(orig_clauses[i], [prop_clauses[j] for j in js])
                or any(prop_clauses[j].refuses and not orig_clauses[i].refuses for j in js)
                or clauses.cancelled(orig_clauses[i])
            ):
                continue  # "never more than" told as "at most", "do not enter" as "stay out"
            if key.startswith("code:") and key in stated:
                continue  # an identifier the proposal keeps in another sentence (a swap is a binding)
            findings.append(Finding("changed", f"drops {_name(key, shown)} of {_short(o.text)!r}"))
        why = _modal([o], made, lost=True) or (_negation_moved(o, made) if STRICT_NEGATION else "")
        if why:
            findings.append(Finding("changed", f"{why} of {_short(o.text)!r}"))
    return findings


def _map(
    orig: Sequence[Sentence],
    prop: Sequence[Sentence],
    status: Sequence[Literal["kept", "merged", "dropped"]],
    into: Sequence[Sequence[int]],
    sources: Sequence[tuple[int, ...]],
    supports: Sequence[float],
) -> SentenceMap:
    return SentenceMap(
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
