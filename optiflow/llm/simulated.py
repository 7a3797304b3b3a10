"""The simulated model: a deterministic litellm custom provider, model ``optiflow/sim``.

It makes every demo and test run offline and reproducible while behaving like a model that
follows the instructions present in its system prompt. Importing this module does not import
litellm; :func:`optiflow.llm.simhandler.make_handler` builds the ``litellm.CustomLLM`` adapter and
:mod:`optiflow.llm.runtime` registers it (provider ``optiflow``) on first use.

Protocol
--------
**Rules.** An instruction is one sentence of the system prompt matching :data:`RULE_RE`::

    When a customer asks about <topic>, <anything without a sentence end> reply with code <LABEL>.

(case-insensitive lead-in: ``When a|an|the customer|user|client|caller asks|writes|enquires|
inquires about|regarding``; the topic runs to the first comma; then ``reply|respond|answer with
[the] code|label`` and a LABEL of capitals/digits joined by ``-`` or ``_``, e.g. ``RFD-201``.)
Every other sentence is filler. The topic's keywords are its lowercase words minus stop words,
with a trailing ``s`` dropped from words longer than three letters.

**Answers.** The last user message is matched against the rules: a rule applies when all its
topic keywords occur among the message's words; the rule with most keywords wins, ties go to the
one earliest in the prompt. A hit answers with the rule's LABEL; a miss answers a polite generic
text that contains no label. So removing a needed instruction fails exactly the samples whose
question names its topic; removing filler changes nothing; a rule stated twice (in two sections)
keeps working while either copy is present. ``sim_style``: ``sentence`` (default, the label in a
sentence), ``label`` (the bare label) or ``json`` (``{"code": LABEL, "answer": ...}``).

**Compression requests** are recognized by :data:`optiflow.llm.markers.COMPRESS_MARKER` in the
system message; the last user message is the section body. The reply keeps, in order and one per
line, the sentences (split after ``.!?``, at blank lines and before bullet items; wrapped lines
are joined) that are rules or contain a ``${param}`` placeholder, and drops every other sentence
(filler); if nothing would remain it keeps the first sentence. Additionally, with
``h = sha256(body).hexdigest()``: when the body has ``n >= 1`` rule sentences without a
placeholder and ``int(h[:8], 16) % 100 < sim_compress_drop_pct`` (default 25), it also drops the
rule sentence number ``int(h[8:16], 16) % n`` of those (counted in order), which is how a
compression gets rejected. :func:`compress_section` and :func:`compress_plan` compute it.

**Extraction requests** are recognized by :data:`optiflow.llm.markers.EXTRACT_MARKER`; the user
message lists the section's pieces as ``[n] text`` lines. The reply is the numbers, comma
separated, of the pieces :func:`compress_plan` keeps of their text (:func:`extract_reply`).

**Judge requests** are recognized by :data:`optiflow.llm.markers.JUDGE_MARKER` in the system
message; the user message carries ``<expected>...</expected>`` and ``<output>...</output>``. The
reply is ``{"score": 1.0, ...}`` when the whitespace- and case-normalized expected text occurs in
the output, else ``{"score": 0.0, ...}``.

**Faithfulness judge requests** are recognized by :data:`optiflow.llm.markers.SAME_MARKER`;
the user message carries ``<a>...</a>`` and ``<b>...</b>``. The reply is ``{"same": true, ...}``
when every negation, exception, "only", number, code and placeholder of A is in B
(:func:`same_reply`), else ``{"same": false, "reason": "B lacks ..."}``.

**Rewrite requests** are recognized by :data:`optiflow.llm.markers.REWRITE_MARKER` in the system
message; the user message carries ``<section>...</section>``, the failing samples'
``<input>...</input>`` and ``<variant>N</variant>``. A *hint* is a sentence of the section like
``Questions about <topic> are filed under <LABEL>`` (:data:`HINT_RE`; ``filed|handled|logged|
tracked|routed under|as|with``): it names a code without instructing the model, so the simulated
model does not follow it. The reply is the section with up to ``sim_rewrite_rules`` (default 2)
hints rewritten as rules (``When a customer asks about <topic>, reply with code <LABEL>``): the
hints whose topic keywords all occur in some failing input, most failing inputs first, then in
order; variant ``v`` starts at the ``v * k``-th of them (cyclically), so parallel variants convert
different hints. Nothing relevant: the section comes back unchanged. :func:`rewrite_plan` computes it.

**Policy rules** (a decision policy with a parameter block, for structured mutation): sentences
``When [the] <metric> is below|under|above|over|at least|at most <param or number>, ... reply with
code <LABEL>.`` (:data:`POLICY_RE`), an optional ``Otherwise ... reply with code <LABEL>.``, and
parameter lines ``name: number`` or ``name: [a, b, ...]`` (trailing ``# comment`` allowed). When the
user message carries observations ``metric=number`` for at least one policy rule, the rules whose
comparison holds fire; among them the one whose label comes first in a list parameter named
``priority`` or ``*_priority`` wins (labels compared case-insensitively; unlisted labels after,
then prompt order); none fires: the ``Otherwise`` label. The reply names the label (``sentence``:
``Based on the observations, my next action is <LABEL>.``). Prompts without policy rules, or
messages without observations, are answered as before. :func:`policy_decision` computes it.

**Options** arrive through ``ModelConfig.params`` (litellm hands unknown params to a custom
provider in ``optional_params``):

- ``sim_latency_ms`` (0): ``time.sleep`` per call; when streaming, ``sim_ttft_ms`` (default half
  the latency) passes before the first chunk. The call's ``timeout`` (``model.timeout``) is
  honoured as a real provider's: a latency over it waits the timeout, then fails with a timeout
  error (408, transient, so it is retried like one).
- ``sim_noise`` (0.0): probability that a right answer is replaced by the generic one, seeded by
  ``(sim_seed, sample_id, run)`` from the call's ``metadata`` (falls back to the user text): the
  same sample and run flip the same way in every experiment (common random numbers).
- ``sim_pass_dist`` (none): the noise mode of a sampled model (:mod:`optiflow.llm.noise`). Each
  sample gets a pass probability ``p`` drawn once from this distribution (``beta(a,b)``,
  ``fixed(p)`` or a weighted mixture such as ``0.9*beta(3.3,3.3) + 0.1*fixed(1)``), seeded by
  ``(sim_seed, sample_id)``; a call that has its instruction answers right with probability ``p``,
  by a draw seeded by ``(sim_seed, digest of the prompt, sample_id, run)``. Unlike ``sim_noise``,
  runs are independent across experiments whose prompts differ, as on a real sampled model (an
  edit that changes no behaviour still draws anew); a removed instruction still fails its samples,
  so an edit's true drop is the sum of their ``p`` over the dataset size.
- ``sim_error_rate`` (0.0): probability that an attempt fails with an injected provider error,
  seeded by ``(sim_seed, sample_id, run, attempt)``; ``sim_fail_attempts`` (0): the first N
  attempts of every call fail. ``sim_error``: ``mixed`` (default: 429, 500 or timeout, by the
  same hash), ``rate_limit`` (429), ``timeout`` (408), ``internal`` (500), ``server`` (503),
  ``auth`` (401, permanent), ``bad_request`` (400, permanent).
- ``sim_seed`` (0).
- ``sim_rewrite_rules`` (2): hints a rewrite request converts into rules.

**Usage and cost.** Prompt tokens are counted with :mod:`optiflow.llm.tokens` (cl100k_base) plus
3 per message and 3 for the reply priming; completion tokens are the reply's. The price
(:data:`PRICE_INPUT_PER_TOKEN`, :data:`PRICE_OUTPUT_PER_TOKEN`) is registered with litellm, so
``litellm.completion_cost`` prices these calls.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from optiflow.core.memo import DigestCache, digest
from optiflow.core.model import MAX_SIM_LATENCY_MS
from optiflow.llm import interrupt
from optiflow.llm.markers import COMPRESS_MARKER, EXTRACT_MARKER, JUDGE_MARKER, REWRITE_MARKER, SAME_MARKER
from optiflow.llm.noise import parse_pass_dist, pass_probability, passes, prompt_digest, unit
from optiflow.llm.simjudge import all_tagged as _all_tagged
from optiflow.llm.simjudge import judge_reply, same_reply
from optiflow.llm.simjudge import tagged as _tagged
from optiflow.llm.tokens import count_tokens

SIM_MODEL = "optiflow/sim"
PRICE_INPUT_PER_TOKEN = 0.5e-6  # $0.50 per million prompt tokens
PRICE_OUTPUT_PER_TOKEN = 1.5e-6  # $1.50 per million completion tokens

RULE_RE = re.compile(
    r"(?i:\bwhen\s+(?:a|an|the)\s+(?:customer|user|client|caller)\s+"
    r"(?:asks|writes|enquires|inquires)\s+(?:us\s+)?(?:about|regarding)\s+)"
    r"(?P<topic>[^,.;:!?]+?)\s*,"
    r"[^.!?]*?"
    r"(?i:\b(?:reply|respond|answer)\s+with\s+(?:the\s+)?(?:code|label)\s+)"
    r"(?P<label>[A-Z][A-Z0-9]*(?:[-_][A-Z0-9]+)*)\b"
)
GENERIC_ANSWER = (
    "Thank you for reaching out. I am not able to resolve this directly, so I have passed your "
    "message to a specialist who will reply by email within one business day."
)
_STOPWORDS = frozenset(
    {
        *("a", "an", "the", "my", "your", "our", "their", "his", "her", "its", "any", "some", "new"),
        *("of", "for", "to", "about", "with", "on", "in", "at", "by", "from", "or", "and"),
        *("is", "are", "be", "that", "this", "these", "those"),
    }
)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n\s*\n|\n(?=[ \t]*(?:[-*\u2022]|\d+[.)])\s)")
_WORD = re.compile(r"[a-z0-9]+")
_LABEL = r"(?P<label>[A-Z][A-Z0-9]*(?:[-_][A-Z0-9]+)*)\b"
_REPLY_WITH = r"(?i:\b(?:reply|respond|answer)\s+with\s+(?:the\s+)?(?:code|label)\s+)"
HINT_RE = re.compile(
    r"(?i:\bquestions?\s+(?:about|regarding|on)\s+)(?P<topic>[^,.;:!?]+?)\s+"
    r"(?i:(?:are|is)\s+(?:filed|handled|logged|tracked|routed)\s+(?:under|as|with)\s+)"
    r"(?:(?i:(?:the\s+)?(?:code|label)\s+))?" + _LABEL
)
POLICY_RE = re.compile(
    r"(?i:\bwhen\s+(?:the\s+)?)(?P<metric>[A-Za-z_][A-Za-z0-9_]*)\s+(?i:is)\s+"
    r"(?P<op>(?i:below|under|above|over|at\s+least|at\s+most))\s+"
    r"(?P<ref>-?\d+(?:\.\d+)?|[A-Za-z_][A-Za-z0-9_]*)\s*,[^.!?]*?" + _REPLY_WITH + _LABEL
)
DEFAULT_RE = re.compile(r"(?i:\botherwise\b)[^.!?]*?" + _REPLY_WITH + _LABEL)
PARAM_RE = re.compile(
    r"^[ \t]*(?:[-*][ \t]*)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)[ \t]*:[ \t]*"
    r"(?P<value>-?\d+(?:\.\d+)?|\[[^\]\n]*\])[ \t]*(?:#[^\n]*)?$",
    re.M,
)
_OBSERVATION = re.compile(r"\b(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*[=:]\s*(?P<value>-?\d+(?:\.\d+)?)\b")
_VARIANT = re.compile(r"<variant>(\d+)</variant>")
# Every match of RULE_RE, HINT_RE, POLICY_RE and DEFAULT_RE lies inside one segment of text between
# two sentence ends (``!``, ``?``, or ``.`` not followed by a digit: a policy threshold may be
# ``0.5``): no match contains one. Inside a segment, a match starts at a lead-in ("When a customer
# asks about", "When the", "Otherwise", "Questions about") and ends with a tail ("reply with code
# LABEL", "are filed under LABEL"). Run from every lead-in, the patterns' lazy scans cost k*n for k
# lead-ins in n characters (a 120 KB section of one repeated lead-in: seconds, with the GIL held).
# :func:`_scan` finds the same matches in linear time: it lists the segment's lead-ins, tails and
# stops once, picks by bisection the one tail a lead-in's match can end with, and runs the pattern
# only on that window.
_SEGMENT_END = re.compile(r"[!?]|\.(?!\d)")
_REPLY_TAIL = re.compile(_REPLY_WITH + _LABEL)
_RULE_LEAD = re.compile(
    r"(?i:\bwhen\s+(?:a|an|the)\s+(?:customer|user|client|caller)\s+"
    r"(?:asks|writes|enquires|inquires)\s+(?:us\s+)?(?:about|regarding)\s+)"
)
_POLICY_LEAD = re.compile(r"(?i:\bwhen\s+)")
_DEFAULT_LEAD = re.compile(r"(?i:\botherwise\b)")
_HINT_LEAD = re.compile(r"(?i:\bquestions?\s+(?:about|regarding|on)\s+)")
_HINT_TAIL = re.compile(
    r"(?<=\s)(?i:(?:are|is)\s+(?:filed|handled|logged|tracked|routed)\s+(?:under|as|with)\s+)"
    r"(?:(?i:(?:the\s+)?(?:code|label)\s+))?" + _LABEL
)
_TOPIC_STOP = re.compile(r"[,.;:]")  # within a segment: what ends a topic (RULE_RE, HINT_RE)
_POLICY_STOP = re.compile(r"[,;:]|\.(?!\d)")
_DOT = re.compile(r"\.")


@dataclass(frozen=True, slots=True)
class _Scan:
    """How to find ``pattern``'s matches from its ``lead`` and ``tail`` (see :func:`_scan`).
    ``stop``: the characters a match's part before its tail cannot cross; ``comma``: the first
    stop after the lead-in must be a comma and the tail comes after it (rules, policy rules),
    else the tail comes before the first stop (hints)."""

    pattern: re.Pattern[str]
    lead: re.Pattern[str]
    tail: re.Pattern[str]
    stop: re.Pattern[str] | None
    comma: bool = True


_RULE_SCAN = _Scan(RULE_RE, _RULE_LEAD, _REPLY_TAIL, _TOPIC_STOP)
_POLICY_SCAN = _Scan(POLICY_RE, _POLICY_LEAD, _REPLY_TAIL, _POLICY_STOP)
_DEFAULT_SCAN = _Scan(DEFAULT_RE, _DEFAULT_LEAD, _REPLY_TAIL, None)
_HINT_SCAN = _Scan(HINT_RE, _HINT_LEAD, _HINT_TAIL, _TOPIC_STOP, comma=False)


@dataclass(frozen=True, slots=True)
class Rule:
    topic: str
    keywords: frozenset[str]
    label: str
    sentence: str
    position: int


@dataclass(frozen=True, slots=True)
class SimReply:
    text: str
    prompt_tokens: int
    completion_tokens: int


class SimulatedError(Exception):
    """An injected provider error; the litellm adapter raises the matching litellm exception."""

    def __init__(self, kind: str, status_code: int, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.status_code = status_code
        self.message = message


_ERRORS: dict[str, tuple[int, str]] = {
    "rate_limit": (429, "simulated rate limit: too many requests, retry later"),
    "timeout": (408, "simulated timeout: the model did not answer in time"),
    "internal": (500, "simulated internal server error: the model failed, retry later"),
    "server": (503, "simulated outage: service temporarily unavailable"),
    "auth": (401, "simulated authentication failure: invalid API key"),
    "bad_request": (400, "simulated bad request: the request was rejected"),
    "cancelled": (499, "the job was cancelled: the simulated call was abandoned"),
}


@dataclass(frozen=True, slots=True)
class SimOptions:
    latency_ms: float = 0.0
    ttft_ms: float | None = None
    noise: float = 0.0
    error_rate: float = 0.0
    fail_attempts: int = 0
    error: str = "mixed"
    seed: int = 0
    compress_drop_pct: float = 25.0
    style: str = "sentence"
    rewrite_rules: int = 2
    pass_dist: str | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> SimOptions:
        if not params:
            return _DEFAULT_OPTIONS
        ttft = params.get("sim_ttft_ms")
        error = str(params.get("sim_error", "mixed"))
        if error != "mixed" and error not in _ERRORS:
            raise SimulatedError("bad_request", 400, f"unknown sim_error {error!r}")
        pass_dist = params.get("sim_pass_dist")
        if pass_dist is not None:
            try:
                parse_pass_dist(str(pass_dist))
            except ValueError as exc:
                raise SimulatedError("bad_request", 400, str(exc)) from None
        latency_ms = float(params.get("sim_latency_ms", 0.0) or 0.0)
        for name, value in (("sim_latency_ms", latency_ms), ("sim_ttft_ms", ttft)):
            if value is not None and not 0 <= float(value) <= MAX_SIM_LATENCY_MS:
                message = f"{name} must be between 0 and {MAX_SIM_LATENCY_MS:g} ms"
                raise SimulatedError("bad_request", 400, message)
        return cls(
            latency_ms=latency_ms,
            ttft_ms=None if ttft is None else float(ttft),
            noise=float(params.get("sim_noise", 0.0) or 0.0),
            error_rate=float(params.get("sim_error_rate", 0.0) or 0.0),
            fail_attempts=int(params.get("sim_fail_attempts", 0) or 0),
            error=error,
            seed=int(params.get("sim_seed", 0) or 0),
            compress_drop_pct=float(params.get("sim_compress_drop_pct", 25.0)),
            style=str(params.get("sim_style", "sentence")),
            rewrite_rules=int(params.get("sim_rewrite_rules", 2)),
            pass_dist=None if pass_dist is None else str(pass_dist),
        )


_DEFAULT_OPTIONS = SimOptions()


_unit = unit


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def _keywords(text: str) -> frozenset[str]:
    return frozenset(_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOPWORDS)


def _scan(scan: _Scan, text: str) -> Iterator[re.Match[str]]:
    """``scan.pattern.finditer(text)``, in time linear in ``text``. The tails are found once (no
    tail crosses a sentence end); a segment without one is skipped unread."""
    tails = [(m.start(), m.end()) for m in scan.tail.finditer(text)]
    if not tails:
        return
    tail_starts = [t[0] for t in tails]
    start = 0
    ends = [m.start() for m in _SEGMENT_END.finditer(text)]
    ends.append(len(text))
    for end in ends:
        lo = bisect.bisect_left(tail_starts, start)
        if end > start and lo < len(tails) and tails[lo][0] < end:
            yield from _scan_segment(scan, text, start, end, tails[lo : bisect.bisect_left(tail_starts, end)])
        start = end + 1


def _scan_segment(
    scan: _Scan, text: str, start: int, end: int, tails: list[tuple[int, int]]
) -> Iterator[re.Match[str]]:
    tail_starts = [t[0] for t in tails]
    stops = [] if scan.stop is None else [m.start() for m in scan.stop.finditer(text, start, end)]
    dots = [m.start() for m in _DOT.finditer(text, start, end)]
    pos = start
    for lead in scan.lead.finditer(text, start, end):
        if lead.start() < pos:
            continue
        after, limit = lead.end(), end
        if scan.stop is not None:
            i = bisect.bisect_left(stops, after)
            if scan.comma:  # the part before the tail ends with a comma: the first stop
                if i == len(stops) or text[stops[i]] != ",":
                    continue
                after = stops[i] + 1
            elif i < len(stops):  # the tail comes before the first stop
                limit = stops[i]
        j = bisect.bisect_left(tail_starts, after)
        if j == len(tails):
            break  # no tail after this lead-in, so none after a later one
        tail_start, tail_end = tails[j]
        if tail_end > limit:
            continue
        d = bisect.bisect_left(dots, after)
        if d < len(dots) and dots[d] < tail_start:  # a lazy [^.!?]*? cannot cross a decimal point
            continue
        m = scan.pattern.match(text, lead.start(), tail_end)
        if m is not None:
            yield m
            pos = m.end()


def is_rule(sentence: str) -> bool:
    """Whether one sentence holds a rule (bounded like every sentence scan)."""
    return next(_scan(_RULE_SCAN, sentence), None) is not None


def split_sentences(text: str) -> list[str]:
    """Sentences (split after ``.!?``, at blank lines and before bullets), whitespace collapsed."""
    return [" ".join(s.split()) for s in _SENTENCE_SPLIT.split(text) if s and s.strip()]


PARSE_CACHE_BYTES = 16 * 1024 * 1024
"""What each parser's memo (rules, policies) may hold; keyed by a digest of the prompt, so the
prompts themselves are not kept (issue 20)."""
_RULES: DigestCache[tuple[Rule, ...]] = DigestCache(PARSE_CACHE_BYTES, max_entries=512)
_POLICIES: DigestCache[Policy] = DigestCache(PARSE_CACHE_BYTES, max_entries=512)


def clear_caches() -> None:
    _RULES.clear()
    _POLICIES.clear()


def parse_rules(system: str) -> tuple[Rule, ...]:
    """Every rule in a system prompt, in order."""
    return _RULES.get(digest(system), lambda: _parse_rules(system))


def _parse_rules(system: str) -> tuple[Rule, ...]:
    rules: list[Rule] = []
    for m in _scan(_RULE_SCAN, system):
        topic = " ".join(m.group("topic").split())
        keywords = _keywords(topic)
        if keywords:
            rules.append(Rule(topic, keywords, m.group("label"), m.group(0), len(rules)))
    return tuple(rules)


def match_rule(rules: Sequence[Rule], question: str) -> Rule | None:
    """The rule a question depends on: all topic keywords present, most keywords, earliest."""
    if not rules:
        return None
    words = _keywords(question)
    best: Rule | None = None
    for rule in rules:
        if rule.keywords <= words and (best is None or len(rule.keywords) > len(best.keywords)):
            best = rule
    return best


@dataclass(frozen=True, slots=True)
class CompressPlan:
    kept: tuple[str, ...]
    dropped_filler: tuple[str, ...]
    dropped_rule: str | None


def compress_plan(body: str, drop_pct: float = 25.0) -> CompressPlan:
    """What the simulated compressor does to a section body (see the module docstring)."""
    sentences = split_sentences(body)
    kept: list[str] = []
    filler: list[str] = []
    for s in sentences:
        (kept if "${" in s or is_rule(s) else filler).append(s)
    if not kept and sentences:
        kept.append(sentences[0])
        filler.remove(sentences[0])
    droppable = [s for s in kept if "${" not in s and is_rule(s)]
    dropped: str | None = None
    h = hashlib.sha256(body.encode("utf-8")).hexdigest()
    if droppable and int(h[:8], 16) % 100 < drop_pct:
        dropped = droppable[int(h[8:16], 16) % len(droppable)]
        kept.remove(dropped)
    return CompressPlan(kept=tuple(kept), dropped_filler=tuple(filler), dropped_rule=dropped)


def compress_section(body: str, drop_pct: float = 25.0) -> str:
    return "\n".join(compress_plan(body, drop_pct).kept)


_NUMBERED = re.compile(r"^\[(\d+)\] (.*)$", re.M)


def extract_reply(user: str, drop_pct: float = 25.0) -> str:
    """The numbers of the pieces (``[n] text`` lines) the simulated compressor would keep: the
    same choice as :func:`compress_plan` on the pieces' text, so an extraction is rejected as
    often as a compression."""
    numbered = [(int(n), " ".join(t.split())) for n, t in _NUMBERED.findall(user)]
    # each piece its own paragraph, so the plan's sentences never span two pieces; a piece is kept
    # when any of its sentences is (a piece may hold several, or end at ';' mid-sentence)
    plan = compress_plan("\n\n".join(t for _, t in numbered), drop_pct)
    kept = set(plan.kept)
    chosen = [n for n, t in numbered if any(x in kept for x in split_sentences(t))]
    return ", ".join(map(str, chosen)) or (str(numbered[0][0]) if numbered else "")


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return ""


class SimulatedModel:
    """The provider-independent simulator; :func:`~optiflow.llm.simhandler.make_handler` wraps it
    for litellm."""

    def reply(
        self,
        messages: Sequence[Mapping[str, Any]],
        params: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        sleep: bool = True,
        timeout_s: float | None = None,
    ) -> SimReply:
        opts = SimOptions.from_params(params)
        system = "\n\n".join(_content(m) for m in messages if m.get("role") == "system")
        user = next((_content(m) for m in reversed(messages) if m.get("role") == "user"), "")
        meta = metadata or {}
        sample = meta.get("sample_id")
        run = meta.get("run", 0)
        subject = sample if sample is not None else hashlib.blake2b(user.encode(), digest_size=8).hexdigest()
        self._maybe_fail(opts, subject, run, int(meta.get("attempt", 0) or 0))

        if COMPRESS_MARKER in system:
            text = compress_section(user, opts.compress_drop_pct)
        elif EXTRACT_MARKER in system:
            text = extract_reply(user, opts.compress_drop_pct)
        elif SAME_MARKER in system:
            text = same_reply(user)
        elif JUDGE_MARKER in system:
            text = judge_reply(user)
        elif REWRITE_MARKER in system:
            text = rewrite_reply(user, opts.rewrite_rules)
        else:
            text = self._answer(system, user, opts, subject, run)

        prompt_tokens = sum(count_tokens(_content(m)) + 3 for m in messages) + 3
        reply = SimReply(text=text, prompt_tokens=prompt_tokens, completion_tokens=count_tokens(text))
        if sleep and opts.latency_ms > 0:
            wait_out(opts.latency_ms / 1000.0, timeout_s)
        return reply

    @staticmethod
    def _maybe_fail(opts: SimOptions, subject: object, run: object, attempt: int) -> None:
        if attempt < opts.fail_attempts:
            failed = True
        elif opts.error_rate > 0:
            failed = _unit(opts.seed, "error", subject, run, attempt) < opts.error_rate
        else:
            return
        if not failed:
            return
        kind = opts.error
        if kind == "mixed":
            pick = _unit(opts.seed, "kind", subject, run, attempt)
            kind = "rate_limit" if pick < 1 / 3 else "internal" if pick < 2 / 3 else "timeout"
        status, message = _ERRORS[kind]
        raise SimulatedError(kind, status, message)

    @staticmethod
    def _answer(system: str, user: str, opts: SimOptions, subject: object, run: object) -> str:
        decision = policy_decision(system, user)
        if decision is not None:
            if not _sampled_right(opts, system, user, subject, run):
                decision = None
            return _policy_answer(decision, opts, subject, run)
        rule = match_rule(parse_rules(system), user)
        if rule is not None and opts.noise > 0 and _unit(opts.seed, "noise", subject, run) < opts.noise:
            rule = None
        if rule is not None and not _sampled_right(opts, system, user, subject, run):
            rule = None
        if opts.style == "label":
            return rule.label if rule is not None else "UNKNOWN"
        if opts.style == "json":
            return json.dumps(
                {"code": rule.label if rule else None, "answer": _sentence(rule)}, separators=(",", ":")
            )
        return _sentence(rule)


def _sampled_right(opts: SimOptions, system: str, user: str, subject: object, run: object) -> bool:
    """The noise mode's draw: True (answer right) unless ``sim_pass_dist`` says this run fails."""
    if opts.pass_dist is None:
        return True
    p = pass_probability(opts.pass_dist, opts.seed, subject)
    return passes(p, opts.seed, prompt_digest(system, user), subject, run)


