"""One word changed in a short sentence that states a fact or a rule (no order, no modal): the
check must see it though every other word is kept, and must let the same fact told tersely pass.
Written after 'Tickets are not refundable.' -> 'Tickets are refundable.' was found accepted."""

from __future__ import annotations

import pytest

from optiflow.core import faithfulness as F

CTX = F.FaithfulnessContext()

CHANGED = [
    ("Tickets are not refundable.", "Tickets are refundable.", "negation 'not'"),
    ("Gift cards are non-refundable.", "Gift cards are refundable.", "negation 'non-refundable'"),
    ("Gift cards cannot be refunded.", "Gift cards can be refunded.", "negation 'cannot'"),
    ("Only managers can approve refunds.", "Managers can approve refunds.", "restriction 'Only'"),
    (
        "The store is closed on Sundays.",
        "The store is open on Sundays.",
        "'open' where the original says 'closed'",
    ),
    (
        "Escalate if the customer is angry.",
        "Escalate if the customer is calm.",
        "'calm' where the original says 'angry'",
    ),
    ("Shipping is free for orders over $50.", "Shipping is free for orders under $50.", "'over' to 'under'"),
    ("Returns are accepted within 30 days.", "Returns are accepted within 60 days.", "'30' to '60'"),
    (
        "Passports must be valid 6 months after departure.",
        "Passports must be valid 6 months before departure.",
        "'after' to 'before'",
    ),
    (
        "Gusts above 25 knots cancel the lesson.",
        "Gusts above 25 mph cancel the lesson.",
        "'25 knots' to '25 mph'",
    ),
]

KEPT = [
    ("The store is closed on Sundays.", "Closed Sundays."),
    ("Gift cards cannot be refunded.", "Gift cards: non-refundable."),
    ("Tickets are not transferable.", "Tickets: non-transferable."),
    ("Output nothing but the JSON object.", "Output only the JSON object."),
    ("Campfires are allowed only in the provided fire rings.", "Campfires only in the provided fire rings."),
    ("Flights above 400 feet are prohibited.", "Never allow flights higher than 400 feet."),
    ("Members may cancel at any time.", "Members can cancel at any time."),
    ("Donors must be at least 17 years old.", "Donors: age 17 or older."),
]


@pytest.mark.parametrize(("original", "proposal", "named"), CHANGED)
def test_one_word_changed_is_refused_naming_it(original: str, proposal: str, named: str) -> None:
    v = F.check(original, proposal, CTX)
    assert not v.faithful and named in v.reason, v.reason


@pytest.mark.parametrize(("original", "proposal"), KEPT)
def test_the_same_fact_told_tersely_passes(original: str, proposal: str) -> None:
    v = F.check(original, proposal, CTX)
    assert v.faithful, v.reason
