"""Second held-out half (held-out-2): written and labelled after the check was frozen, before it ran on them."""

import json
from pathlib import Path

OUT = Path(__file__).resolve().parent / "faithfulness_pairs.jsonl"
start = sum(1 for _ in OUT.open()) + 1
SB, RS = "support-bot", "review-sentiment"
rows = []


def P(o, p, f, kind, ex=SB, note=""):
    rows.append(
        {
            "example": ex,
            "section": "tone",
            "original": o,
            "proposal": p,
            "faithful": f,
            "kind": kind,
            "source": "written",
            "note": note,
        }
    )


O1 = "When a customer reports a damaged item, ask for a photo of the damage, apologise, and reply with code DMG-420. Do not ask the customer to return the item before the photo has been checked."
P(
    O1,
    "Damaged item: ask for a photo, apologise, reply DMG-420. Don't ask for a return before the photo is checked.",
    True,
    "paraphrase",
)
P(
    O1,
    "Damaged item: ask for a photo, apologise, reply DMG-420. Ask for a return before the photo is checked.",
    False,
    "negation dropped",
)
P(
    O1,
    "Damaged item: ask for a photo, apologise, reply DMG-240. Don't ask for a return before the photo is checked.",
    False,
    "code changed",
)
P(O1, "Damaged item: ask for a photo, apologise, reply DMG-420.", False, "dropped prohibition")
O2 = "Gift cards are valid for 24 months from the date of purchase. They cannot be exchanged for cash. For questions about gift cards, reply with code GFT-610."
P(
    O2,
    "Gift cards: valid 24 months from purchase, not exchangeable for cash; reply GFT-610.",
    True,
    "paraphrase",
)
P(
    O2,
    "Gift cards: valid 12 months from purchase, not exchangeable for cash; reply GFT-610.",
    False,
    "number changed",
)
P(
    O2,
    "Gift cards: valid 24 weeks from purchase, not exchangeable for cash; reply GFT-610.",
    False,
    "unit changed",
)
P(
    O2,
    "Gift cards are valid for 24 months and can be exchanged for cash. Reply GFT-610.",
    False,
    "negation dropped",
)
O3 = "We are proud of our loyalty programme, which thousands of customers enjoy every year. Loyalty points expire after 12 months without a purchase. Questions about loyalty points are filed under LOY-800."
P(
    O3,
    "Loyalty points expire after 12 months without a purchase. Loyalty questions: LOY-800.",
    True,
    "dropped filler",
)
P(O3, "Loyalty points expire after 12 months. Loyalty questions: LOY-800.", False, "condition dropped")
P(O3, "Loyalty questions: LOY-800.", False, "dropped rule")
O4 = "Only offer free return shipping to customers who are members of the loyalty programme."
P(O4, "Free return shipping: loyalty members only.", True, "paraphrase")
P(O4, "Offer free return shipping to customers.", False, "scope dropped")
P(O4, "Never offer free return shipping to loyalty members.", False, "condition inverted")
O5 = "You should suggest the extended warranty when the customer buys an appliance, but you must not insist if they decline."
P(O5, "Suggest the extended warranty with appliances; never insist if declined.", True, "paraphrase")
P(
    O5,
    "You must sell the extended warranty with every appliance, and insist if they decline.",
    False,
    "modal changed",
)
P(O5, "Suggest the extended warranty with appliances.", False, "dropped prohibition")
O6 = "A message that asks about a refund is REFUND; a message that asks about delivery is SHIPPING; any other message is OTHER."
P(O6, "Refund questions: REFUND. Delivery questions: SHIPPING. Anything else: OTHER.", True, "paraphrase")
P(
    O6,
    "Refund questions: SHIPPING. Delivery questions: REFUND. Anything else: OTHER.",
    False,
    "labels swapped",
)
P(O6, "Refund questions: REFUND. Delivery questions: SHIPPING.", False, "dropped rule")
O7 = "Thanks for being part of the team! Answer in the customer's language. If you are unsure of the language, answer in English."
P(O7, "Answer in the customer's language; if unsure, in English.", True, "dropped filler")
P(O7, "Answer in English.", False, "dropped rule")
P(O7, "Answer in the customer's language; if unsure, in German.", False, "rule changed")
O8 = "Passwords must be at least 12 characters long and must not contain the customer's name."
P(O8, "Passwords: at least 12 characters, without the customer's name.", True, "paraphrase")
P(O8, "Passwords: at least 8 characters, without the customer's name.", False, "number changed")
P(
    O8,
    "Passwords: at least 12 characters, and they may contain the customer's name.",
    False,
    "negation dropped",
)
O9 = "Please remember that our team works hard every day. Escalate to a supervisor when the customer mentions a lawyer, except when the message is about a parking ticket."
P(
    O9,
    "Escalate to a supervisor if the customer mentions a lawyer, unless it is about a parking ticket.",
    True,
    "paraphrase",
)
P(O9, "Escalate to a supervisor if the customer mentions a lawyer.", False, "exception dropped")
P(
    O9,
    "Escalate to a supervisor if the customer mentions a parking ticket, except when about a lawyer.",
    False,
    "condition inverted",
)
O10 = "Hello and welcome! I'm here to help."
P(
    "Reply in at most three sentences. Never include links to other shops.",
    "Hello and welcome! I'm here to help.",
    False,
    "chat",
)
P(
    "Reply in at most three sentences. Never include links to other shops.",
    "Sure! Here is the shortened version: Reply briefly.",
    False,
    "preamble",
)
P(
    "Reply in at most three sentences. Never include links to other shops.",
    "Max three sentences; no links to other shops.",
    True,
    "extreme",
)
P(
    "Reply in at most three sentences. Never include links to other shops.",
    "Max three sentences; include links to other shops.",
    False,
    "negation dropped",
)
O11 = "The weekly report is sent on Mondays at 9:00 to the team lead. It lists every ticket escalated during the week."
P(
    O11,
    "Send the weekly report Mondays at 9:00 to the team lead, listing every ticket escalated that week.",
    True,
    "paraphrase",
)
P(
    O11,
    "Send the weekly report Fridays at 9:00 to the team lead, listing every ticket escalated that week.",
    False,
    "rule changed",
)
P(O11, "Send the weekly report Mondays at 11:00 to the team lead.", False, "number changed")
O12 = 'Review: "Great blender, but the lid cracked after a week."\nAnswer: The sentiment of this review is negative.\nReview: "Works perfectly, very quiet."\nAnswer: The sentiment of this review is positive.'
P(
    O12,
    'Review: "Works perfectly, very quiet."\nAnswer: The sentiment of this review is positive.',
    True,
    "dropped example",
    RS,
)
P(O12, "The sentiment of this review is negative.", False, "answer", RS)
P(
    O12,
    'Review: "Great blender, but the lid cracked after a week."\nAnswer: The sentiment of this review is positive.\nReview: "Works perfectly, very quiet."\nAnswer: The sentiment of this review is negative.',
    False,
    "labels swapped",
    RS,
)
with OUT.open("a") as f:
    for i, d in enumerate(rows):
        f.write(json.dumps({"id": start + i, "split": "held-out-2", **d}, ensure_ascii=False) + "\n")
print(len(rows), "pairs appended from id", start)