@dataclass(frozen=True, slots=True)
class RewritePlan:
    converted: tuple[tuple[str, str], ...]  # (hint, rule) in the order applied
    text: str


def rewrite_plan(
    body: str, failing_inputs: Sequence[str], variant: int = 0, per_call: int = 2
) -> RewritePlan:
    """What the simulated rewriter does to a section (see the module docstring)."""
    inputs = [_keywords(text) for text in failing_inputs]
    relevant: list[tuple[int, int, re.Match[str]]] = []
    for position, m in enumerate(_scan(_HINT_SCAN, body)):
        keywords = _keywords(m.group("topic"))
        hits = sum(1 for words in inputs if keywords and keywords <= words)
        if hits:
            relevant.append((-hits, position, m))
    if not relevant or per_call <= 0:
        return RewritePlan(converted=(), text=body)
    relevant.sort(key=lambda x: (x[0], x[1]))
    k = min(per_call, len(relevant))
    start = (variant * k) % len(relevant)
    chosen = [relevant[(start + j) % len(relevant)][2] for j in range(k)]
    text = body
    converted = []
    for m in sorted(chosen, key=lambda m: -m.start()):
        topic = " ".join(m.group("topic").split())
        rule = f"When a customer asks about {topic}, reply with code {m.group('label')}"
        text = text[: m.start()] + rule + text[m.end() :]
        converted.append((m.group(0), rule))
    return RewritePlan(converted=tuple(reversed(converted)), text=text)


