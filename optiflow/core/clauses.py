"""Clause-level meaning checks of a compression (pure; issue 31): what a sentence-level reading of
markers misses when a proposal keeps a clause's words and changes what it says.

:mod:`optiflow.core.provenance` maps each proposal sentence to the original sentence(s) it comes
from. Within such a pair this module reads *clauses* (a sentence cut at ``, ; : ( )``) and finds:

- **polarity**: a proposal clause made mostly of one original clause's words (at least
  :data:`MIN_SHARED` of them, and at least half of its own) whose negation differs from every
  original clause it shares as many words with: "do not let the length of a review influence you"
  → "let a review's length influence you", "They cannot be exchanged for cash" → "can be exchanged
  for cash", "Only offer free shipping to members" → "Never offer free shipping to members".
  "not ... unless X" told as "only X" is the same rule; negative verbs (refuse, ignore, avoid)
  and "few", "rarely" count as negations;
- **an exception moved**: the words after "except"/"unless" in the proposal are the original's
  main case and none of its exception ("... a lawyer, except about a parking ticket" → "... a
  parking ticket, except about a lawyer");
- **a name added**: a capitalised word inside a sentence ("Fridays", "German") that the original
  does not have in any form: a day, a language, a country or a team changed;
- **a comparison turned round** (:func:`direction`): "below" → ">", "within 14 days" → "after";
  "never more than 25 kg" is "at most 25 kg" (a negation just before a comparison turns it, unless
  a second negation cancels it, :func:`cancelled`); only thresholds count (a number or a named
  level in the clause, or three words in common);
- **an obligation softened** (:func:`weakened`): "must never ask" → "try to avoid asking";
- **a unit changed** (:func:`units_changed`): "per month" → "per week";
- **acronyms**: the initials of the original's consecutive words ("two-factor authentication" →
  "2FA"), so a proposal's acronym is no new code.

Every step is a bounded number of set operations per token: clause overlaps go through an inverted
index whose buckets are capped, so the work is linear in the two texts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from optiflow.core.vocabulary import NUMBER_WORDS, ORDERS, QUOTES, STOPWORDS, negative_word, stem, unit_word

MIN_SHARED = 2
"""A proposal clause is compared with an original clause when they share at least this many
content words (and the shared words are at least half of the proposal clause's)."""
POSTINGS = 24
"""An original clause list longer than this for one word does not vote (a word in every clause
tells nothing of where a clause comes from)."""
NEGATIVE = frozenset(
    """not no never none nothing nobody neither nor cannot without avoid refrain refuse decline
    ignore forbid forbidden prohibit prohibited disallow omit skip exclude rarely seldom hardly
    few""".split()  # noqa: SIM905
)
"""Words that make a clause negative for the polarity check (and every ``n't``)."""
PURE = frozenset("not no never none nothing nobody neither nor cannot without".split())  # noqa: SIM905
"""The negations that cancel in pairs ("not ... without"); a negative verb does not."""
EXCEPT = frozenset({"except", "unless", "excluding", "besides"})
ONLY = frozenset({"only", "solely", "exclusively"})
CUT = frozenset({",", ";", ":", "\u2192", "(", ")"})
STRONG = frozenset({"must", "always", "never", "shall", "required", "mandatory"})
REFUSE = frozenset(
    """refuse decline ignore omit skip exclude forbid prohibit reject withhold off-limits forbidden
    prohibited banned disallowed free refused declined rejected excluded omitted""".split()  # noqa: SIM905
)
"""Verbs that tell a negation: "Do not enter" is "Stay out"; "do not answer" is "decline"."""
HEDGES = frozenset(
    """try usually ideally preferably possible generally normally typically sometimes occasionally might
    could""".split()  # noqa: SIM905
)
"""Words that soften an order: a proposal using one where the original obliges weakens it."""
_AS_FITS = frozenset({"relevant", "appropriate", "applicable", "needed", "necessary", "possible", "useful"})
"""After "if", "when", "where", "as": an order left to the model's judgement ("if relevant")."""
LESS = frozenset(
    """below under less fewer lower shorter younger earlier before within < <= ≤ maximum smaller
    newer sooner cheaper lighter""".split()  # noqa: SIM905
)
MORE = frozenset(
    """above over more greater higher longer older later after exceed exceeds > >= ≥ minimum larger
    bigger heavier""".split()  # noqa: SIM905
)
"""Comparison words by direction ("at most" / "at least" too); "not more than" is "at most"."""
TEMPORAL = frozenset({"before", "after", "within", "earlier", "later"})
"""Comparisons in time: a negation before one ("don't ask before the photo is checked") governs
the verb, it does not turn the comparison round."""
THRESHOLD_WORDS = 3
"""A comparison without a number is a threshold when its clause shares this many words with the
original's ("fuel level on return is below the level at pickup")."""
CLAUSES = 200
"""At most this many clauses of a proposal sentence, and of its sources, are compared."""
ACRONYM = 6
"""Acronyms of up to this many words are recognised."""

Kind = Callable[[str], tuple[str, str, str, int, str, str]]
"""A token's (kind, lowered, stem or value, ...) as :class:`optiflow.core.reading.Reader` reads it."""


@dataclass(slots=True)
class Clause:
    words: set[str] = field(default_factory=set)
    negation: str = ""
    """The first word that makes it negative ("" when none)."""
    scope: list[str] = field(default_factory=list)
    """The content words after that negation, in order: the first is the word it governs."""
    negations: int = 0
    """How many negations it states: two ("not ... without") say something positive."""
    exception: bool = False
    only: bool = False
    direction: str = ""
    """A comparison it states: "<" (below, under, at most, within, not more than) or ">"."""
    comparisons: list[tuple[str, bool]] = field(default_factory=list)
    """Every comparison it states ("3 hours or more ... within 48 hours": both), each with whether
    a negation stands just before it."""
    compared: str = ""
    """The comparison as written."""
    flipped: bool = False
    """A negation just before the comparison turns it round ("not more than": "<")."""
    quantity: bool = False
    """It states a number, an amount or a named threshold ("12", "$10,000", "risk_tolerance"): a
    comparison is a threshold only then ("more than enough" is none)."""
    numbers: set[str] = field(default_factory=set)
    """The numbers it states, as digits ("4.3", "10,000"): a comparison with the same number is
    the same threshold ("Rating > 4.3 -> ..." against "Drivers below 4.3 are ...")."""
    bound: bool = False
    """A "no"/"not" just before "more/later/... than": the comparison that follows is turned."""
    when: str = ""
    """Its first comparison in time, "before" ("<") or "after" (">"): "valid 6 months after
    departure" is not "valid 6 months before departure", whatever else it compares."""


@dataclass(slots=True)
class Read:
    """One sentence read into clauses, its exception and main-case words, and its names."""

    clauses: list[Clause] = field(default_factory=list)
    excepted: set[str] = field(default_factory=set)
    main: set[str] = field(default_factory=set)
    names: dict[str, str] = field(default_factory=dict)
    """A capitalised word inside the sentence, lowered -> as written."""
    strong: str = ""
    """Its first word of obligation (must, always, never...)."""
    units: dict[str, str] = field(default_factory=dict)
    """Its units of time or measure, as :func:`optiflow.core.vocabulary.unit_word` names them."""
    hedges: set[str] = field(default_factory=set)
    """Its words that soften an order (try, usually, where possible...)."""
    refuses: str = ""
    """A verb that tells a negation ("refuse", "decline", "stay out", "keep away")."""


def read(tokens: Sequence[str], kind: Kind) -> Read:
    """One sentence's ``tokens`` (as :mod:`optiflow.core.provenance` splits it) in clauses; quoted words
    are an example's and carry no negation."""
    out = Read(clauses=[Clause()])
    quoted, in_exception, start = False, False, True
    prev = ""
    kinds = [kind(tok) for tok in tokens]
    for at, tok in enumerate(tokens):
        low = tok.lower()
        if tok in QUOTES:
            quoted = not quoted if tok == '"' else tok == "\u201c"
            start = True
            continue
        if low in CUT:
            out.clauses.append(Clause())
            if low in (";", ":", "\u2192", "("):
                # a heading's colon or an arrow: a name may follow it ("German → European Portuguese")
                start, in_exception = low not in (":", "\u2192"), False
            continue
        clause = out.clauses[-1]
        k = kinds[at]
        if tok[0].isdigit() or "_" in tok or tok[0] == "$" or low in NUMBER_WORDS:
            clause.quantity = True
            if k[0] in _NUMBER and len(clause.numbers) < CLAUSES:
                clause.numbers.add(k[2])  # its value as the reader spells it ("$500k": "500000")
        unit = unit_word(low)
        if low == "min" and not (prev[:1].isdigit() or prev in NUMBER_WORDS):
            unit = ""  # "Min age 10": a minimum; "5 min": minutes
        if not quoted:
            amount = at + 1 < len(tokens) and _amount(tokens[at + 1], kinds[at + 1][0])
            _modal(out, clause, tok, low, prev, unit if len(low) > 1 else "", amount)
            if low in ("no", "not") and at + 2 < len(tokens) and tokens[at + 2].lower() == "than":
                clause.bound = True  # "no more than 250 lb": a bound, "at most", no negation
            elif low in NEGATIVE or low.endswith("n't") or negative_word(low):
                # "decline" is no second "not"; nor is "nor" ("neither X nor Y" is one negation)
                clause.negations += (low in PURE and low != "nor") or low.endswith("n't")
                if not (low == "few" and prev == "a") and not clause.negation:
                    clause.negation = tok
                    if low not in NEGATIVE and not low.endswith("n't"):
                        # "unoccupied" governs "occupied": the word it negates is its stem past the prefix
                        clause.scope.append(stem(low.removeprefix("non").removeprefix("un").lstrip("-")))
            elif low in EXCEPT or (low == "but" and prev in NEGATIVE):
                clause.exception = in_exception = True  # "except", "unless", "nothing but"
            elif low in ONLY:
                clause.only = True
            if not start and tok[0].isupper() and not tok.isupper() and tok.isalpha() and len(tok) >= 3:
                out.names.setdefault(low, tok)
        start = start and tok.isdigit()  # "2. Get the incident date": the item's number, then its start
        prev = low
        if k[0] == "code" and "_" in tok:
            clause.words.add(low)  # a named threshold ("risk_tolerance") is what the clause compares
            continue
        if unit and unit not in _NOT_UNITS:
            word = unit  # "24 h" and "24 hours" compare the same unit
        elif k[0] in ("word", "exc", "avoid") and low not in STOPWORDS and low not in EXCEPT:
            word = k[2]
        else:
            continue
        clause.words.add(word)
        if clause.negation and not quoted and low not in NEGATIVE and word not in clause.scope:
            clause.scope.append(word)
        (out.excepted if in_exception else out.main).add(word)
    return out


_PREPOSITIONS = frozenset({"under", "over"})
"""Comparison words that are more often prepositions ("under code AML-12", "over the phone"): a
comparison only before an amount ("under $10,000", "over 30 kg")."""


_NUMBER = frozenset({"num", "numword"})
"""The reader's kinds of a number token (:meth:`optiflow.core.reading.Reader.kind`)."""


def _amount(tok: str, kind_of: str) -> bool:
    """A number (``kind_of`` the reader's kind of ``tok``), or a placeholder standing for one
    ("under ${min_budget}")."""
    return kind_of in _NUMBER or tok[0].isdigit() or tok.startswith("${")


def _modal(out: Read, clause: Clause, tok: str, low: str, prev: str, unit: str, amount: bool) -> None:
    """Obligation, softening and comparison words of one token (not quoted); ``unit`` the unit it
    names, ``amount`` whether a number follows it."""
    if unit and unit not in _NOT_UNITS:
        out.units.setdefault(unit, tok)
    refuse = (
        low in REFUSE
        or (low in ("out", "away") and prev in ("stay", "keep"))
        or (low, prev) == ("off", "hold")
    )
    if refuse and not out.refuses:  # "stay out", "hold off on confirming"
        out.refuses = tok
    if low in STRONG and not out.strong:
        out.strong = tok
    elif low in HEDGES or (low in _AS_FITS and prev in ("if", "when", "where", "as")):
        out.hedges.add(low)  # "usually", "if relevant", "where appropriate"
    if low in _PREPOSITIONS and not amount:
        return
    more = low in MORE or (low == "least" and prev == "at")
    less = low in LESS or (low == "most" and prev == "at")
    if clause.bound and (more or less):
        more, less, clause.bound = less, more, False  # "no more than" is "at most"
    # "not more than", "do not accept more than 12": a negation just before the comparison turns it
    turned = bool(clause.negation) and len(clause.scope) <= 2 and (low not in TEMPORAL or prev in PURE)
    if (more or less) and len(clause.comparisons) < CLAUSES:
        clause.comparisons.append(("<" if less else ">", turned))
    if low in ("before", "after") and not clause.when:
        clause.when = "<" if less else ">"
    if (more or less) and not clause.direction:
        clause.direction, clause.compared = ("<" if less else ">"), tok
        clause.flipped = turned


def _effective(c: Clause) -> str:
    """The comparison's direction with a negation before it applied: "never more than 25 kg" and
    "at most 25 kg" both say "<" (a negation after it is the predicate's: "bought more than 30
    days ago cannot be returned" still compares with ">")."""
    if not c.direction:
        return ""
    return c.direction if not _flips(c) else ("<" if c.direction == ">" else ">")


def _directions(c: Clause) -> set[str]:
    """Every comparison of the clause, each turned round by a negation just before it (unless a
    second negation cancels it)."""
    odd = c.negations % 2 == 1
    return {(">" if d == "<" else "<") if (turned and odd) else d for d, turned in c.comparisons}


def _flips(c: Clause) -> bool:
    """A negation before the comparison, not cancelled by a second one ("do not process transfers
    above $10,000 without approval" still compares with ">")."""
    return c.flipped and c.negations % 2 == 1


def traded(original: Read, made: Sequence[Read]) -> bool:
    """A negation of ``original`` told by turning its comparison round ("Never carry more than
    25 kg" -> "Carry at most 25 kg"): not a negation lost."""
    turned = {_effective(c) for c in original.clauses if _flips(c)}
    return any(_effective(c) in turned for m in made for c in m.clauses if c.direction and not _flips(c))


_NOT_UNITS = frozenset(
    "item line point time page word character sentence business working calendar star bullet attempt".split()  # noqa: SIM905
)
"""Units that are also common words, or qualify another unit ("business days")."""


def units_changed(proposal: Read, sources: Sequence[Read]) -> str:
    """A unit the proposal states where its sources state another and it not ("per month" ->
    "per week")."""
    if not proposal.units:
        return ""
    had: dict[str, str] = {}
    for r in sources:
        had.update(r.units)
    added = [u for u in proposal.units if u not in had]
    lost = [u for u in had if u not in proposal.units]
    if added and lost:
        return f"changes the unit {had[lost[0]]!r} to {proposal.units[added[0]]!r}"
    return ""


def weakened(proposal: Read, sources: Sequence[Read]) -> str:
    """The proposal softens an obligation of its sources ("must never ask" -> "try to avoid
    asking"; "always choose" -> "usually choose")."""
    if not proposal.hedges or proposal.strong:
        return ""
    strong = next((r.strong for r in sources if r.strong), "")
    had: set[str] = set()
    for r in sources:
        had |= r.hedges
    new = sorted(proposal.hedges - had)
    return f"weakens {strong!r} to {new[0]!r}" if strong and new else ""


def direction(proposal: Read, sources: Sequence[Read]) -> str:
    """A comparison of the proposal that points the other way from the original clause it is
    made of ("below" -> ">", "within 14 days" -> "after 14 days")."""
    originals = [c for r in sources for c in r.clauses if c.direction][:CLAUSES]
    for c in proposal.clauses:
        if not c.direction or len(c.words) < 1:
            continue
        best, tied = 0, []
        for o in originals:
            n = len(c.words & o.words)
            if n > best:
                best, tied = n, [o]
            elif n == best and n:
                tied.append(o)
        mine = _effective(c)
        same = [o for o in originals if c.numbers & o.numbers and not (o.negations or c.negations)]
        if same and all(mine not in _directions(o) for o in same):
            return f"changes the comparison {same[0].compared!r} to {c.compared!r}"  # the same threshold
        # a threshold: a number or a named level on both sides, or three words in common
        tied = [o for o in tied if (c.quantity and o.quantity) or best >= THRESHOLD_WORDS]
        if (
            best >= min(MIN_SHARED, len(c.words))
            and tied
            and all(
                mine not in _directions(o) and not _same_side(c, o) and not _told_by_only(c, o) for o in tied
            )
        ):
            return f"changes the comparison {tied[0].compared!r} to {c.compared!r}"
        if (
            c.when
            and not c.negation
            and best >= min(MIN_SHARED, len(c.words))
            and tied
            and all(o.when not in ("", c.when) and not o.negation for o in tied)
        ):  # "do not call before 9" is "call only after 9": negated ones are left to the rules above
            was, now = ("after", "before") if c.when == "<" else ("before", "after")
            return f"changes {was!r} to {now!r}"
    return ""


def _same_side(p: Clause, o: Clause) -> bool:
    """Both negate the same side of the comparison: "never allow flights higher than 400 feet"
    and "flights above 400 feet are prohibited" (a negation before or after it, one each)."""
    return bool(p.negation and o.negation) and p.direction in {d for d, _ in o.comparisons}


def polarity(proposal: Read, sources: Sequence[Read], elsewhere: Sequence[Clause] = ()) -> str:
    """A negation of the original that the proposal states un-negated, or one it adds (see the
    module docstring), as a reason; "" when none. ``elsewhere``: the negated clauses of the
    proposal's other sentences ("send the link; never reset it yourself" split at ";")."""
    originals = [c for r in sources for c in r.clauses if c.words][:CLAUSES]
    mine = [c for c in proposal.clauses if c.words][:CLAUSES]
    own = [c for c in mine if c.negation]
    negated = own + list(elsewhere[:POSTINGS])
    by_word = _index(mine)
    # "hold off on confirming", "refuse": a prohibition told in a word, as the original's sentences
    # read it when the proposal keeps them (provenance: "do not enter" is "stay out")
    told = bool(proposal.refuses) and not any(r.refuses for r in sources)
    for o in () if told else originals:
        if not o.negation or not o.scope or (o.negations % 2 == 0 and not negative_word(o.negation.lower())):
            continue  # two negations cancel; "unoccupied" is one, though no "not" is counted
        scope = set(o.scope)
        for c in by_word.get(o.scope[0], ()):
            shared = c.words & scope
            whole = o.words - {stem(o.negation.lower())} <= c.words  # "non-refundable": "refundable"
            short = not shared or (len(shared) < MIN_SHARED and not whole)
            if c.negation or short or _equivalent(c, o) or _turned(c, o):
                continue  # one word in common is no evidence, unless the proposal has all of o's
            if any(len(n.words & scope) >= MIN_SHARED for n in negated[:POSTINGS]):
                break  # told negated in another clause of the proposal
            words = ", ".join(repr(w) for w in sorted(shared)[:3])
            return f"drops the negation {o.negation!r} of {words}"
    with_word = _index(originals)
    for c in own:
        if not c.scope or c.negations % 2 == 0:
            continue
        scope = set(c.scope)
        matches = [o for o in with_word.get(c.scope[0], ()) if len(o.words & c.words) >= MIN_SHARED]
        if matches and not any(o.negation or _equivalent(c, o) or _turned(c, o) for o in matches):
            words = ", ".join(repr(w) for w in sorted(matches[0].words & scope)[:3])
            return f"adds the negation {c.negation!r} to {words}"
    return ""


def _index(clauses: Sequence[Clause]) -> dict[str, list[Clause]]:
    """Word -> the clauses that have it, at most :data:`POSTINGS` of them."""
    out: dict[str, list[Clause]] = defaultdict(list)
    for c in clauses:
        for w in c.words:
            if len(out[w]) < POSTINGS:
                out[w].append(c)
    return out


def _equivalent(p: Clause, o: Clause) -> bool:
    """ "do not ... unless X" and "only X": one rule told two ways."""
    return _told_by_only(p, o) or _told_by_only(o, p)


def _told_by_only(p: Clause, o: Clause) -> bool:
    """``p`` says with "only" what ``o`` says with a negation and an exception ("do not ... unless
    X": "only if X") or a comparison the other way ("not available after 14 days": "only available
    within 14 days"); "only if the ground is not frozen" is not "do not plow unless it is frozen"."""
    if not (p.only and not p.negation and o.negation):
        return False
    return o.exception or bool(p.direction and o.direction and p.direction != o.direction)


def cancelled(r: Read) -> bool:
    """Every negation of the sentence is one of two in its clause ("do not process transfers
    without approval": "transfers need approval")."""
    counts = [c.negations for c in r.clauses if c.negations]
    return bool(counts) and all(n % 2 == 0 for n in counts)


def _turned(p: Clause, o: Clause) -> bool:
    """One negation for another way round of the same comparison."""
    return (_flips(p) or _flips(o)) and bool(p.direction and o.direction) and _effective(p) == _effective(o)


def exception_moved(proposal: Read, sources: Sequence[Read]) -> str:
    """The proposal's exception words are the original's main case and none of its exception."""
    if not proposal.excepted:
        return ""
    excepted: set[str] = set()
    main: set[str] = set()
    for r in sources:
        excepted |= r.excepted
        main |= r.main
    if proposal.excepted & excepted:
        return ""
    moved = sorted((proposal.excepted & main) - excepted)
    if not moved:
        return ""
    return (
        f"makes {', '.join(repr(w) for w in moved[:3])} the exception, where the original makes it the rule"
    )


Vocabulary = tuple[set[str], set[str], dict[str, list[str]]]


def vocabulary(tokens: Iterable[str]) -> Vocabulary:
    """The original's words in any form: lowered and stemmed, their three- to five-letter
    prefixes, and the first :data:`ABBREVIATED` words of each initial."""
    words: set[str] = set()
    for tok in tokens:
        low = tok.lower().removesuffix("'s")
        for w in {low, *low.split("-")}:  # "Monday-to-Sunday" has "Sunday" ("Sun")
            words.add(w)
            words.add(stem(w))
    initials: dict[str, list[str]] = defaultdict(list)
    for w in sorted(words):
        if w[:1].isalpha() and len(initials[w[0]]) < ABBREVIATED:
            initials[w[0]].append(w)
    return words, {w[:n] for w in words for n in (3, 4, 5) if len(w) >= n}, initials


FUNCTION_WORDS = (
    NEGATIVE
    | EXCEPT
    | ONLY
    | STRONG
    | HEDGES
    | ORDERS
    | frozenset("may should can cannot need needs note then else".split())  # noqa: SIM905
)
"""Words that are never a name, capitalised or not (an instruction's own words)."""


def names_added(proposal: Iterable[Read], original: Vocabulary) -> str:
    """A capitalised word inside a proposal sentence that the original has in no form."""
    words, prefixes, initials = original
    for r in proposal:
        for low, shown in r.names.items():
            base = low.removesuffix("'s")
            if base in STOPWORDS or base in FUNCTION_WORDS:
                continue  # "All fine", "If red", "Never guess": a capital after a number or an arrow
            if (
                base in words
                or stem(base) in words
                or base[:5] in prefixes
                or base.removesuffix("s") in words
            ):
                continue  # its word, or its abbreviation ("Mon" for "Monday")
            if _CALENDAR.get(base.removesuffix("s"), "-") in words:
                continue  # "Mondays" for "Mon"
            if _shortens(base.removesuffix("s"), initials):
                continue  # "TVs" for "televisions"
            return f"adds the name {shown!r}"
    return ""


_CALENDAR = {
    day: day[:3]
    for day in """monday tuesday wednesday thursday friday saturday sunday january february march april
    june july august september october november december""".split()  # noqa: SIM905
}
"""Days and months by their three-letter abbreviation ("Mon", "Sept" aside)."""


ABBREVIATED = 64
"""Words of the original per initial an added name is compared with to see whether it shortens one
(bounded work per name)."""


def _shortens(name: str, initials: dict[str, list[str]]) -> bool:
    """``name`` (2 to 4 letters) is a longer word of the original with letters left out, its first
    one kept ("TV" for "television", "Dept" for "department")."""
    if not (2 <= len(name) <= 4 and name.isalpha()):
        return False
    for word in initials.get(name[0], ()):
        it = iter(word)
        if len(word) > len(name) + 2 and all(c in it for c in name):
            return True
    return False


def acronyms(tokens: Iterable[str]) -> set[str]:
    """The initials of every run of up to :data:`ACRONYM` consecutive words (number words as
    digits, hyphenated words apart): "two-factor authentication" gives "2FA"."""
    initials: list[str] = []
    for tok in tokens:
        for part in tok.split("-"):
            if not part or not (part[0].isalnum()):
                continue
            low = part.lower()
            if low in NUMBER_WORDS:
                initials.append(NUMBER_WORDS[low])
            elif part[0].isdigit():
                initials.append("".join(ch for ch in part if ch.isdigit())[:3])
            else:
                initials.append(part[0].upper())
    out: set[str] = set()
    for i in range(len(initials)):
        for n in range(2, ACRONYM + 1):
            if i + n <= len(initials):
                out.add("".join(initials[i : i + n]))
    return out


__all__ = [
    "Clause",
    "Read",
    "acronyms",
    "cancelled",
    "direction",
    "exception_moved",
    "names_added",
    "polarity",
    "read",
    "traded",
    "units_changed",
    "vocabulary",
    "weakened",
]
