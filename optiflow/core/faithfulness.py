"""Is a compression proposal still the section it replaces? A check before it costs an evaluation.

A small model asked to shorten a section sometimes *answers* it instead: an output section became
"The sentiment of this review is positive.", a task section "I'm ready to help. What's your next
question?". A gate cannot refuse those when the dataset barely uses the section; this check
refuses them by reading the text. It is pure (no model call) and measured on a labelled suite of
(original, proposal, faithful?) pairs (``tests/core/faithfulness_pairs.jsonl``, issue 31), whose
tune half set the thresholds below.

A proposal is refused, in this order, when it:

1. is empty;
2. reads as a chat reply rather than an instruction: a greeting, an offer of help, a question to
   the user, "here is the shortened text" (:data:`CHAT`), where the original has no such phrase;
3. states an answer label (one of the dataset's ``expected`` values) the original did not state;
4. states exactly one answer label where the original stated two or more, in a short statement
   (at most :data:`ANSWER_WORDS` other content words): it picked an answer;
5. says something else: the share of its content words found in the original, each weighted by
   its rarity (IDF over the prompt's sections and the dataset's inputs), is below
   :data:`SUPPORT_THRESHOLD`;
6. read sentence by sentence (:mod:`optiflow.core.provenance`, issue 31) and clause by clause
   (:mod:`optiflow.core.clauses`), changes what a kept sentence means: it loses or changes a
   negation, an exception, "only", the modal force, a number or its unit, a code, a placeholder
   or a label, adds one, swaps which label or code goes with which condition, states a clause's
   words without their negation (or with one they lacked), turns a comparison round, softens an
   obligation ("must" -> "try to"), makes an exception the rule, or adds a name ("Mondays" ->
   "Fridays") — the reason names it and the sentence;
7. has a sentence less than :data:`SENTENCE_SUPPORT` of which is in the original sentence(s) it
   comes from;
8. drops a sentence that carries a rule (a prohibition, an order, an obligation, a number, a code,
   a label definition), unless the job allows it (``faithfulness.allow_dropped_rules``): then the
   proposal passes and each such rule is listed as not verified by the dataset.

Coverage (the share of the original's weighted content the proposal keeps) is measured and shown
but not required: filler and background may go. The sentence map (:class:`SentenceMap`: each
original sentence kept, merged or dropped; each proposal sentence with its sources) is kept with
the verdict for the report. Labelled suite: ``tests/core/faithfulness_pairs.jsonl``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Protocol

from pydantic import StrictBool

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.model import ModelConfig
from optiflow.core.provenance import SentenceMap, provenance
from optiflow.core.relevance import sample_text

SUPPORT_THRESHOLD = 0.45
"""The share of the proposal's weighted content words the original must have. Chosen on the tune
half of the labelled suite (``tests/core/faithfulness_pairs.jsonl``): every value from 0.3 to 0.6
gave the same accuracy there once the sentence rules run (issue 31), so the lower end of that
range, where an honest paraphrase with new words (support just under 0.55) is not refused."""

SENTENCE_SUPPORT = 0.3
"""A proposal sentence whose weighted content words are less than this share in the original
sentence(s) it comes from says something the original does not. Flat on the tune half from 0 to
0.6 (``test_faithfulness_pairs.py`` shows it); 0.3 refuses a sentence mostly new."""

ANSWER_WORDS = 4
"""A proposal stating one label with at most this many other content words is an answer
("The sentiment of this review is positive.": 2), not a rule about that label."""

MAX_LABELS = 30
"""A dataset with more distinct ``expected`` values than this is not a label set."""

_WORD = re.compile(r"[^\W\d_][^\W_]*|\d+")
_STOP = frozenset(
    """a an the my your our their his her its any some of for to about with on in at by from or and
    is are was were be been am do does did have has had that this these those it i me we you he she
    they them us can could would should will not no if so as but how what why when where who which
    there here than then just also very each every one all only into out up down over same other
    such more most less own both either neither nor too s t don't i'm it's you're let's""".split()  # noqa: SIM905
)


class Searcher(Protocol):
    def search(self, text: str) -> re.Match[str] | None: ...


