"""The faithfulness judge (``faithfulness: {judge: {model: ...}}``): a model asked whether a
compression proposal and the section it replaces impose the same instructions, both ways.

It runs after the reading rules (:func:`optiflow.core.faithfulness.check`) passed a proposal,
through :func:`optiflow.llm.completion.complete` (any litellm model, the simulated one included),
in two requests: does the proposal impose every instruction of the original (*forward*: nothing
lost), and does the original impose every instruction of the proposal (*backward*: nothing added
or changed)? Each answer is JSON ``{"same": true|false, "reason": "..."}``; a bare YES / NO first
word is read too. The proposal is the same only when both answers are yes; an answer that says
neither is a no whose reason says so (a judge that cannot follow the format cannot vouch).

What a judge model must be able to do is in README ("The faithfulness judge").
"""

from __future__ import annotations

import json

from optiflow.core.faithfulness import JudgeSpec, JudgeVerdict
from optiflow.errors import ModelProviderError
from optiflow.llm.markers import SAME_MARKER

SAME_SYSTEM = f"""{SAME_MARKER}
You check a shortened version of instructions written for an AI assistant. Text A and text B
are two versions. Decide whether B imposes every instruction of A with the same meaning: every
rule, prohibition, condition and exception, every number, code, label and placeholder, and which
label goes with which condition. Shorter wording, dropped filler and dropped background are fine.
Answer with JSON only: {{"same": true or false, "reason": "<one short sentence: what differs>"}}."""

REASON_CHARS = 300
"""Characters of a judge's reason kept in the report."""


def same_messages(a: str, b: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SAME_SYSTEM},
        {"role": "user", "content": f"<a>\n{a}\n</a>\n\n<b>\n{b}\n</b>"},
    ]


def json_verdict(text: str) -> dict[str, object] | None:
    """The ``{"same": true|false, ...}`` object in a judge's answer, or None when it has none."""
    out = text.strip()
    start, end = out.find("{"), out.rfind("}")
    if 0 <= start < end:
        try:
            data = json.loads(out[start : end + 1])
        except ValueError:
            return None
        if isinstance(data, dict) and isinstance(data.get("same"), bool):
            return data
    return None


def parse_same(text: str) -> tuple[bool | None, str]:
    """(same?, reason) from a judge's answer (:func:`json_verdict`, else its first word); None when
    it says neither."""
    data = json_verdict(text)
    if data is not None:
        return bool(data["same"]), str(data.get("reason", ""))[:REASON_CHARS]
    out = text.strip()
    head = out[:16].lstrip("*\"' ").lower()
    first = head[: next((i for i, c in enumerate(head) if not c.isalpha()), len(head))]
    if first == "yes":  # the whole first word: "yesterday" is no yes, "Nordhaven" no no
        return True, out[:REASON_CHARS]
    if first == "no":
        return False, out[:REASON_CHARS]
    return None, f"the judge's answer says neither yes nor no: {out[:120]!r}"


def _ask(spec: JudgeSpec, a: str, b: str, where: str) -> tuple[bool | None, str]:
    from optiflow.llm.completion import complete

    result = complete(spec.model, same_messages(a, b), metadata={"purpose": "faithfulness-judge"})
    if result.error is not None:
        raise ModelProviderError(
            f"judging the proposal for {where}: {result.error}", field="faithfulness.judge.model"
        )
    return parse_same(result.output)


def judge_proposal(spec: JudgeSpec, original: str, proposal: str, where: str = "a section") -> JudgeVerdict:
    """Both questions; ``same`` only when both answers are yes."""
    forward, why_forward = _ask(spec, original, proposal, where)
    backward, why_backward = _ask(spec, proposal, original, where)
    same = forward is True and backward is True
    if same:
        reason = why_forward or "the same instructions both ways"
    elif forward is not True:
        reason = f"the proposal does not impose every instruction of the original: {why_forward}"
    else:
        reason = f"the original does not impose every instruction of the proposal: {why_backward}"
    return JudgeVerdict(
        model=spec.model.model, same=same, reason=reason[:REASON_CHARS], forward=forward, backward=backward
    )


__all__ = ["SAME_SYSTEM", "judge_proposal", "parse_same", "same_messages"]
