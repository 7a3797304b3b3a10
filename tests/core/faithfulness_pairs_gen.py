"""One-off generator of tests/core/faithfulness_pairs.jsonl (labels by reading, written before tuning)."""

import json
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from pathlib import Path

from optiflow.core.provenance import sentences
from optiflow.jobfile import load_job

ROOT = Path(__file__).resolve().parents[2]
RS, SB, AP, WH = "review-sentiment", "support-bot", "agent-policy", "weak-helpdesk"
body = {}
for ex in (RS, SB, AP, WH):
    spec = load_job(ROOT / "examples" / ex / "job.yaml")
    for s in spec.prompt.sections:
        body[(ex, s.path[0])] = s.body
pairs = []


def P(ex, section, proposal, faithful, kind, source, note="", original=None):
    d = {
        "example": ex,
        "section": section,
        "proposal": proposal,
        "faithful": faithful,
        "kind": kind,
        "source": source,
    }
    if original is not None:
        d["original"] = original
    if note:
        d["note"] = note
    pairs.append(d)


# ---- real SmolLM2 proposals (bench/real_proposals.md), verbatim ---------------------------------
real = {}
txt = (ROOT / "bench/real_proposals.md").read_text()

for m in re.finditer(
    r"\*\*`(\w+)` / `(\w+)`\*\*.*?\n\n\| original \| proposal \|\n\| --- \| --- \|\n\| (.*?) \| (.*?) \|\n",
    txt,
    re.S,
):
    real[(m.group(1), m.group(2))] = m.group(4).replace("<br>", "\n")
assert len(real) == 12, len(real)
labels_real = {
    ("extractive", "background"): (True, "identity", "SmolLM2 kept every piece (wrapping only)"),
    ("extractive", "task"): (True, "identity", "every piece kept"),
    ("extractive", "output"): (
        False,
        "dropped prohibition",
        "drops 'Never answer with neutral ...: always choose'",
    ),
    ("extractive", "edge_cases"): (True, "identity", "every piece kept"),
    ("extractive", "examples"): (True, "identity", "unchanged"),
    ("extractive", "tone"): (True, "identity", "every piece kept"),
    ("llm", "background"): (
        False,
        "dropped rule",
        "drops the privacy rule (personal data never stored) and 2021; invents 'Norwegian', 'grow rapidly'",
    ),
    ("llm", "task"): (False, "chat", "greeting"),
    ("llm", "output"): (False, "answer", "an answer"),
    ("llm", "edge_cases"): (False, "garbled", "rules garbled into one sentence"),
    ("llm", "examples"): (False, "answer", "an answer"),
    ("llm", "tone"): (False, "preamble", "chat preamble, invented values"),
}
for (strat, sec), prop in real.items():
    f, kind, note = labels_real[(strat, sec)]
    P(RS, sec, prop, f, kind, f"real-{strat}", note)

# ---- derived from real extractive runs: the piece lists SmolLM2 chose from, one piece dropped -----
# label by reading what the dropped piece says
drop_labels = {
    "task": [
        (True, "dropped filler", "restated by the label definitions"),
        (False, "dropped rule", "read the whole review: opinion only clear at the end"),
        (False, "dropped rule", "the definition of positive"),
        (False, "dropped rule", "the definition of negative"),
        (False, "dropped rule", "focus on the product itself"),
    ],
    "output": [
        (False, "dropped rule", "the answer format"),
        (False, "dropped prohibition", "label first, no explanation or greeting"),
        (True, "dropped filler", "why: read by a program"),
        (False, "dropped prohibition", "never neutral/mixed"),
    ],
    "edge_cases": [
        (True, "dropped filler", "intro"),
        (False, "dropped rule", "delivery-only complaint is positive"),
        (False, "dropped rule", "broken product is negative"),
        (False, "dropped rule", "sarcasm is negative"),
        (False, "dropped rule", "mixed: overall feeling"),
        (False, "dropped rule", "star ratings should be followed"),
    ],
    "background": [
        (False, "dropped rule", "founding facts with 2009"),
        (False, "dropped rule", "2021 service facts"),
        (True, "dropped filler", "what labels are used for: background"),
        (False, "dropped prohibition", "privacy: personal data never stored"),
        (True, "dropped filler", "goal statement"),
    ],
    "tone": [
        (False, "dropped rule", "values it should reflect"),
        (False, "dropped prohibition", "be neutral, do not judge"),
        (True, "dropped filler", "same attention, restated by 'every customer'"),
    ],
}
for sec, labs in drop_labels.items():
    ps = sentences(body[(RS, sec)])
    assert len(ps) == len(labs), (sec, len(ps))
    for k, (f, kind, note) in enumerate(labs):
        prop = " ".join(p for i, p in enumerate(ps) if i != k)
        P(RS, sec, prop, f, kind, "derived-real-extractive", f"piece {k + 1} dropped: {note}")