class _Question:
    r"""``\b(?:do you|would you like|can you|could you) [^.?!]*\?`` (a question to the user), in
    time linear in the text. Run from every lead-in, the pattern rescans to the next sentence end
    from each: ``"do you " * 32000`` cost 46 s with the GIL held (issue 27). Every lead-in before a
    sentence end meets that same end, so one look at it decides them all: the match is the first
    lead-in of the first sentence that ends with ``?``, found by the pattern itself on that window."""

    pattern = re.compile(r"\b(?:do you|would you like|can you|could you) [^.?!]*\?", re.IGNORECASE)
    _LEAD = re.compile(r"\b(?:do you|would you like|can you|could you) ", re.IGNORECASE)
    _END = re.compile(r"[.?!]")

    def search(self, text: str) -> re.Match[str] | None:
        pos = 0
        while (lead := self._LEAD.search(text, pos)) is not None:
            end = self._END.search(text, lead.end())
            if end is None:
                return None
            if end.group() == "?":
                return self.pattern.match(text, lead.start(), end.end())
            pos = end.end()
        return None


def _chat(p: str) -> Searcher:
    return _Question() if p == _Question.pattern.pattern else re.compile(p, re.IGNORECASE)


CHAT: tuple[tuple[str, Searcher], ...] = tuple(
    (name, _chat(p))
    for name, p in (
        (
            "an offer of help",
            r"\b(?:I(?:'m| am)|I(?:'ll| will)) (?:be )?(?:ready|happy|glad|here|delighted) to\b",
        ),
        ("an offer of help", r"\bhow (?:can|may) I (?:help|assist)\b"),
        (
            "a question to the user",
            r"\bwhat(?:'s| is) (?:your|the) (?:next )?(?:question|task|request|review)\b",
        ),
        ("a question to the user", r"\b(?:do you|would you like|can you|could you) [^.?!]*\?"),
        ("a greeting", r"^\W*(?:hello|hi|hey|greetings|good (?:morning|afternoon|evening))\b"),
        ("a chat preamble", r"^\W*(?:sure|certainly|of course|absolutely|okay|ok|great)\b[,!.]"),
        (
            "a chat preamble",
            r"\bhere(?:'s| is) (?:the|a|your) (?:shortened|compressed|rewritten|revised|new|shorter)\b",
        ),
        ("a chat preamble", r"\b(?:let me know|feel free to|I hope this helps)\b"),
        ("a question to the user", r"\?\s*$"),
    )
)


class JudgeSpec(Frozen):
    """``faithfulness.judge``: a model asked, for every proposal that passes the reading rules,
    whether proposal and original impose the same instructions, both ways."""

    model: ModelConfig


class FaithfulnessSpec(Frozen):
    """A compress job's ``faithfulness`` setting."""

    allow_dropped_rules: StrictBool = False
    """Let a proposal drop an original sentence that carries an obligation, a prohibition, a number
    or a code; the report lists each such rule as not verified by the dataset."""
    judge: JudgeSpec | None = None


class FaithfulnessContext(Frozen):
    """What the check knows of the job: its answer labels, and word rarity (IDF) over the prompt's
    section bodies and the dataset's inputs."""

    labels: tuple[str, ...] = ()
    idf: dict[str, float] = {}
    unseen_idf: float = 1.0
    allow_dropped_rules: bool = False
    """The job's ``faithfulness.allow_dropped_rules``: a proposal may drop an original sentence
    carrying a rule (each is then listed as not verified by the dataset)."""


