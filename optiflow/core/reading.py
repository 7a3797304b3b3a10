"""One sentence of a prompt section read for what carries its meaning (pure; issue 31), for
:mod:`optiflow.core.provenance`: its content words (stemmed, labels and markers apart), its
meaning-bearing words (negations, exceptions, "only", modal force, numbers with their unit, codes,
placeholders, labels), which condition words go with which label or code, whether it is a rule.
Each distinct token is classified once (:meth:`Reader.kind`); a sentence is read in one pass."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

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
    NUMBER_WORDS,
    ONLY,
    ORDERING,
    ORDERS,
    ORDINALS,
    OTHERWISE,
    PERMIT,
    PROHIBIT,
    QUOTES,
    SEPARATORS,
    SHOULD,
    SQUARE,
    STOPWORDS,
    STRONG,
    VERDICT,
    negative_word,
    stem,
    unit_word,
)

_TOKEN = re.compile(
    r"\$\{\w+\}|\{\{ ?\w+ ?\}\}|\d+(?:[.,]\d+)*[\w%'\u2019-]*|[^\W\d_][\w'\u2019-]*"
    r"|[,;:\"\u201c\u201d()\u2264\u2265\u2192]|[<>]=?"
)
_ARROWS = str.maketrans({"\u2019": "'", "|": ";"})
ARROW = "\u2192"


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
    example: bool = False
    """An example with its answer line ("Input: ... Output: RFD-201"): it shows a rule, it is none."""
    addressed: bool = False
    """It speaks to the assistant ("you", "your"): "always" there is an order, not a habit ("it
    has always prided itself")."""

    @property
    def rule(self) -> str:
        """What makes it a rule (empty: none): its first prohibition, exception, restriction,
        number or code; its modal obligation; an order (:data:`ORDERS`); a label it states (not in
        an example answer line such as ``Answer: ...``)."""
        if self.lead.startswith(EXAMPLE_LEADS) or self.example:
            return ""  # "For example, a post ... must be removed with MOD-DOX": an example of a rule
        for key, shown in self.markers.items():
            kind = key.split(":", 1)[0]
            if (kind in ("num", "code") and "${" not in key and "{{" not in key) or (
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
        deontic = self.markers.get("modal", "").lower() not in ("always", "never") or self.addressed
        if order or (self.modal & {2, 3} and deontic):
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


_RANGE = re.compile(r"(?<=\w)\u2013(?=\w)")


def tokenize(text: str) -> list[str]:
    """The words, numbers, placeholders and punctuation of ``text``; an arrow ("->", "=>") is
    "\u2192" (what follows it goes with what comes before, not "greater than"); a table's "|" a
    clause's end; an en dash between two words or numbers "to" ("1\u20133 months")."""
    text = _RANGE.sub(" to ", text.replace("->", ARROW).replace("=>", ARROW).translate(_ARROWS))
    return _TOKEN.findall(text)


_MAY_BE = frozenset({"be", "have"})
EXAMPLE_LEADS = ("for example", "for instance", "e g", "e.g")
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
        if tok.startswith(("${", "{{")):
            return ("code", low, tok, 0, f"code:{tok}", "")  # a placeholder
        digit = any(c.isdigit() for c in tok)
        if digit and not tok[0].isdigit() and unit_word(tok):
            return ("stop", low, "", 0, "", "")  # "m²": a unit, read with its number
        if (
            (digit and not tok[0].isdigit())
            or (tok.isupper() and sum(c.isalpha() for c in tok) >= 2 and tok not in EMPHASIS)
            or ("_" in tok.strip("_") and not tok.isupper())  # an identifier: "customer_id", "risk_level"
        ):
            return ("code", low, tok.upper(), 0, f"code:{tok.upper()}", "")
        if tok[0].isdigit():
            j = 0
            while j < len(tok) and (tok[j].isdigit() or tok[j] in ".,"):
                j += 1
            value, rest = tok[:j].rstrip(".,"), tok[j:].lstrip("-")
            if rest and rest.isupper() and rest not in _MULTIPLIERS:
                return ("code", low, tok.upper(), 0, f"code:{tok.upper()}", "")
            value = _value(value, rest)
            if rest in _MULTIPLIERS:
                rest = ""
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
        if low in OTHERWISE:
            return ("word", low, stem(low), 0, "qneg", "")  # "else HOLD" is "if they have not, HOLD"
        if low in ORDINALS:
            return ("word", low, stem(low), 0, f"qnum:{ORDINALS[low]}", "")  # "second" may be "2nd"
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
        if negative_word(low):
            return ("word", low, stem(low), force, "qneg", "")  # "unconfirmed": a negation told in a word
        return ("word", low, stem(low), force, "", "")

    def _label_at(self, kinds: list[tuple[str, str, str, int, str, str]], i: int) -> tuple[str, int]:
        for n in range(min(self.longest, len(kinds) - i), 1, -1):
            lab = self.multi.get(tuple(k[1] for k in kinds[i : i + n]), "")
            if lab:
                return lab, n
        return "", 0

    def read(self, text: str, tokens: list[str] | None = None) -> Sentence:
        """One sentence's words and markers, in one pass over its tokens (``tokenize(text)`` when
        not given; a double quote left open runs on into the next sentence)."""
        s = Sentence(text=text)
        markers, words = s.markers, s.words
        tokens = tokenize(text) if tokens is None else tokens
        kinds = self._kinds(tokens)
        bind = any(
            k[0] == "label" or k[1] in self.first or (k[0] == "code" and k[1][0] not in "${") for k in kinds
        )
        _lead(s, kinds)
        segments: list[tuple[set[str], set[str]]] = [(set(), set())]
        quoted = self.quoted
        periods: set[str] | None = None
        n_tok = len(tokens)
        scope = 0  # tokens left in which a content word is governed by a negation
        i = 0
        while i < n_tok:
            kind, low, value, force, key, _inline = kinds[i]
            if kind == "word":
                if not quoted and force and not (force == 1 and i + 1 < n_tok and kinds[i + 1][1] in _MAY_BE):
                    s.modal.add(_denied(kinds, i, force))
                    markers.setdefault("modal", tokens[i])
                if key:
                    markers.setdefault(key, tokens[i])
                if scope and not quoted:
                    s.negated.add(value)
                    scope = 0
                else:
                    s.plain.add(value)
                words.add(value)
                if "-" in low:  # "in-stock" keeps "stock"; "admin-console" "console"; "VIP-list" "VIP"
                    words.update(stem(w) for w in low.split("-") if len(w) > 2 and w not in STOPWORDS)
                    for part in tokens[i].split("-"):
                        if len(part) > 1 and part.isupper() and part not in EMPHASIS:
                            markers.setdefault(f"code:{part}", part)
                if bind:
                    segments[-1][1].add(value)
                i += 1
                continue
            if kind == "stop":
                scope = max(scope - 1, 0)
                if low in ("you", "your") and not quoted:
                    s.addressed = True
                if not quoted and force:
                    s.modal.add(_denied(kinds, i, force))
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
                if bind and tok != ARROW:  # "X → Y": a condition and what it gets, one clause
                    if tok == "(" and segments[-1][0] and not segments[-1][1]:
                        segments[-1][1].add("(")  # "AUTO (car accidents)": the label goes with what follows
                    else:
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
                if tok[0] not in "${":
                    words.add(low)
                    if bind and not quoted:
                        segments[-1][0].add(value)  # a code goes with its condition as a label does
            elif kind in ("num", "numword"):
                if periods is None:  # once per sentence, when it has a number
                    periods = {_PERIODS[t.lower()] for t in tokens if t.lower() in _PERIODS}
                _number(s, tokens, i, kinds[i], quoted=quoted, periods=periods)
            else:  # neg, exc, only
                if not quoted:
                    scope = _negation(s, kinds, i, tok) or scope
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


def _denied(kinds: Sequence[_Kind], i: int, force: int) -> int:
    """The force of the modal word at ``i``: a permission next to a negation ("is not allowed",
    "may not") is a prohibition, as strong as "never"."""
    if force == 1 and any(0 <= k < len(kinds) and kinds[k][0] == "neg" for k in (i - 1, i + 1)):
        return 3
    return force


def _negation(s: Sentence, kinds: Sequence[_Kind], i: int, tok: str) -> int:
    """A negation, exception or "only" (not quoted) as a marker; a negation in the form of a
    prohibition ("never", "don't", "do not", "must not", or first) opens a scope of 3 tokens,
    whose first content word it governs (the scope's length is returned; 0 when none)."""
    kind, low, _value, force, key, _inline = kinds[i]
    if kind == "neg" and i + 2 < len(kinds) and kinds[i + 2][1] == "than":
        return 0  # "no more than 10", "not later than": a bound, read by clauses as one
    s.markers.setdefault(key, tok)
    scope = 0
    if kind == "neg":
        before = kinds[i - 1][1] if i else ""
        if low in PROHIBIT or low.endswith("n't") or before in AUXILIARY or before in ORDERS or i == 0:
            s.prohibits = True
            s.negations += 1
            scope = 3
    if force:
        s.modal.add(force)
        s.markers.setdefault("modal", tok)
    return scope


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


_MULTIPLIERS = {"k": 1000, "K": 1000, "M": 1000000, "mn": 1000000, "bn": 1000000000}
"""A number's suffix that multiplies it ("$500k" is "$500,000"); "m" is not one (minutes, metres)."""
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+")


def _value(digits: str, suffix: str) -> str:
    """A number's value as one spelling: thousands separators dropped ("500,000" is "500000"), a
    multiplier applied ("500k" is "500000")."""
    if _THOUSANDS.fullmatch(digits):
        digits = digits.replace(",", "")
    factor = _MULTIPLIERS.get(suffix)
    if factor and len(digits) <= 15:
        try:
            number = float(digits) * factor
        except ValueError:
            return digits
        return str(int(number)) if number.is_integer() else f"{number:g}"
    return digits


_PER = frozenset({"per", "a", "an", "each", "every"})
_RANGE_WORDS = frozenset({"to", "and", "or", "-"})


def _unit_at(tokens: Sequence[str], i: int) -> str:
    """The unit named at ``tokens[i]``: "days", "hrs", "square metres", "per day" ("$25 per day" is
    "$25/day"); "" when none."""
    if i >= len(tokens):
        return ""
    low = tokens[i].lower()
    if low == "m":
        return "metre"  # "10 m" (glued, "5m" may be minutes or millions)
    if low in _PER and i + 1 < len(tokens):
        return unit_word(tokens[i + 1])
    if low in SQUARE and i + 1 < len(tokens):
        unit = unit_word(tokens[i + 1])
        return f"square {unit}" if unit and low != "cubic" else f"cubic {unit}" if unit else ""
    unit = unit_word(tokens[i])
    if unit == "degree" and i + 1 < len(tokens) and unit_word(tokens[i + 1]) in ("celsius", "fahrenheit"):
        return unit_word(tokens[i + 1])  # "27 degrees Celsius" is "27 °C"
    return unit


def _number(
    s: Sentence, tokens: Sequence[str], i: int, kind_of: _Kind, *, quoted: bool, periods: set[str]
) -> None:
    """A number (digits, or a number word with a unit) and its unit, as markers and words;
    ``periods``: the units the sentence's "annual", "monthly"... name."""
    kind, _low, value, _force, key, inline = kind_of
    tok, n_tok = tokens[i], len(tokens)
    unit = inline or _unit_at(tokens, i + 1)
    if not unit and i + 3 < n_tok and tokens[i + 1].lower() in _RANGE_WORDS and tokens[i + 2][:1].isdigit():
        unit = _unit_at(tokens, i + 3)  # a range, "1 to 3 months", "between 18 and 65 years": its unit
    if not unit and kind == "num" and any(tokens[k].lower() in _AGE for k in (i - 1, i - 2) if k >= 0):
        s.markers.setdefault(f"q{key} year", tok)  # "age ≥17" states "17 years", no need to keep it
    if not unit and kind == "num":
        for period in periods:  # "the annual fee is £65" states "£65 per year"
            s.markers.setdefault(f"q{key} {period}", tok)
    if kind == "num" and "-" in tok and tok.rsplit("-", 1)[1].isdigit():
        upper = tok.rsplit("-", 1)[1]  # a range, "21-24": both ends are numbers it states
        s.markers.setdefault(f"num:{upper}", upper)
        s.words.add(upper)
        if unit and not quoted:
            s.markers.setdefault(f"num:{upper} {unit}", tok)
    if kind == "numword":
        s.markers.setdefault("q" + key, tok)  # "one" may be a number: it makes one stated
    if not quoted and (kind == "num" or unit):
        s.markers[key] = tok
        if unit:
            shown = tok if inline or i + 1 >= n_tok else f"{tok} {tokens[i + 1]}"
            s.markers[f"{key} {unit}"] = shown
    if kind == "num":
        s.words.add(value)


_AGE = frozenset({"age", "aged", "ages"})
_PERIODS = {
    "annual": "year",
    "annually": "year",
    "yearly": "year",
    "monthly": "month",
    "weekly": "week",
    "daily": "day",
    "hourly": "hour",
    "nightly": "night",
}
_LINK = frozenset({"code", "reply", "label", "tag", "answer", "output", "return", "mark", "use"})
"""Words that only introduce a label or code ("reply with code X"): a clause of them and a label
states the label of the clause before it."""
_LINK_STEMS = frozenset(stem(w) for w in _LINK)
"""As the reader keeps words: stemmed ("reply" is "rep")."""


def _bind(s: Sentence, segments: list[tuple[set[str], set[str]]]) -> None:
    """Which condition words go with which label: a clause stating exactly one label binds its
    words to it; a clause of labels alone ("positive or negative") joins the clause before it."""
    merged: list[tuple[set[str], set[str]]] = []
    for labs, words in segments:
        if not labs and not words:
            continue
        if labs and words <= _LINK_STEMS and merged:
            merged[-1][0].update(labs)  # "positive or negative", "-> code T-RED": the clause before's
            continue
        merged.append((set(labs), set(words)))
    for labs, words in merged:
        if len(labs) == 1:
            (lab,) = labs
            for w in sorted(words - {"("}):  # in order: the same reason in every process
                s.bindings.setdefault(w, set()).add(lab)


__all__ = ["EXAMPLE_LEADS", "Reader", "Sentence", "tokenize"]