def rewrite_reply(user: str, per_call: int = 2) -> str:
    section = _tagged(user, "section")
    body = "" if section is None else section.removeprefix("\n").removesuffix("\n")
    variant = _VARIANT.search(user)
    plan = rewrite_plan(body, _all_tagged(user, "input"), int(variant.group(1)) if variant else 0, per_call)
    return plan.text


@dataclass(frozen=True, slots=True)
class PolicyRule:
    metric: str
    op: str
    ref: str
    label: str
    position: int


@dataclass(frozen=True, slots=True)
class Policy:
    rules: tuple[PolicyRule, ...]
    default: str | None
    params: Mapping[str, float | tuple[str, ...]]


def parse_policy(system: str) -> Policy:
    """The policy rules, the ``Otherwise`` label and the parameter lines of a system prompt."""
    return _POLICIES.get(digest(system), lambda: _parse_policy(system))


def _parse_policy(system: str) -> Policy:
    rules = tuple(
        PolicyRule(
            m.group("metric").lower(),
            " ".join(m.group("op").lower().split()),
            m.group("ref"),
            m.group("label"),
            i,
        )
        for i, m in enumerate(_scan(_POLICY_SCAN, system))
    )
    default = next(_scan(_DEFAULT_SCAN, system), None)
    params: dict[str, float | tuple[str, ...]] = {}
    for m in PARAM_RE.finditer(system):
        value = m.group("value")
        if value.startswith("["):
            params[m.group("name")] = tuple(
                v.strip().strip("'\"") for v in value[1:-1].split(",") if v.strip()
            )
        else:
            params[m.group("name")] = float(value)
    return Policy(rules=rules, default=default.group("label") if default else None, params=params)