class Faithfulness(Frozen):
    """What the check measured on one proposal, and its verdict."""

    faithful: bool
    support: float
    """IDF-weighted share of the proposal's content words that the original has."""
    coverage: float
    """IDF-weighted share of the original's content words the proposal keeps."""
    threshold: float = SUPPORT_THRESHOLD
    reason: str = ""
    """Why it was refused ("" when faithful)."""
    sentences: SentenceMap | None = None
    """Which original sentences each proposal sentence comes from; which were dropped."""
    dropped_rules: tuple[str, ...] = ()
    """Rules the proposal drops that the job allowed to drop (``allow_dropped_rules``): not
    verified by the dataset unless the gate saw the edit lose something."""
    judge: JudgeVerdict | None = None
    """The judge model's verdict (``faithfulness.judge``), when one was asked."""

    def line(self) -> str:
        verdict = "faithful" if self.faithful else f"refused: {self.reason}"
        out = (
            f"{verdict} (support {self.support:.0%}, threshold {self.threshold:.0%}, "
            f"coverage {self.coverage:.0%})"
        )
        if self.judge is not None:
            out += f"; judge {self.judge.model}: {'same' if self.judge.same else 'differs'}"
        return out

    def map_lines(self, loss: str = "") -> list[str]:
        """The sentence map as text: every dropped original sentence, every merge, the rules
        dropped (not verified by the dataset, or, when the gate saw the edit lose something,
        ``loss``, what it saw), the judge's reason."""
        out: list[str] = []
        m = self.sentences
        if m is not None:
            for i, o in enumerate(m.original):
                if o.status == "dropped":
                    rule = f" [rule: {o.rule}]" if o.rule else ""
                    out.append(f"dropped  o{i + 1}: {o.text}{rule}")
            for j, p in enumerate(m.proposal):
                src = ", ".join(f"o{i + 1}" for i in p.sources) or "no source"
                out.append(f"p{j + 1} <- {src} (support {p.support:.0%}): {p.text}")
        seen = f"dropped, and the gate saw the edit lose {loss}" if loss else "not verified by the dataset"
        out += [f"{seen}: {r}" for r in self.dropped_rules]
        if self.judge is not None:
            out.append(f"judge {self.judge.model}: {self.judge.reason}")
        return out


class JudgeVerdict(Frozen):
    """What a judge model said of a proposal: whether it imposes the same instructions as the
    original, both ways, and why."""

    model: str
    same: bool
    reason: str = ""
    forward: bool | None = None
    """The original's instructions all hold in the proposal."""
    backward: bool | None = None
    """The proposal's instructions all hold in the original."""


def stem(word: str) -> str:
    """A light stem: plural and a few common suffixes off, so "decides" meets "decide"."""
    w = word.lower().replace("\u2019", "'")
    for suffix, repl in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("ly", ""), ("s", "")):
        if w.endswith(suffix) and len(w) - len(suffix) >= 4 and not w.endswith("ss"):
            return w[: len(w) - len(suffix)] + repl
    return w


def content_words(text: str) -> list[str]:
    return [
        stem(w) for w in _WORD.findall(text.replace("\u2019", "'")) if w.lower() not in _STOP and len(w) > 1
    ]


def labels_of(expected: Iterable[JSONValue]) -> tuple[str, ...]:
    """The dataset's answer labels: its short string ``expected`` values, when there are 2 to
    :data:`MAX_LABELS` distinct ones (a classification); else none."""
    found = {
        v.strip()
        for v in expected
        if isinstance(v, str) and v.strip() and len(v) <= 40 and len(v.split()) <= 3
    }
    return tuple(sorted(found)) if 2 <= len(found) <= MAX_LABELS else ()


def context_for(
    documents: Sequence[str], inputs: Iterable[JSONValue], expected: Iterable[JSONValue]
) -> FaithfulnessContext:
    """The context of a job: ``documents`` are the prompt's section bodies."""
    docs = [set(content_words(d)) for d in (*documents, *(sample_text(i) for i in inputs))]
    n = len(docs)
    df: Counter[str] = Counter(w for d in docs for w in d)
    idf = {w: math.log((n + 1) / (c + 1)) + 1.0 for w, c in df.items()}
    return FaithfulnessContext(labels=labels_of(expected), idf=idf, unseen_idf=math.log(n + 1) + 1.0)


def mentioned(labels: Sequence[str], text: str) -> tuple[str, ...]:
    return tuple(
        lab for lab in labels if re.search(rf"(?<![\w-]){re.escape(lab)}(?![\w-])", text, re.IGNORECASE)
    )


def _weights(words: Iterable[str], ctx: FaithfulnessContext) -> dict[str, float]:
    return {w: ctx.idf.get(w, ctx.unseen_idf) for w in set(words)}


