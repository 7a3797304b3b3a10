"""The faithfulness judge (issue 31) through the real path: ``propose_edit`` (what the propose task
runs) on the support-bot example with ``faithfulness.judge`` on the simulated model, via litellm."""

from __future__ import annotations

import pytest

from optiflow.core.compress.spec import CompressSpec
from optiflow.distributed.work import propose_edit
from optiflow.jobfile import load_job
from optiflow.llm.faithjudge import parse_same
from optiflow.llm.proposal import ProposalRefused
from tests.support.workers import ROOT

EXAMPLE = ROOT / "examples" / "support-bot" / "job.yaml"
JUDGE = {"model": {"model": "optiflow/sim"}}
CLOSING = (
    "It is always a pleasure to talk with our customers, and we hope that every conversation leaves "
    "them happy with the help they received from the friendly team.\n"
    "When a customer asks about a refund, reply with code RFD-201.\n"
    "End every conversation by thanking the customer for choosing ${company}."
)


def test_answers_are_read_as_json_or_a_first_word() -> None:
    assert parse_same('{"same": true, "reason": "ok"}') == (True, "ok")
    assert parse_same('Sure: {"same": false, "reason": "drops 14"}') == (False, "drops 14")
    assert parse_same("YES, the same.")[0] is True
    assert parse_same("No. B drops the refund code.")[0] is False
    same, why = parse_same("I'm ready to help!")
    assert same is None and "neither yes nor no" in why
    # the whole first word (SmolLM2 began answers with "Nordhaven ..."; a "yesterday" must not vouch)
    for text in (
        "Nordhaven was founded in 2009.",
        "Note: both texts",
        "Yesterday the review said",
        "Nowhere",
    ):
        assert parse_same(text)[0] is None, text
    assert parse_same("**Yes** - B keeps every rule.")[0] is True


def test_the_judge_on_the_simulated_model_through_propose_edit() -> None:
    spec = load_job(EXAMPLE, overrides={"faithfulness": {"allow_dropped_rules": True, "judge": JUDGE}})
    assert isinstance(spec, CompressSpec) and spec.faithfulness.judge is not None
    # a section whose filler carries nothing the judge looks for: its compression is the same
    spec = spec.model_copy(update={"prompt": spec.prompt.with_bodies({("closing",): CLOSING})})
    accepted, refused = [], []
    for section in spec.prompt.sections:
        if section.frozen:
            continue
        try:
            edit = propose_edit(spec, section.path)
        except ProposalRefused as exc:
            refused.append(exc)
            continue
        if edit.proposed_body != section.body:
            accepted.append(edit)
    assert accepted and refused
    for edit in accepted:
        f = edit.faithfulness
        assert f is not None and f.judge is not None and f.judge.same
        assert f.judge.model == "optiflow/sim" and f.judge.forward and f.judge.backward
        assert any(line.startswith("judge optiflow/sim:") for line in f.map_lines())
    for exc in refused:
        assert exc.reason.startswith("the judge optiflow/sim finds it differs: the proposal does not impose")
        assert exc.faithfulness.judge is not None and exc.faithfulness.judge.forward is False
        assert "B lacks" in exc.faithfulness.judge.reason


def test_without_a_judge_no_model_is_asked_about_faithfulness(monkeypatch: pytest.MonkeyPatch) -> None:
    import optiflow.llm.faithjudge as fj

    def boom(*a: object, **k: object) -> object:
        raise AssertionError("judge asked")

    monkeypatch.setattr(fj, "judge_proposal", boom)
    spec = load_job(EXAMPLE)
    assert isinstance(spec, CompressSpec) and spec.faithfulness.judge is None
    edit = propose_edit(spec, ("closing",))
    assert edit.faithfulness is None or edit.faithfulness.judge is None