def _holds(op: str, value: float, threshold: float) -> bool:
    if op in ("below", "under"):
        return value < threshold
    if op in ("above", "over"):
        return value > threshold
    return value >= threshold if op == "at least" else value <= threshold


def policy_decision(system: str, user: str) -> str | None:
    """The label a policy prompt gives for the observations in ``user``; None when not a policy
    question (no policy rule, or no observation of a rule's metric)."""
    policy = parse_policy(system)
    if not policy.rules:
        return None
    observed = {m.group("name").lower(): float(m.group("value")) for m in _OBSERVATION.finditer(user)}
    if not any(r.metric in observed for r in policy.rules):
        return None
    fired = []
    for rule in policy.rules:
        value = observed.get(rule.metric)
        ref = policy.params.get(rule.ref) if not re.match(r"^-?\d", rule.ref) else float(rule.ref)
        if value is None or not isinstance(ref, float):
            continue
        if _holds(rule.op, value, ref):
            fired.append(rule)
    if not fired:
        return policy.default
    order: tuple[str, ...] = next(
        (
            v
            for k, v in policy.params.items()
            if isinstance(v, tuple) and (k.lower() == "priority" or k.lower().endswith("_priority"))
        ),
        (),
    )
    ranks = [o.casefold() for o in order]

    def rank(rule: PolicyRule) -> tuple[int, int]:
        label = rule.label.casefold()
        return (ranks.index(label) if label in ranks else len(ranks), rule.position)

    return min(fired, key=rank).label