def _prefixes(vocabulary: set[str]) -> set[str]:
    return {v[:6] for v in vocabulary if len(v) >= 6}


def _has(vocabulary: set[str], prefixes: set[str], word: str) -> bool:
    """``word`` or a word sharing its first six letters is in ``vocabulary`` (``prefixes``: its
    words' six-letter prefixes): two set lookups, not a scan of the vocabulary per word, which cost
    54 s on 180 KB of distinct words (issue 27)."""
    return word in vocabulary or (len(word) >= 6 and word[:6] in prefixes)


def measure(original: str, proposal: str, ctx: FaithfulnessContext) -> tuple[float, float, list[str]]:
    """(support, coverage, the proposal's words the original lacks, rarest first)."""
    o, p = set(content_words(original)), set(content_words(proposal))
    wp, wo = _weights(p, ctx), _weights(o, ctx)
    o_prefixes, p_prefixes = _prefixes(o), _prefixes(p)
    new = [w for w in p if not _has(o, o_prefixes, w)]
    support = 1.0 - sum(wp[w] for w in new) / sum(wp.values()) if wp else 1.0
    kept = sum(wo[w] for w in o if _has(p, p_prefixes, w))
    coverage = kept / sum(wo.values()) if wo else 1.0
    return support, coverage, sorted(new, key=lambda w: (-wp[w], w))  # rarest first, then by name


def check(
    original: str,
    proposal: str,
    ctx: FaithfulnessContext,
    threshold: float = SUPPORT_THRESHOLD,
    sentence_threshold: float = SENTENCE_SUPPORT,
) -> Faithfulness:
    """The verdict on one proposal (see the module docstring for the rules, in order)."""
    support, coverage, new = measure(original, proposal, ctx)
    smap, findings = provenance(original, proposal, ctx.labels, sentence_threshold)
    allowed: list[str] = []

    def verdict(reason: str = "") -> Faithfulness:
        return Faithfulness(
            faithful=not reason,
            support=round(support, 4),
            coverage=round(coverage, 4),
            threshold=threshold,
            reason=reason,
            sentences=smap,
            dropped_rules=tuple(allowed),
        )

    if not proposal.strip():
        return verdict("the proposal is empty")
    for what, pattern in CHAT:
        m = pattern.search(proposal)
        if m and not pattern.search(original):
            return verdict(f"reads as a chat reply, not an instruction: {what} ({m.group(0).strip()!r})")
    said, stated = mentioned(ctx.labels, original), mentioned(ctx.labels, proposal)
    novel = [lab for lab in stated if lab not in said]
    if novel:
        return verdict(f"states the answer {novel[0]!r}, which the original did not state")
    label_words = set(content_words(stated[0])) if stated else set()
    others = [w for w in content_words(proposal) if w not in label_words]
    if len(said) >= 2 and len(stated) == 1 and len(others) <= ANSWER_WORDS:
        listed = ", ".join(repr(s) for s in said)
        return verdict(
            f"states the answer {stated[0]!r} where the original listed {len(said)} labels ({listed})"
        )
    if support < threshold:
        words = ", ".join(new[:5])
        return verdict(
            f"says something the original does not: {support:.0%} of its content is in it (new: {words})"
        )
    for f in findings:
        if f.kind == "changed":
            return verdict(f.reason)
    for f in findings:
        if f.kind == "unsupported":
            return verdict(f.reason)
    dropped = [f.reason for f in findings if f.kind == "dropped rule"]
    if dropped and not ctx.allow_dropped_rules:
        more = f" (and {len(dropped) - 1} more)" if len(dropped) > 1 else ""
        return verdict(dropped[0] + more)
    allowed.extend(d.removeprefix("drops the rule ") for d in dropped)
    return verdict()


__all__ = [
    "ANSWER_WORDS",
    "CHAT",
    "SENTENCE_SUPPORT",
    "SUPPORT_THRESHOLD",
    "Faithfulness",
    "FaithfulnessContext",
    "FaithfulnessSpec",
    "JudgeSpec",
    "JudgeVerdict",
    "SentenceMap",
    "check",
    "content_words",
    "context_for",
    "labels_of",
    "measure",
    "mentioned",
]
