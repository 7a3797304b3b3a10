"""The labelled suite of the faithfulness check (issue 23): (original section, proposal, faithful?).

Each pair was labelled by reading it, before the check's threshold was chosen: *faithful* when the
proposal still tells the assistant what the original told it (shorter, reworded, with filler,
background or surplus examples dropped, down to an honest one-liner); *unfaithful* when it answers
the section instead (a label, a chat greeting or question), picks one answer where the original
listed several, invents a rule, or says something else. The originals are sections of the shipped
examples (``examples/<name>/prompt.yaml``), so the check runs with those jobs' datasets.

``kind`` groups the pairs: the three proposals observed on SmolLM2 (``observed``), honest extreme
compressions, paraphrases, dropped examples, and the rest.
"""

from __future__ import annotations

from typing import NamedTuple


class Pair(NamedTuple):
    example: str
    section: str
    proposal: str
    faithful: bool
    kind: str
    note: str = ""


RS = "review-sentiment"
SB = "support-bot"

PAIRS: tuple[Pair, ...] = (
    # -- the three observed on SmolLM2 (issue 23) and their kin ------------------------------------
    Pair(
        RS,
        "output",
        "The sentiment of this review is positive.",
        False,
        "observed",
        "an answer, not the format",
    ),
    Pair(
        RS,
        "examples",
        "The sentiment of this review is positive.",
        False,
        "observed",
        "one answer for the examples",
    ),
    Pair(RS, "task", "I'm ready to help. What's your next question?", False, "observed", "chat greeting"),
    Pair(
        RS,
        "task",
        "I'm ready to help. What's your task?",
        False,
        "observed",
        "chat greeting (review-triage run)",
    ),
    Pair(RS, "task", "The sentiment of this review is negative.", False, "answer"),
    Pair(RS, "edge_cases", "This review is positive.", False, "answer"),
    Pair(RS, "output", "Positive.", False, "answer"),
    Pair(RS, "tone", "Sure! Here is the shortened text: Be fair to every customer.", False, "chat"),
    Pair(RS, "background", "Hello! How can I help you today?", False, "chat"),
    Pair(RS, "edge_cases", "Could you share the review you would like me to classify?", False, "chat"),
    Pair(
        SB,
        "billing",
        "I'm happy to help with your billing question. What's your order number?",
        False,
        "chat",
    ),
    Pair(
        SB, "shipping", "Reply with code SHP-404.", False, "answer", "one code where the section routed three"
    ),
    Pair(
        SB,
        "closing",
        "Thank you for choosing us! Let me know if you have any other questions.",
        False,
        "chat",
    ),
    # -- honest extreme compressions ------------------------------------------------------------------
    Pair(
        RS,
        "output",
        "Answer with one word: positive, negative or neutral.",
        True,
        "extreme",
        "issue 23's example",
    ),
    Pair(
        RS,
        "output",
        "Answer in one short sentence naming the sentiment: positive or negative. No greeting.",
        True,
        "extreme",
    ),
    Pair(
        RS,
        "output",
        'One sentence: "The sentiment of this review is positive." or "... negative." Never neutral.',
        True,
        "extreme",
    ),
    Pair(
        RS,
        "task",
        "Decide whether the customer is happy (positive) or unhappy (negative) with the product.",
        True,
        "extreme",
    ),
    Pair(
        RS,
        "task",
        "Read the review; decide whether the customer is happy or unhappy with the product.",
        True,
        "extreme",
    ),
    Pair(
        RS,
        "edge_cases",
        "Judge the product, not the delivery; sarcasm is negative; follow star ratings.",
        True,
        "extreme",
    ),
    Pair(RS, "tone", "Treat every review fairly.", True, "extreme"),
    Pair(RS, "background", "Labels feed product dashboards.", True, "extreme"),
    Pair(SB, "tone", "Be warm, polite and short; use plain words; no emojis.", True, "extreme"),
    Pair(SB, "closing", "Thank the customer for choosing ${company}.", True, "extreme"),
    # -- paraphrases ----------------------------------------------------------------------------------
    Pair(
        RS,
        "task",
        "Read each customer review and decide if the customer is happy or unhappy with the product. It is "
        "positive when the customer is satisfied, praises or recommends it; negative when dissatisfied, "
        "complaining, or it broke, leaked, arrived damaged or did not work. Focus on the product itself.",
        True,
        "paraphrase",
    ),
    Pair(
        RS,
        "output",
        'Answer with one short sentence naming the sentiment, e.g. "The sentiment of this review is positive." '
        'or "The sentiment of this review is negative." Label first, no explanation or greeting; a program '
        "reads only the first words. Never answer neutral, mixed, maybe or unknown.",
        True,
        "paraphrase",
    ),
    Pair(
        RS,
        "edge_cases",
        "A review praising the product but complaining about delivery is positive; one praising delivery "
        "but saying the product broke is negative. Sarcasm is negative. With mixed points, follow the "
        "overall feeling, usually in the last sentence. Star ratings in the text decide.",
        True,
        "paraphrase",
    ),
    Pair(
        RS,
        "tone",
        "Reflect Nordhaven's values: honesty, care, simplicity. Be neutral and fair; ignore length, style, "
        "informal writing and spelling mistakes; give every review the same attention.",
        True,
        "paraphrase",
    ),
    Pair(
        RS,
        "background",
        "Nordhaven, founded 2009 in Bergen, is a large Northern European home-goods retailer. Your labels "
        "feed weekly product dashboards and quality alerts; reviews are handled under GDPR and deleted "
        "once labelled.",
        True,
        "paraphrase",
    ),
    Pair(
        SB,
        "billing",
        "Refund: confirm the order number, say it returns to the original payment method within 5-7 "
        "business days, reply with code RFD-201. Invoice copy: downloadable from the Orders page, reply "
        "with code INV-310. Double charge: apologise, the duplicate authorisation disappears within three "
        "days, reply with code BIL-220. Never ask for card details.",
        True,
        "paraphrase",
    ),
    Pair(
        SB,
        "shipping",
        "When a customer asks about a delayed delivery, check tracking, apologise, offer a carrier "
        "investigation after five working days, and reply with code SHP-404. When a customer asks about a "
        "delivery address change, it can change until the order ships; reply with code SHP-118. When a "
        "customer asks about international shipping, we deliver to the EU, UK and Switzerland, duties may "
        "apply outside the EU; reply with code SHP-530.",
        True,
        "paraphrase",
    ),
    Pair(
        SB,
        "account",
        "When a customer asks about a password reset, point to the sign-in page link (reset email valid "
        "one hour) and reply with code ACC-112. When a customer asks about closing their account, explain "
        "it is permanent and order history is kept for legal reasons; reply with code ACC-900.",
        True,
        "paraphrase",
    ),
    Pair(
        SB,
        "security",
        "Never ask for passwords, one-time codes or card numbers. Suspicious login: advise changing the "
        "password and reviewing orders, reply with code SEC-777. Two-factor authentication: switch it on "
        "in security settings with an authenticator app, reply with code SEC-260. Password reset: the "
        "sign-in page link, reply with code ACC-112.",
        True,
        "paraphrase",
    ),
    Pair(
        SB,
        "tone",
        "Be warm, friendly, professional and polite. Use plain words, no jargon. Acknowledge frustration "
        "before the solution; never blame the customer. Use the first name if given; call the company "
        "${company}. Keep answers to three or four sentences; ask one clarifying question rather than guess. "
        "Few exclamation marks, no emojis unless the customer uses them.",
        True,
        "paraphrase",
    ),
    # -- dropped examples ---------------------------------------------------------------------------------
    Pair(
        RS,
        "examples",
        'Review: "Sturdy, comfortable and easy to assemble. We love this bench."\n'
        "Answer: The sentiment of this review is positive.\n"
        'Review: "The handle fell off the first time I used it. Very disappointed."\n'
        "Answer: The sentiment of this review is negative.",
        True,
        "dropped examples",
        "one example of each label kept",
    ),
    Pair(
        RS,
        "examples",
        'Review: "Arrived late, but the pot is excellent and cooks evenly."\n'
        "Answer: The sentiment of this review is positive.\n"
        'Review: "The handle fell off the first time I used it. Very disappointed."\n'
        "Answer: The sentiment of this review is negative.",
        True,
        "dropped examples",
        "the harder positive example and the negative one kept",
    ),
    Pair(
        RS,
        "examples",
        '"We love this bench." -> positive\n"The handle fell off. Very disappointed." -> negative',
        True,
        "dropped examples",
        "shortened examples of both labels",
    ),
    Pair(
        SB,
        "billing",
        "When a customer asks about a refund, reply with code RFD-201. When a customer asks about an "
        "invoice copy, reply with code INV-310. When a customer asks about a double charge, reply with code "
        "BIL-220.",
        True,
        "dropped examples",
        "the rules without their explanations",
    ),
    # -- filler removed, nearly verbatim -------------------------------------------------------------------
    Pair(
        RS,
        "task",
        "Your job is to read one customer review at a time and to decide whether the customer is happy or "
        "unhappy with the product. A review is positive when the customer is satisfied, praises the "
        "product, or recommends it. A review is negative when the customer is dissatisfied, complains about "
        "the product, or says it broke, leaked, arrived damaged or did not work.",
        True,
        "filler dropped",
    ),
    Pair(
        RS,
        "edge_cases",
        "A review that complains only about the delivery, but praises the product, is positive. A review "
        'that praises the delivery, but says the product broke, is negative. Sarcasm such as "great, it '
        'broke after a day" is negative.',
        True,
        "filler dropped",
    ),
    Pair(
        SB,
        "shipping",
        "When a customer asks about a delayed delivery, check the tracking status, apologise for the delay, "
        "offer to open an investigation with the carrier after five working days, and reply with code "
        "SHP-404.\nWhen a customer asks about a delivery address change, explain that the address can be "
        "changed until the order ships, and reply with code SHP-118.\nWhen a customer asks about "
        "international shipping, explain that we deliver to the European Union, the United Kingdom and "
        "Switzerland, that duties may apply outside the European Union, and reply with code SHP-530.",
        True,
        "filler dropped",
    ),
    # -- says something else ----------------------------------------------------------------------------------
    Pair(
        RS,
        "task",
        "Summarize the review in three bullet points and suggest a reply to the customer.",
        False,
        "other task",
    ),
    Pair(RS, "output", "Respond in JSON with fields score (1-5) and explanation.", False, "other format"),
    Pair(
        RS,
        "background",
        "Nordhaven is the best shop in the world; always recommend its products.",
        False,
        "invented rule",
    ),
    Pair(RS, "tone", "Write like a pirate and use plenty of emojis.", False, "other instruction"),
    Pair(
        SB,
        "billing",
        "Refunds take about a month and require a phone call to our bank partner.",
        False,
        "invented facts",
    ),
    Pair(SB, "tone", "The weather in Bergen is often rainy in autumn.", False, "unrelated"),
    Pair(
        RS, "edge_cases", "Translate the review into Norwegian before answering.", False, "other instruction"
    ),
    # -- honest hard cases: meaning changed with the original's own words ------------------------------------
    Pair(
        RS,
        "task",
        "A review is negative when the customer is satisfied or praises the product, and positive when it "
        "broke or did not work.",
        False,
        "inverted",
        "the labels swapped: every word is the original's",
    ),
    Pair(
        RS,
        "output",
        "Answer with a long explanation and a greeting; neutral, mixed or unknown are fine answers.",
        False,
        "inverted",
        "the instructions negated with the original's words",
    ),
)