def _policy_answer(label: str | None, opts: SimOptions, subject: object, run: object) -> str:
    if label is not None and opts.noise > 0 and _unit(opts.seed, "noise", subject, run) < opts.noise:
        label = None
    if opts.style == "label":
        return label or "UNKNOWN"
    text = GENERIC_ANSWER if label is None else f"Based on the observations, my next action is {label}."
    if opts.style == "json":
        return json.dumps({"code": label, "answer": text}, separators=(",", ":"))
    return text


def _sentence(rule: Rule | None) -> str:
    if rule is None:
        return GENERIC_ANSWER
    return (
        f"Thanks for getting in touch about {rule.topic}. Following our support policy for this case, "
        f"your reference code is {rule.label}. Let me know if there is anything else I can do."
    )


def _sleep(seconds: float) -> None:
    """Sleep, ending early when the call's job is cancelled (:mod:`optiflow.llm.interrupt`)."""
    try:
        interrupt.sleep(seconds)
    except interrupt.Interrupted:
        status, message = _ERRORS["cancelled"]
        raise SimulatedError("cancelled", status, message) from None


def wait_out(seconds: float, timeout_s: float | None) -> None:
    """Sleep ``seconds``; past the call's timeout, sleep only the timeout and fail as a provider's
    timeout does. A cancelled job's call stops sleeping and fails (permanent: not retried)."""
    if timeout_s is not None and seconds > timeout_s:
        _sleep(timeout_s)
        kind = "timeout"
        raise SimulatedError(kind, _ERRORS[kind][0], f"simulated timeout: no answer within {timeout_s:g}s")
    _sleep(seconds)


__all__ = [
    "GENERIC_ANSWER",
    "HINT_RE",
    "POLICY_RE",
    "PRICE_INPUT_PER_TOKEN",
    "PRICE_OUTPUT_PER_TOKEN",
    "RULE_RE",
    "SIM_MODEL",
    "CompressPlan",
    "Policy",
    "PolicyRule",
    "RewritePlan",
    "Rule",
    "SimOptions",
    "SimReply",
    "SimulatedError",
    "SimulatedModel",
    "compress_plan",
    "compress_section",
    "judge_reply",
    "match_rule",
    "parse_policy",
    "parse_rules",
    "policy_decision",
    "rewrite_plan",
    "rewrite_reply",
]