# examples: a whole example pair dropped (honest: surplus example)
ex = body[(RS, "examples")].split("\n")
for k in range(3):
    prop = "\n".join(line for i, line in enumerate(ex) if i // 2 != k)
    P(RS, "examples", prop, True, "dropped example", "derived-real-extractive", f"example {k + 1} dropped")
# only the filler dropped, everything else kept (what an ideal extraction keeps)
keep_rules = {"task": [1, 2, 3, 4], "output": [0, 1, 3], "edge_cases": [1, 2, 3, 4, 5], "tone": [0, 1]}
for sec, keep in keep_rules.items():
    ps = sentences(body[(RS, sec)])
    P(
        RS,
        sec,
        " ".join(ps[i] for i in keep),
        True,
        "extreme",
        "derived-real-extractive",
        "filler dropped, every rule kept",
    )

# ---- derived from real llm proposals: SmolLM2's kinds of output, and edits of its text -----------
P(
    RS,
    "task",
    "I'm ready to help. What's your task?",
    False,
    "chat",
    "derived-real-llm",
    "observed on review-triage",
)
P(RS, "output", "The sentiment of this review is negative.", False, "answer", "derived-real-llm")
P(RS, "tone", "Here's a shortened version: Be neutral and fair.", False, "preamble", "derived-real-llm")
P(
    RS,
    "tone",
    "Sure! Be neutral and fair to every customer and do not judge informal writing.",
    False,
    "preamble",
    "derived-real-llm",
)
P(
    RS,
    "edge_cases",
    "A review that complains only about the delivery, but praises the product, is positive. A review that praises the product and says the delivery broke is negative.",
    False,
    "garbled",
    "derived-real-llm",
    "second rule garbled: delivery/product exchanged",
)
P(
    RS,
    "edge_cases",
    'A review complaining only about delivery but praising the product is positive; one praising delivery but saying the product broke is negative. Sarcasm ("great, it broke after a day") is negative. Mixed reviews: follow the overall feeling, usually in the last sentence. Follow star ratings in the text ("one star", "five stars").',
    True,
    "honest",
    "derived-real-llm",
    "what the edge_cases proposal should have been",
)
P(
    RS,
    "background",
    "Nordhaven, founded in 2009 in Bergen, is one of Northern Europe's largest online home-goods retailers. The review service (since 2021) feeds dashboards and quality alerts. Reviews are processed under the GDPR; personal data is never stored in the dashboards, and every review is deleted once labelled.",
    True,
    "honest",
    "derived-real-llm",
    "the background proposal with its facts and rule kept",
)
P(
    RS,
    "background",
    "Nordhaven was founded in 2009 and introduced the review service in 2021. Reviews are processed under the General Data Protection Regulation, personal data is stored in the dashboards, and reviews are deleted once labelled.",
    False,
    "negation dropped",
    "derived-real-llm",
)
P(
    RS,
    "background",
    "Nordhaven was founded in 2019 and introduced the review service in 2021. Reviews are processed under the General Data Protection Regulation; personal data is never stored in the dashboards, and reviews are deleted once labelled.",
    False,
    "number changed",
    "derived-real-llm",
)
P(
    RS,
    "output",
    'Answer in one short sentence naming the sentiment, e.g. "The sentiment of this review is positive." Put the label first; do not add an explanation or a greeting. Never answer neutral, mixed, maybe or unknown: always choose the closer label.',
    True,
    "honest",
    "derived-real-llm",
)
P(
    RS,
    "output",
    "Answer in one short sentence naming the sentiment. Put the label first; add an explanation and a greeting. Never answer neutral, mixed, maybe or unknown: always choose the closer label.",
    False,
    "negation dropped",
    "derived-real-llm",
)
P(
    RS,
    "output",
    "Answer in one short sentence naming the sentiment. Put the label first; do not add an explanation or a greeting. You may answer neutral or mixed when unsure.",
    False,
    "prohibition inverted",
    "derived-real-llm",
)
P(
    RS,
    "output",
    "Answer in three sentences naming the sentiment. Put the label first; do not add an explanation or a greeting. Never answer neutral, mixed, maybe or unknown: always choose the closer label.",
    False,
    "number changed",
    "derived-real-llm",
)
P(
    RS,
    "task",
    "Decide whether the customer is happy or unhappy with the product. Read the whole review first: the opinion is sometimes only clear at the end. Positive: satisfied, praises or recommends the product. Negative: dissatisfied, complains, or says it broke, leaked, arrived damaged or did not work. Always focus on the product itself.",
    True,
    "honest",
    "derived-real-llm",
)
P(
    RS,
    "task",
    "Decide whether the customer is happy or unhappy with the product. Read the whole review first. Negative: satisfied, praises or recommends the product. Positive: dissatisfied, complains, or says it broke, leaked, arrived damaged or did not work. Always focus on the product itself.",
    False,
    "labels swapped",
    "derived-real-llm",
)
P(
    RS,
    "task",
    "Decide whether the customer is happy or unhappy. Read the whole review first. A review is positive when the customer is satisfied, praises the product, or recommends it. A review is negative when the customer is dissatisfied or complains. Focus on what the customer thinks of the delivery.",
    False,
    "rule changed",
    "derived-real-llm",
    "product -> delivery",
)
P(
    RS,
    "tone",
    "Reflect Nordhaven's values: honesty, care, simplicity. Be neutral and fair to every customer and product; do not let a review's length or style influence you, and do not judge informal writing or spelling mistakes. Treat every review with the same attention.",
    True,
    "honest",
    "derived-real-llm",
)
P(
    RS,
    "tone",
    "Reflect Nordhaven's values: honesty, care, simplicity. Be neutral and fair; let a review's length and style influence you, and do not judge informal writing.",
    False,
    "negation dropped",
    "derived-real-llm",
)
P(
    RS,
    "tone",
    "Reflect Nordhaven's values: honesty, care, simplicity. Be neutral and fair to every customer and product; do not let a review's length or style influence you, and do not judge informal writing or spelling mistakes. Treat every review with the same attention.",
    True,
    "honest",
    "derived-real-llm",
    "duplicate of an honest tone proposal at temperature 0",
)
P(
    RS,
    "examples",
    'Review: "Sturdy, comfortable and easy to assemble. We love this bench."\nAnswer: The sentiment of this review is negative.\nReview: "The handle fell off the first time I used it. Very disappointed."\nAnswer: The sentiment of this review is positive.',
    False,
    "labels swapped",
    "derived-real-llm",
)
P(
    RS,
    "examples",
    'Review: "Sturdy, comfortable and easy to assemble. We love this bench."\nAnswer: The sentiment of this review is positive.\nReview: "The handle fell off the first time I used it. Very disappointed."\nAnswer: The sentiment of this review is negative.',
    True,
    "dropped example",
    "derived-real-llm",
)
P(
    RS,
    "edge_cases",
    "A review complaining only about delivery but praising the product is positive. Sarcasm is negative. Star ratings are a strong signal.",
    False,
    "dropped rule",
    "derived-real-llm",
    "drops the broken-product and mixed rules",
)
P(
    RS,
    "edge_cases",
    "A review complaining only about delivery but praising the product is negative; one praising delivery but saying the product broke is positive. Sarcasm is negative. Mixed: overall feeling, usually in the last sentence. Follow star ratings.",
    False,
    "labels swapped",
    "derived-real-llm",
)
P(
    RS,
    "edge_cases",
    'Delivery complaints with product praise: positive. Delivery praise with a broken product: negative. Sarcasm such as "great, it broke after a day": negative. Mixed reviews: the overall feeling, usually in the last sentence. Star ratings like "one star" or "five stars" should be followed.',
    True,
    "paraphrase",
    "derived-real-llm",
)

# ---- written: support-bot, weak-helpdesk, agent-policy, and the issue's own pairs -----------------
ISSUE = [
    (
        "Do not share order numbers in the reply.",
        "Share order numbers in the reply.",
        False,
        "negation dropped",
    ),
    (
        "Offer a refund within 14 days of delivery.",
        "Offer a refund within 4 days of delivery.",
        False,
        "number changed",
    ),
    (
        "Mentions of delays are negative; mentions of fast delivery are positive.",
        "Mentions of delays are positive; mentions of fast delivery are negative.",
        False,
        "labels swapped",
    ),
    (
        "Ask for the order number only when the customer has not given it.",
        "Ask for the order number when the customer has given it.",
        False,
        "condition inverted",
    ),
    (
        "Never promise a delivery date. Escalate chargebacks with code CHB-310.",
        "Escalate chargebacks with code CHB-310.",
        False,
        "dropped prohibition",
    ),
]
for o, p, f, k in ISSUE:
    P(RS, "task", p, f, k, "written-issue", "the issue's example", original=o)
W = [
    # billing
    (
        SB,
        "billing",
        "Handle billing with care. We never see or store full card numbers. Refunds: confirm the order number, explain refunds reach the original payment method within five to seven business days, reply with code RFD-201. Invoice copies: downloadable anytime from the Orders page; reply with code INV-310. Invoices are generated when an order ships. Never ask for card details in the chat. Double charge: apologise, explain the duplicate authorisation disappears within three days, reply with code BIL-220.",
        True,
        "honest",
    ),
    (
        SB,
        "billing",
        "Refunds: confirm the order number, say refunds take five to seven business days, reply RFD-201. Invoice copies: Orders page, reply INV-310. Never ask for card details in chat. Double charge: apologise, duplicate authorisation clears within three days, reply BIL-220. We never store full card numbers. Invoices exist only once an order ships, and refunds follow the warehouse check within two working days.",
        True,
        "honest",
    ),
    (
        SB,
        "billing",
        "Refunds: confirm the order number, say refunds take five to seven business days, reply RFD-201. Invoice copies: Orders page, reply INV-310. Double charge: apologise, duplicate authorisation clears within three days, reply BIL-220.",
        False,
        "dropped prohibition",
    ),
    (
        SB,
        "billing",
        "Refunds: confirm the order number, say refunds take two to three business days, reply RFD-201. Invoice copies: Orders page, reply INV-310. Never ask for card details in chat. Double charge: apologise, duplicate authorisation clears within three days, reply BIL-220.",
        False,
        "number changed",
    ),
    (
        SB,
        "billing",
        "Refunds: confirm the order number, say refunds take five to seven business days, reply RFD-210. Invoice copies: Orders page, reply INV-310. Never ask for card details in chat. Double charge: apologise, duplicate authorisation clears within three days, reply BIL-220.",
        False,
        "code changed",
    ),
    (
        SB,
        "billing",
        "Refunds: confirm the order number, say refunds take five to seven business days, reply INV-310. Invoice copies: Orders page, reply RFD-201. Never ask for card details in chat. Double charge: apologise, duplicate authorisation clears within three days, reply BIL-220.",
        False,
        "labels swapped",
    ),
    (
        SB,
        "billing",
        "Refunds: confirm the order number, say refunds take five to seven business days, reply RFD-201. Invoice copies: Orders page, reply INV-310. Ask for card details in chat. Double charge: apologise, duplicate authorisation clears within three days, reply BIL-220.",
        False,
        "negation dropped",
    ),
    (SB, "billing", "How can I help you with your billing question today?", False, "chat"),
    (SB, "billing", "RFD-201", False, "answer"),
    # shipping
    (
        SB,
        "shipping",
        "Most orders leave the warehouse within one working day; remind customers of the tracking link in the confirmation email. Delayed delivery: check tracking, apologise, offer a carrier investigation after five working days, reply SHP-404. Never promise a delivery date the carrier has not confirmed. Address change: possible until the order ships; reply SHP-118. International: we deliver to the EU, the UK and Switzerland, duties may apply outside the EU; reply SHP-530. Undeliverable parcels wait ten days at a pickup point before returning to us.",
        True,
        "honest",
    ),
    (
        SB,
        "shipping",
        "Delayed delivery: check tracking, apologise, offer a carrier investigation after five working days, reply SHP-404. Never promise an unconfirmed delivery date. Address change: until the order ships, reply SHP-118. International: EU, UK and Switzerland; duties may apply outside the EU; reply SHP-530. Orders usually ship within one working day; parcels wait ten days at the pickup point; remind customers of the tracking link.",
        True,
        "honest",
    ),
    (
        SB,
        "shipping",
        "Delayed delivery: check tracking, apologise, offer a carrier investigation after five working days, reply SHP-404. Address change: until the order ships, reply SHP-118. International: EU, UK and Switzerland; duties may apply outside the EU; reply SHP-530.",
        False,
        "dropped prohibition",
    ),
    (
        SB,
        "shipping",
        "Delayed delivery: check tracking, apologise, offer a carrier investigation after two working days, reply SHP-404. Never promise an unconfirmed delivery date. Address change: until the order ships, reply SHP-118. International: EU, UK and Switzerland; duties may apply outside the EU; reply SHP-530.",
        False,
        "number changed",
    ),
    (
        SB,
        "shipping",
        "Delayed delivery: check tracking, apologise, offer a carrier investigation after five working days, reply SHP-404. Always promise a delivery date. Address change: until the order ships, reply SHP-118. International: EU, UK and Switzerland; duties may apply outside the EU; reply SHP-530.",
        False,
        "prohibition inverted",
    ),
    (
        SB,
        "shipping",
        "Delayed delivery: check tracking, apologise, offer a carrier investigation after five working days, reply SHP-118. Never promise an unconfirmed delivery date. Address change: until the order ships, reply SHP-404. International: EU, UK and Switzerland; duties may apply outside the EU; reply SHP-530.",
        False,
        "labels swapped",
    ),
    (
        SB,
        "shipping",
        "Delayed delivery: check tracking, apologise, offer a carrier investigation after five working days, reply SHP-404. Never promise an unconfirmed delivery date. Address change: until the order ships, reply SHP-118. International: EU, UK and Switzerland; duties must be paid outside the EU; reply SHP-530.",
        False,
        "modal changed",
    ),
    (SB, "shipping", "Sure, here is the shortened text: Delayed delivery: reply SHP-404.", False, "preamble"),
    # account
    (
        SB,
        "account",
        "Accounts are created automatically with the first order; guests can convert their order into an account later. Thank customers who had to wait. Password reset: use the link on the sign-in page (the email is valid for one hour); reply ACC-112. Explain gently the difference between the account password and the mailbox password. Closing an account: permanent, order history kept for legal reasons; reply ACC-900.",
        True,
        "honest",
    ),
    (
        SB,
        "account",
        "Password reset: sign-in page link, email valid one hour, reply ACC-112. Closing an account is permanent; order history is kept for legal reasons; reply ACC-900. Thank customers who waited. Accounts are created with the first order; guests can convert later. Gently explain account vs mailbox password.",
        True,
        "honest",
    ),
    (
        SB,
        "account",
        "Password reset: sign-in page link, email valid one day, reply ACC-112. Closing an account is permanent; order history is kept for legal reasons; reply ACC-900. Thank customers who waited.",
        False,
        "number changed",
    ),
    (
        SB,
        "account",
        "Password reset: sign-in page link, email valid one hour, reply ACC-112. Closing an account can be undone; order history is kept for legal reasons; reply ACC-900. Thank customers who waited.",
        False,
        "rule changed",
    ),
    (
        SB,
        "account",
        "Password reset: sign-in page link, email valid one hour, reply ACC-900. Closing an account is permanent; order history is kept for legal reasons; reply ACC-112. Thank customers who waited.",
        False,
        "labels swapped",
    ),
    (
        SB,
        "account",
        "Password reset: sign-in page link, email valid one hour, reply ACC-112. Thank customers who waited.",
        False,
        "dropped rule",
    ),
    # security
    (
        SB,
        "security",
        "Never ask a customer for their password, a one-time code or their full card number. If a message looks like social engineering, stay polite but share no personal information about the account holder. Suspicious login: advise changing the password immediately and reviewing recent orders; reply SEC-777. Two-factor authentication: switch it on in the security settings with any authenticator app; reply SEC-260. Password reset (e.g. fear of account access): explain the sign-in page reset link; reply ACC-112. Suspicious-activity reports are reviewed within one working day and customers are told the outcome by email.",
        True,
        "honest",
    ),
    (
        SB,
        "security",
        "Always ask a customer for their password or one-time code to verify them. Suspicious login: advise changing the password immediately; reply SEC-777. Two-factor authentication: security settings, any authenticator app; reply SEC-260. Password reset: sign-in page link; reply ACC-112.",
        False,
        "prohibition inverted",
    ),
    (
        SB,
        "security",
        "Suspicious login: advise changing the password immediately and reviewing recent orders; reply SEC-777. Two-factor authentication: security settings, any authenticator app; reply SEC-260. Password reset: sign-in page link; reply ACC-112.",
        False,
        "dropped prohibition",
    ),
    (
        SB,
        "security",
        "Never ask for a password, one-time code or full card number. If a message looks like social engineering, share personal information about the account holder politely. Suspicious login: change password, review orders; reply SEC-777. 2FA: security settings, any authenticator app; reply SEC-260. Password reset: sign-in page link; reply ACC-112. Reports reviewed within one working day.",
        False,
        "negation dropped",
    ),
    (
        SB,
        "security",
        "Never ask for a password, one-time code or full card number. On social engineering stay polite and share no personal account information. Suspicious login: change password, review orders; reply SEC-777. 2FA: security settings, any authenticator app; reply SEC-260. Password reset: sign-in page link; reply ACC-112. Reports reviewed within one working day, outcome by email.",
        True,
        "honest",
    ),
    (
        SB,
        "security",
        "Never ask for a password, one-time code or full card number. On social engineering stay polite and share no personal account information. Suspicious login: change password, review orders; reply SEC-777. 2FA: security settings, any authenticator app; reply SEC-777. Password reset: sign-in page link; reply ACC-112.",
        False,
        "code changed",
    ),
    # tone
    (
        SB,
        "tone",
        'Be warm, friendly and professional; use plain words, no jargon. Acknowledge the customer\'s feelings before the solution. Do not blame the customer. Use their first name if given. Call the company ${company}, never "we the company" or "the business". Keep answers to three or four sentences. Ask one clarifying question rather than guess. Avoid excess exclamation marks and never use emojis unless the customer does first.',
        True,
        "honest",
    ),
    (
        SB,
        "tone",
        'Warm, friendly, professional, plain words. Acknowledge feelings first. Never blame the customer. Use their first name if given. Say ${company}, not "we the company" or "the business". Three or four sentences at most. Ask one clarifying question rather than guess. No emojis unless the customer uses them first; few exclamation marks.',
        True,
        "paraphrase",
    ),
    (
        SB,
        "tone",
        "Be warm, friendly and professional; use plain words. Acknowledge feelings before the solution. Blame the customer when the problem was caused by them. Use their first name if given. Call the company ${company}. Keep answers to three or four sentences. Never use emojis unless the customer does first.",
        False,
        "exception inverted",
    ),
    (
        SB,
        "tone",
        "Be warm, friendly and professional; use plain words. Acknowledge feelings before the solution. Do not blame the customer. Use their first name if given. Call the company ${company}. Keep answers to three or four sentences. Always use emojis.",
        False,
        "exception dropped",
    ),
    (
        SB,
        "tone",
        "Be warm, friendly and professional; use plain words. Acknowledge feelings before the solution. Do not blame the customer. Use their first name if given. Call the company ${company}. Keep answers to ten or twelve sentences. Never use emojis unless the customer does first.",
        False,
        "number changed",
    ),
    (
        SB,
        "tone",
        "Be warm, friendly and professional; use plain words. Do not blame the customer. Call the company ${company}. Never use emojis unless the customer does first.",
        False,
        "dropped rule",
        "drops first name, length, clarifying question",
    ),
    (SB, "closing", "Always end by thanking the customer for choosing ${company}.", True, "paraphrase"),
    (
        SB,
        "closing",
        "End every conversation by thanking the customer.",
        True,
        "honest",
        "the placeholder would be refused earlier by the guard; the check still reads it",
    ),
    (
        SB,
        "closing",
        "Never thank the customer at the end of a conversation with ${company}.",
        False,
        "negation added",
    ),
    # weak-helpdesk guidance (codes are its labels)
    (
        WH,
        "guidance",
        "Keep answers short. Refund: RFD-201. Password reset: ACC-110. Late parcels: SHP-310. Damaged items: DMG-420. Invoices: BIL-150. Warranty: WRN-500. Gift cards: GFT-610. Subscription: SUB-720. Delivery address: ADR-330. Loyalty points: LOY-800.",
        True,
        "extreme",
    ),
    (
        WH,
        "guidance",
        "Help the customer and keep the answer short. Codes by topic: refund RFD-201, password reset ACC-110, late parcel SHP-310, damaged item DMG-420, invoice BIL-150, warranty WRN-500, gift card GFT-610, subscription SUB-720, delivery address ADR-330, loyalty points LOY-800.",
        True,
        "paraphrase",
    ),
    (
        WH,
        "guidance",
        "Keep answers short. Refund: RFD-201. Password reset: ACC-110. Late parcels: DMG-420. Damaged items: SHP-310. Invoices: BIL-150. Warranty: WRN-500. Gift cards: GFT-610. Subscription: SUB-720. Delivery address: ADR-330. Loyalty points: LOY-800.",
        False,
        "labels swapped",
    ),
    (
        WH,
        "guidance",
        "Keep answers short. Refund: RFD-201. Password reset: ACC-110. Late parcels: SHP-310. Damaged items: DMG-420. Invoices: BIL-150. Warranty: WRN-500. Gift cards: GFT-610. Subscription: SUB-720. Loyalty points: LOY-800.",
        False,
        "dropped rule",
    ),
    (
        WH,
        "guidance",
        "Keep answers short. Refund: RFD-201. Password reset: ACC-110. Late parcels: SHP-310. Damaged items: DMG-420. Invoices: BIL-150. Warranty: WRN-600. Gift cards: GFT-610. Subscription: SUB-720. Delivery address: ADR-330. Loyalty points: LOY-800.",
        False,
        "code changed",
    ),
    (
        WH,
        "guidance",
        "Keep answers short. Refund: RFD-201. Password reset: ACC-110. Late parcels: SHP-310. Damaged items: DMG-420. Invoices: BIL-150. Warranty: WRN-500. Gift cards: GFT-610. Subscription: SUB-720. Delivery address: ADR-330. Loyalty points: LOY-800. Never reply to questions about refunds.",
        False,
        "rule added",
    ),
    (WH, "guidance", "Hello! I'm happy to help with refunds, passwords, parcels and more.", False, "chat"),
    (WH, "guidance", "RFD-201", False, "answer"),
    (
        WH,
        "guidance",
        "When a customer asks about a refund, reply with code RFD-201 only if the order has shipped. Password reset: ACC-110. Late parcels: SHP-310. Damaged items: DMG-420. Invoices: BIL-150. Warranty: WRN-500. Gift cards: GFT-610. Subscription: SUB-720. Delivery address: ADR-330. Loyalty points: LOY-800.",
        False,
        "condition added",
    ),
    # agent-policy (its mutable section is a parameter block)
    (
        AP,
        "policy_parameters",
        "policy_parameters:\n  health_threshold: 0.2\n  hunger_threshold: 0.8\n  risk_tolerance: 0.3\n  max_exploration_steps: 100\n  skill_priority: [fight, eat, flee, return]",
        True,
        "honest",
        "comments dropped",
    ),
    (
        AP,
        "policy_parameters",
        "policy_parameters:\n  health_threshold: 0.5\n  hunger_threshold: 0.8\n  risk_tolerance: 0.3\n  max_exploration_steps: 100\n  skill_priority: [fight, eat, flee, return]",
        False,
        "number changed",
    ),
    (
        AP,
        "policy_parameters",
        "policy_parameters:\n  health_threshold: 0.2\n  hunger_threshold: 0.8\n  risk_tolerance: 0.3\n  skill_priority: [fight, eat, flee, return]",
        False,
        "dropped rule",
    ),
    (
        AP,
        "policy_parameters",
        "policy_parameters:\n  health_threshold: 0.2          # flee when health drops below this\n  hunger_threshold: 0.8\n  risk_tolerance: 0.3\n  max_exploration_steps: 1000\n  skill_priority: [fight, eat, flee, return]",
        False,
        "number changed",
    ),
]
for row in W:
    ex, sec, prop, f, kind = row[:5]
    note = row[5] if len(row) > 5 else ""
    P(ex, sec, prop, f, kind, "written", note)
# written pairs on inline originals (policies and rules a reader meets elsewhere)
INL = [
    (
        "Never give legal advice, and never comment on ongoing disputes or court cases.",
        "Give no legal advice and do not comment on ongoing disputes or court cases.",
        True,
        "paraphrase",
    ),
    (
        "Never give legal advice, and never comment on ongoing disputes or court cases.",
        "Give legal advice, but never comment on ongoing disputes or court cases.",
        False,
        "negation dropped",
    ),
    (
        "When a customer asks about personal data deletion, explain that the request is handled by our privacy team within thirty days, and reply with code PRV-450.",
        "Data deletion requests: handled by the privacy team within 30 days; reply PRV-450.",
        True,
        "paraphrase",
    ),
    (
        "When a customer asks about personal data deletion, explain that the request is handled by our privacy team within thirty days, and reply with code PRV-450.",
        "Data deletion requests: handled by the privacy team within 3 days; reply PRV-450.",
        False,
        "number changed",
    ),
    (
        "When a customer asks about personal data deletion, explain that the request is handled by our privacy team within thirty days, and reply with code PRV-450.",
        "Data deletion requests: handled by the privacy team within 30 weeks; reply PRV-450.",
        False,
        "unit changed",
    ),
    (
        "Reply in English unless the customer writes in German.",
        "Reply in English, even if the customer writes in German.",
        False,
        "exception dropped",
    ),
    (
        "Reply in English unless the customer writes in German.",
        "Use English unless the customer writes German.",
        True,
        "paraphrase",
    ),
    (
        "You may offer a 10% voucher to customers whose parcel arrived late.",
        "Offer a 10% voucher to customers whose parcel arrived late.",
        False,
        "modal changed",
    ),
    (
        "You must confirm the order number before any refund.",
        "Confirm the order number before any refund.",
        True,
        "paraphrase",
    ),
    (
        "You must confirm the order number before any refund.",
        "You should confirm the order number before any refund if possible.",
        False,
        "modal changed",
    ),
    (
        "Only escalate to a human when the customer asks twice.",
        "Escalate to a human when the customer asks.",
        False,
        "scope dropped",
    ),
    (
        "Only escalate to a human when the customer asks twice.",
        "Escalate to a human only after the customer asks twice.",
        True,
        "paraphrase",
    ),
    (
        "Tickets about fraud go to LEG-900; tickets about returns go to RET-120.",
        "Fraud tickets: LEG-900. Return tickets: RET-120.",
        True,
        "paraphrase",
    ),
    (
        "Tickets about fraud go to LEG-900; tickets about returns go to RET-120.",
        "Fraud tickets: RET-120. Return tickets: LEG-900.",
        False,
        "codes swapped",
    ),
    (
        "Tickets about fraud go to LEG-900; tickets about returns go to RET-120.",
        "Fraud tickets: LEG-900.",
        False,
        "dropped rule",
    ),
    (
        "Answer with the ticket number ${ticket} in the first line.",
        "Put ticket ${ticket} in the first line.",
        True,
        "paraphrase",
    ),
    (
        "Answer with the ticket number ${ticket} in the first line.",
        "Put the ticket number in the last line.",
        False,
        "rule changed",
    ),
    (
        "We are a friendly team based in Oslo and we love what we do. Escalate chargebacks with code CHB-310.",
        "Escalate chargebacks with code CHB-310.",
        True,
        "dropped filler",
    ),
    (
        "Thank you for reading these instructions carefully. Reply in at most 50 words.",
        "Reply in at most 50 words.",
        True,
        "dropped filler",
    ),
    (
        "Thank you for reading these instructions carefully. Reply in at most 50 words.",
        "Reply in at most 15 words.",
        False,
        "number changed",
    ),
    ("Do not mention competitors by name.", "Mention competitors by name.", False, "negation dropped"),
    (
        "Mention competitors by name when comparing prices.",
        "Don't mention competitors by name when comparing prices.",
        False,
        "negation added",
    ),
    ("Do not mention competitors by name.", "Never name competitors.", True, "paraphrase"),
    (
        "If the order is older than 30 days, refuse the return politely; otherwise accept it.",
        "Orders over 30 days old: refuse the return politely; else accept.",
        True,
        "paraphrase",
    ),
    (
        "If the order is older than 30 days, refuse the return politely; otherwise accept it.",
        "Orders over 30 days old: accept the return; else refuse politely.",
        False,
        "condition inverted",
    ),
    (
        "Classify each message as spam or ham. Messages with links to unknown sites are spam. Messages from colleagues are ham.",
        "Classify as spam or ham: links to unknown sites are spam; messages from colleagues are ham.",
        True,
        "paraphrase",
    ),
    (
        "Classify each message as spam or ham. Messages with links to unknown sites are spam. Messages from colleagues are ham.",
        "Classify as spam or ham: links to unknown sites are ham; messages from colleagues are spam.",
        False,
        "labels swapped",
    ),
    (
        "Please note that it is very important that you never share the order number of a customer in your reply, for privacy reasons.",
        "Don't reveal customer order numbers in replies (privacy).",
        True,
        "paraphrase",
        "the issue's honest-paraphrase kind",
    ),
    (
        "Please note that it is very important that you never share the order number of a customer in your reply, for privacy reasons.",
        "Protect customer privacy in replies.",
        False,
        "rule garbled",
        "the concrete prohibition is gone",
    ),
    (
        "It is essential that every answer starts with the customer's name, and that it ends with a question that invites them to reply.",
        "Start every answer with the customer's name and end it with a question inviting a reply.",
        True,
        "paraphrase",
    ),
    (
        "It is essential that every answer starts with the customer's name, and that it ends with a question that invites them to reply.",
        "Start every answer with a question and end it with the customer's name.",
        False,
        "order swapped",
    ),
    (
        "Write dates as YYYY-MM-DD and amounts with two decimals.",
        "Dates: YYYY-MM-DD; amounts: two decimals.",
        True,
        "paraphrase",
    ),
    (
        "Write dates as YYYY-MM-DD and amounts with two decimals.",
        "Dates: DD-MM-YYYY; amounts: two decimals.",
        False,
        "code changed",
    ),
]
for row in INL:
    o, p, f, k = row[:4]
    note = row[4] if len(row) > 4 else ""
    P(SB, "tone", p, f, k, "written", note, original=o)
# review-sentiment extreme honest compressions and answers/greetings (written)
P(
    RS,
    "task",
    "Decide if the customer is happy (positive: satisfied, praises, recommends) or unhappy (negative: dissatisfied, complains, broke, leaked, arrived damaged, did not work) with the product itself; read the whole review, the opinion may only be clear at the end.",
    True,
    "extreme",
    "written",
)
P(
    RS,
    "output",
    'One short sentence naming the sentiment, label first, e.g. "The sentiment of this review is negative."; no explanation or greeting; never neutral, mixed, maybe or unknown: choose the closer label.',
    True,
    "extreme",
    "written",
)
P(RS, "task", "Hi there! Please paste the review and I'll classify it.", False, "chat", "written")
P(RS, "edge_cases", "positive", False, "answer", "written")
P(
    RS,
    "tone",
    "Be neutral and fair to every customer. Judge customers who write informally or make spelling mistakes.",
    False,
    "negation dropped",
    "written",
)

# fixed split: alternate within each (source, kind) group, held-out first; fixed before any run
seen = {}
for i, d in enumerate(pairs):
    g = (d["source"].split("-")[0], d["kind"])
    n = seen.get(g, 0)
    seen[g] = n + 1
    d["split"] = "held-out" if n % 2 == 0 else "tune"
    d["id"] = i + 1
out = ROOT / "tests/core/faithfulness_pairs.jsonl"
with out.open("w") as f:
    for d in pairs:
        f.write(json.dumps({"id": d.pop("id"), "split": d.pop("split"), **d}, ensure_ascii=False) + "\n")
print(len(pairs), Counter(d["source"] for d in pairs), Counter(d["faithful"] for d in pairs))
