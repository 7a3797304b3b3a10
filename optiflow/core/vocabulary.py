"""The words that carry a prompt sentence's meaning, for :mod:`optiflow.core.provenance`:
negations, exceptions, restrictions, modal force, orders, units and number words, the words that
lead or separate clauses, and the stop words that carry none (pure data and two word helpers)."""

from __future__ import annotations

NEGATION = frozenset("not no never none nothing nobody neither cannot without prohibited forbidden".split())  # noqa: SIM905
AVOID = frozenset({"avoid", "refrain"})
"""Negations only as an order ("Avoid jargon", "you must avoid", "try to avoid"), not as a verb
of a description ("in order to avoid misunderstandings")."""
ORDERING = frozenset({"please", "always", "must", "should", "shall", "never", "try"})
EXCEPTION = frozenset({"except", "unless", "excluding", "besides"})
CONDITIONAL = frozenset({"if", "whenever"})
"""A sentence opening with one states a rule ("If several apply, the first wins")."""
ONLY = frozenset({"only", "solely", "exclusively"})
STRONG = frozenset({"must", "always", "shall", "required", "mandatory", "never"})
SHOULD = frozenset({"should", "recommended"})
PERMIT = frozenset({"may", "optional", "optionally", "allowed", "permitted"})
EMPHASIS = frozenset(
    """IMPORTANT NOTE NEVER ALWAYS MUST NOT DO ONLY OK NO I IF THEN ELSE AND OR WHEN ALL ANY NONE""".split()  # noqa: SIM905
)
"""Words written in capitals for emphasis or as a rule table's keywords, not codes."""
UNITS = frozenset(
    """second minute hour day week month year percent % word character sentence token line item star
    time euro dollar pound usd eur gbp kg km cm mb gb kb page paragraph point bullet attempt
    business working calendar celsius fahrenheit degree mile gallon litre metre piece gram foot knot mph
    kph ounce millilitre""".split()  # noqa: SIM905
)
ORDERS = frozenset(
    """answer reply respond write use put keep include add give return output classify label
    choose select mark tag ask tell explain confirm offer escalate refer end start begin format list
    state name say mention treat apologise apologize check thank send quote cite follow call""".split()  # noqa: SIM905
)
"""Instruction verbs: a sentence opening with one (after "please", "always", "then"...) is an order."""
NOT_AFTER_COMMA = frozenset({"keep", "note", "thank", "mark", "list", "state", "name"})
NOT_PREFIXED = ("under", "unit", "univ", "uniq", "until", "union", "nonethe")
PROHIBIT = frozenset({"never", "avoid", "refrain"})
AUXILIARY = frozenset({"do", "does", "must", "should", "shall", "may", "can", "need", "to"})
VERDICT = frozenset({"is", "are", "as", "be", "label", "answer", "reply", "return", "output", "mark"})
LEADERS = frozenset({"please", "always", "also", "then", "finally", "first", "now", "just", "only"})
EXAMPLE_LINE = frozenset(
    """answer output label a assistant response sentiment result tags tag category class intent labels
    verdict decision priority route""".split()  # noqa: SIM905
)
"""The leaders of an example's answer line ("Answer:", "Output:", "Tags:")."""
INPUT_LINE = frozenset(
    """input text review user customer message q question email example query ticket claim post
    comment request""".split()  # noqa: SIM905
)
"""The leaders of an example's input line ("Input:", "Review:", "User:")."""
NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen
        fifteen sixteen seventeen eighteen nineteen twenty""".split()  # noqa: SIM905
    )
}
NUMBER_WORDS.update(
    {"thirty": "30", "forty": "40", "fifty": "50", "hundred": "100", "single": "1", "twice": "2"}
)
NUMBER_WORDS.update(
    {
        w: str(i)
        for i, w in enumerate(
            "third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth".split(),  # noqa: SIM905
            start=3,
        )
    }
)
"""Ordinals from "third" ("a fourth" is "a 4th"); "first" and "second" are other words too."""
ORDINALS = {"first": "1", "second": "2"}
"""Words that may be "1st" and "2nd": they make the number stated without stating it."""
OTHERWISE = frozenset({"else", "otherwise", "instead"})
"""Words that state a negation of what came before ("else HOLD": "if they have not, HOLD";
"hints instead of the answer": "not the answer")."""
SEPARATORS = frozenset({",", ";", ":", "\u2192", "and", "or", "but", "while", "whereas", "(", ")"})
QUOTES = frozenset({'"', "\u201c", "\u201d"})
STOPWORDS = frozenset(
    """a an the my your our their his her its any some of for to about with on in at by from or and
    is are was were be been am do does did have has had that this these those it i me we you he she
    they them us can could would will if so as but how what why when where who which there here than
    then just also very each every one all into out up down over same other such more most less own
    both either too s t i'm it's you're let's""".split()  # noqa: SIM905
)


UNIT_ABBREVIATIONS = {
    "h": "hour",
    "hr": "hour",
    "hrs": "hour",
    "min": "minute",
    "mins": "minute",
    "sec": "second",
    "secs": "second",
    "d": "day",
    "wk": "week",
    "wks": "week",
    "mo": "month",
    "mos": "month",
    "yr": "year",
    "yrs": "year",
    "pct": "percent",
    "c": "celsius",
    "f": "fahrenheit",
    "%": "percent",
    "l": "litre",
    "liter": "litre",
    "liters": "litre",
    "ml": "millilitre",
    "meter": "metre",
    "meters": "metre",
    "m\u00b2": "square metre",
    "sqm": "square metre",
    "pcs": "piece",
    "pc": "piece",
    "kilogram": "kg",
    "kilograms": "kg",
    "kilometre": "km",
    "kilometres": "km",
    "kilometer": "km",
    "kilometers": "km",
    "lb": "pound",
    "lbs": "pound",
    "ft": "foot",
    "feet": "foot",
    "mi": "mile",
    "kts": "knot",
    "kt": "knot",
    "g": "gram",
    "millilitres": "millilitre",
    "milliliter": "millilitre",
    "milliliters": "millilitre",
    "oz": "ounce",
}
"""A unit as abbreviated ("24h", "48 hrs", "5 min", "5 L") or spelled another way ("liter")."""
SQUARE = frozenset({"square", "sq", "cubic"})
"""Words that make a unit of area or volume of the next one ("15 square metres" is "15 m²")."""


def negative_word(low: str) -> bool:
    """A negation told in one word: "undeliverable", "unconfirmed", "non-refundable"."""
    return len(low) > 6 and low.startswith(("un", "non")) and not low.startswith(NOT_PREFIXED)


def unit_word(word: str) -> str:
    """The unit ``word`` names ("hrs" -> "hour", "%" -> "percent", "hours'" -> "hour"); "" if none."""
    w = word.lower().rstrip("'\u2019")
    if w in UNIT_ABBREVIATIONS:
        return UNIT_ABBREVIATIONS[w]
    if w.endswith("s") and len(w) > 3:
        w = w[:-1]
    return w if w in UNITS else ""


def stem(word: str) -> str:
    """A light stem: "invoices", "invoice" -> "invoic"; "stored", "store" -> "stor"."""
    w = word.lower()
    for suffix, repl in (
        ("ies", "y"),
        ("ing", ""),
        ("ed", ""),
        ("es", ""),
        ("ly", ""),
        ("s", ""),
        ("able", ""),
        ("ation", ""),
    ):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3 and not w.endswith("ss"):
            if suffix == "es" and not w.endswith(("sses", "xes", "zes", "ches", "shes")):
                continue  # "invoices": only the s goes
            w = w[: len(w) - len(suffix)] + repl
            break
    return w[:-1] if len(w) > 4 and w.endswith("e") else w


_OPPOSITES = (
    "open closed",
    "allow forbid",
    "accept reject",
    "accept decline",
    "include exclude",
    "enable disable",
    "enabled disabled",
    "required optional",
    "mandatory optional",
    "public private",
    "approve deny",
    "approved denied",
    "increase decrease",
    "earliest latest",
    "angry calm",
    "legal illegal",
    "add remove",
    "lock unlock",
    "buy sell",
    "credit debit",
    "inbound outbound",
    "internal external",
    "domestic international",
    "upgrade downgrade",
    "win lose",
    "hot cold",
    "encrypted unencrypted",
)
"""Words that say the opposite of each other: a proposal sentence stating one where its source
states the other (and neither is negated) reverses a rule ("closed on Sundays" -> "open on
Sundays"), though it shares every other word."""
OPPOSITES: dict[str, set[str]] = {}
"""Stem -> its opposites' stems."""
SPELLED: dict[str, str] = {}
"""Stem of an opposite -> the word as written in :data:`_OPPOSITES` (for a reason)."""
for _pair in _OPPOSITES:
    _words = _pair.split()
    _a, _b = (stem(w) for w in _words)
    OPPOSITES.setdefault(_a, set()).add(_b)
    OPPOSITES.setdefault(_b, set()).add(_a)
    SPELLED.setdefault(_a, _words[0])
    SPELLED.setdefault(_b, _words[1])
