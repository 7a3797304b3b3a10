"""Every function that reads document text, in one place: the registry of the text-safety test.

A document's text is what a job document, a prompt or dataset file, an HTTP body or a model's
answer to them carries: section bodies, proposals, sample inputs and expected values, templates,
check settings, outputs. Each :class:`Reader` is one such function made to take one text (the
other arguments fixed), and says what it reads. ``tests/security/test_text_safety.py`` runs every
reader on the adversarial corpus (:mod:`tests.security.text_corpus`), including the families
derived from the regular expressions the reader uses (``derive``); ``test_regex_inventory.py``
requires every pattern optiflow applies to document text to name the reader here that exercises
it. A new function that reads document text joins this list, or that test fails.
"""

from __future__ import annotations

import json
import re
import tempfile
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic

import optiflow.admission
import optiflow.checking
import optiflow.core.checks
import optiflow.core.clauses
import optiflow.core.compress.extract
import optiflow.core.compress.rules
import optiflow.core.faithfulness
import optiflow.core.optimize.demonstrations
import optiflow.core.optimize.params
import optiflow.core.prompt
import optiflow.core.provenance
import optiflow.core.reading
import optiflow.core.relevance
import optiflow.core.sections
import optiflow.core.sentences
import optiflow.core.vocabulary
import optiflow.errors
import optiflow.files
import optiflow.interfaces.cli._common
import optiflow.interfaces.console
import optiflow.interfaces.http.api
import optiflow.llm.compress
import optiflow.llm.judge
import optiflow.llm.noise
import optiflow.llm.proposal
import optiflow.llm.rewrite
import optiflow.llm.simulated
import optiflow.llm.tokens
from optiflow.core.checks import (
    ContainsCheck,
    ExactCheck,
    JsonFieldCheck,
    LLMJudgeCheck,
    NumericCheck,
    RegexCheck,
    run_check,
)
from optiflow.core.compress.extract import Piece, chosen, numbered, pieces, rebuild
from optiflow.core.dataset import Sample
from optiflow.core.faithfulness import FaithfulnessContext, context_for
from optiflow.core.faithfulness import check as faithful
from optiflow.core.model import ModelConfig
from optiflow.core.optimize.demonstrations import (
    DemonstrationsSpec,
    demonstration_ids,
    render_demonstrations,
)
from optiflow.core.optimize.failures import analyze_failures
from optiflow.core.optimize.params import ParameterBlockSpec
from optiflow.core.optimize.trial import FailingSample
from optiflow.core.prompt import Prompt, Section
from optiflow.core.provenance import provenance
from optiflow.core.relevance import Relevance, removed_sentences
from optiflow.core.step import FailingExample, RewriteRequest
from optiflow.errors import OptiflowError
from optiflow.llm.faithjudge import parse_same, same_messages
from optiflow.llm.markers import COMPRESS_MARKER, EXTRACT_MARKER, JUDGE_MARKER, REWRITE_MARKER, SAME_MARKER
from optiflow.llm.simulated import SimulatedModel

ALLOWED: tuple[type[BaseException], ...] = (OptiflowError, pydantic.ValidationError)
"""A reader may refuse a text with a clear error (naming the field); any other exception fails
the test."""


@dataclass(frozen=True)
class Reader:
    """``read(prepare(text))`` is timed; ``setup()`` runs before each call (a cache cleared)."""

    name: str
    read: Callable[[Any], object]
    reads: str
    """What document text it reads, in a few words."""
    derive: tuple[types.ModuleType | re.Pattern[str], ...] = ()
    """Whose regular expressions make its derived families (besides the generic ones): every
    pattern of a module, or the patterns named."""
    prepare: Callable[[str], Any] = field(default=lambda text: text)
    setup: Callable[[], None] = field(default=lambda: None)
    raises: tuple[type[BaseException], ...] = ALLOWED
    corpus: tuple[str, ...] = ()
    """Units of its own families (each repeated), for paths the generic and derived ones miss."""
    budget: float = 1.0
    """Its per-megabyte budget, in multiples of the common one (one second on an idle machine)."""
    surrogates: bool = False
    """It can receive lone surrogates (a JSON or YAML parser: ``"\\ud800"`` parses to one). Every
    loader refuses them (:func:`optiflow.files.check_document`), so no reader after it sees one."""


YAML_BUDGET = 4.0
"""A YAML document with a long run of blanks is parsed by PyYAML's pure-Python parser (libyaml is
quadratic on it: :data:`optiflow.files._LONG_BLANK`): linear, about 2-3 s per MB on this machine,
read twice (its events, then the document). YAML comes from the operator's files only (an HTTP
body is JSON)."""


# -- fixed arguments ---------------------------------------------------------------------------------
ORIGINAL = (
    "Classify the review as positive or negative. Reply with one word. When the customer asks about "
    "refunds, reply with code RFD-201. Questions about billing are filed under BIL."
)
CONTEXT = FaithfulnessContext(labels=("negative", "positive"), idf={}, unseen_idf=1.0)
SIM = SimulatedModel()
BLOCK = ParameterBlockSpec.model_validate(
    {"section": "policy", "params": {"limit": {"type": "float", "min": 0, "max": 1}}}
)
DEMOS = DemonstrationsSpec.model_validate({"section": "examples", "k": 2})


def _sample(text: str) -> list[Sample]:
    return [Sample(id="s1", input=text, expected="positive"), Sample(id="s2", input="short", expected=text)]


def _prompt(body: str, user: str = "${input}") -> Prompt:
    return Prompt(ns="t", key="k", sections=(Section(path=("task",), body=body),), user=user)


def _halves(text: str) -> tuple[str, str]:
    h = len(text) // 2
    return text[:h], text[h:]


def _sim(system: str, user: str) -> Callable[[str], object]:
    """The simulated model answering ``system`` and ``user`` with ``{}`` replaced by the text."""

    def read(text: str) -> object:
        messages = [
            {"role": "system", "content": system.replace("{}", text)},
            {"role": "user", "content": user.replace("{}", text)},
        ]
        return SIM.reply(messages, {"sim_pass_dist": "beta(3,3)"}, sleep=False)

    return read


def _file(suffix: str) -> Callable[[str], Path]:
    def write(text: str) -> Path:
        path = Path(tempfile.mkdtemp(prefix="text-safety-")) / f"doc{suffix}"
        path.write_text(text, encoding="utf-8")
        return path

    return write


def _dataset_file(suffix: str) -> Callable[[str], Path]:
    def write(text: str) -> Path:
        rows = {
            ".jsonl": json.dumps({"id": "a", "input": text, "expected": "x"}) + "\n" + text,
            ".csv": "id,input,expected\na," + json.dumps(text) + ",x\n" + text,
            ".yaml": "- id: a\n  input: " + json.dumps(text) + "\n" + text,
        }[suffix]
        return _file(suffix)(rows)

    return write


def _job(text: str) -> dict[str, Any]:
    """A measure job document whose section body, user message and sample input are the text."""
    return {
        "kind": "measure",
        "name": "text-safety",
        "prompt": {"ns": "t", "key": "k", "sections": [{"path": "task", "body": text}], "user": "${input}"},
        "dataset": [{"id": "a", "input": text, "expected": "positive"}],
        "check": {"type": "contains"},
        "model": {"model": "optiflow/sim"},
        "runs": 1,
    }


def _admit(text: str) -> object:
    from optiflow.admission import admit
    from optiflow.jobfile import load_job_data
    from optiflow.settings import Settings

    spec = load_job_data(_job(text), source="body")
    admit(spec, Settings())
    return spec


def _relevance(text: str) -> object:
    rel = Relevance(_sample(text))
    removed = removed_sentences([(text, ORIGINAL)])
    return rel.probe(removed, ["s1", "s2"], 2)


def _failing(text: str) -> object:
    failing = [FailingSample(sample_id="s", tags=(text, "a"), expected=text, input=text, reason=text)]
    return (
        analyze_failures(failing, categories=["a", text], categorize="tags"),
        analyze_failures(failing, categories=["a", text], categorize="expected"),
    )


def _rewrite(text: str) -> object:
    from optiflow.llm.rewrite import rewrite_messages

    request = RewriteRequest(
        id="r",
        model=ModelConfig(model="optiflow/sim"),
        section=("task",),
        current=text,
        max_length=10**7,
        failing=(FailingExample(sample_id="s", input=text, expected=text, reason=text),),
    )
    return rewrite_messages(request)


def _demonstrations(text: str) -> object:
    body = render_demonstrations(DEMOS, _sample(text))
    return demonstration_ids(body, _sample(text))


def _template(text: str) -> object:
    spec = DemonstrationsSpec.model_validate({"section": "examples", "template": text})
    return render_demonstrations(spec, _sample("x"))


def _pieces(text: str) -> tuple[Piece, ...]:
    """Many pieces, as a body of short clauses makes them (``extract.pieces``, the splitter, is timed
    on its own): one per word, a new line every few, built without validation so that preparing a
    megabyte is not the test's cost."""
    return tuple(Piece.model_construct(text=w, line=i // 4) for i, w in enumerate(text.split(" ")))


def _clear_tokens() -> None:
    optiflow.llm.tokens._COUNTS.clear()


def _clear_sim() -> None:
    optiflow.llm.simulated.clear_caches()
    optiflow.llm.tokens._COUNTS.clear()


def _judge(text: str) -> object:
    return optiflow.llm.judge.judge_messages(
        LLMJudgeCheck(model=ModelConfig(model="optiflow/sim"), rubric=text), text, text, text
    )


_M = optiflow
_S = optiflow.llm.simulated
_SENTENCES = (_S._SENTENCE_SPLIT, _S.RULE_RE, _S._RULE_LEAD, _S._REPLY_TAIL, _S._SEGMENT_END, _S._TOPIC_STOP)
READERS: Sequence[Reader] = (
    # prompts: section bodies, placeholders, rendering
    Reader("prompt.template_params", _M.core.prompt.template_params, "section bodies", (_M.core.prompt,)),
    Reader(
        "prompt.render (body)",
        lambda t: _prompt(t).render("x", params={"a": "b"}),
        "section bodies as $ templates",
        (_M.core.prompt,),
    ),
    Reader(
        "prompt.render (input)", lambda t: _prompt("${input}").render(t), "sample inputs", (_M.core.prompt,)
    ),
    Reader(
        "admission.check_templates",
        lambda t: _M.admission.check_templates({("task",): t}, t),
        "section bodies and the user template",
        (_M.admission,),
    ),
    Reader("admission (a whole job)", _admit, "a job document: body, user, input", (_M.admission, _M.files)),
    Reader("sections.section_hash", _M.core.sections.section_hash, "section bodies", (_M.core.sections,)),
    Reader("sections.parse_path", _M.core.sections.parse_path, "section paths", (_M.core.sections,)),
    # checks: outputs and expected values
    Reader("check exact", lambda t: run_check(ExactCheck(), t, t), "outputs, expected values"),
    Reader(
        "check contains",
        lambda t: run_check(ContainsCheck(), t, [_halves(t)[1], "zz"]),
        "outputs, expected values",
    ),
    Reader(
        "check regex (RE2)",
        lambda t: run_check(RegexCheck(pattern=r"(a+)+b|\d{3}-x"), t, None, search=_M.checking.regex_search),
        "outputs",
        (_M.checking,),
    ),
    Reader(
        "check regex pattern (RE2 compile)",
        lambda t: _M.checking.compile_pattern.__wrapped__(t[:10_000], "check.pattern"),
        "check patterns and expected values used as patterns",
        (_M.checking,),
    ),
    Reader("check json_field", lambda t: run_check(JsonFieldCheck(field="a.b.0"), t, "x"), "outputs"),
    Reader("check numeric", lambda t: run_check(NumericCheck(), t, "5"), "outputs", (_M.core.checks,)),
    Reader("judge.parse_score", _M.llm.judge.parse_score, "a judge's answer", (_M.llm.judge,)),
    Reader("judge.judge_messages", _judge, "rubric, output, expected, input", (_M.llm.judge,)),
    # loading documents
    Reader(
        "files.parse_json",
        lambda t: _M.files.parse_json(t, "doc"),
        "JSON documents",
        (_M.files,),
        surrogates=True,
    ),
    Reader(
        "files.read_yaml",
        _M.files.read_yaml,
        "YAML documents",
        (_M.files,),
        prepare=_file(".yaml"),
        budget=YAML_BUDGET,
    ),
    Reader(
        "files.load_dataset (jsonl)",
        _M.files.load_dataset,
        "JSONL datasets",
        (_M.files,),
        prepare=_dataset_file(".jsonl"),
    ),
    Reader(
        "files.load_dataset (csv)",
        _M.files.load_dataset,
        "CSV datasets",
        (_M.files,),
        prepare=_dataset_file(".csv"),
    ),
    Reader(
        "files.load_dataset (yaml)",
        _M.files.load_dataset,
        "YAML datasets",
        (_M.files,),
        prepare=_dataset_file(".yaml"),
        budget=YAML_BUDGET,
    ),
    Reader(
        "http.parse_job_document",
        lambda t: _M.interfaces.http.api.parse_job_document(t.encode("utf-8", "surrogatepass")),
        "HTTP bodies",
        (_M.interfaces.http.api,),
        surrogates=True,
    ),
    # what the LLM strategies send and read back
    Reader(
        "compress.guard_placeholders",
        lambda t: _M.llm.proposal.guard_placeholders(t, _halves(t)[0]),
        "section bodies and proposals",
        (_M.llm.proposal,),
    ),
    Reader("compress.clean_output", _M.llm.proposal.clean_output, "a model's proposal", (_M.llm.proposal,)),
    Reader("rewrite.rewrite_messages", _rewrite, "section bodies, failing samples", (_M.llm.rewrite,)),
    # the simulated model
    Reader(
        "sim: answer (system)",
        _sim("{}", "I want a refund for the double charge"),
        "the rendered prompt",
        (_M.llm.simulated, _M.llm.noise),
        setup=_clear_sim,
    ),
    Reader(
        "sim: answer (user)",
        _sim(ORIGINAL + " When the health is below 0.5, reply with code FLEE.", "{}"),
        "sample inputs",
        (_S._WORD, _S._OBSERVATION),
        setup=_clear_sim,
    ),
    Reader("sim: compress", _sim(COMPRESS_MARKER, "{}"), "section bodies", _SENTENCES, setup=_clear_sim),
    Reader(
        "sim: same-instructions",
        _sim(SAME_MARKER, "<a>{}</a><b>Reply with code RFD-201 within 14 days; never share it.</b>"),
        "section bodies and proposals",
        (_M.core.provenance,),
        setup=_clear_sim,
    ),
    Reader("faithjudge.parse_same", parse_same, "a model's reply"),
    Reader(
        "faithjudge.same_messages",
        lambda halves: same_messages(halves[0], halves[1]),
        "section bodies and proposals",
        prepare=_halves,
    ),
    Reader(
        "sim: extract",
        _sim(EXTRACT_MARKER, "{}"),
        "numbered pieces",
        (_S._NUMBERED, *_SENTENCES),
        setup=_clear_sim,
    ),
    Reader(
        "sim: judge",
        _sim(JUDGE_MARKER, "<expected>{}</expected><output>{}</output>"),
        "outputs, expected values",
        setup=_clear_sim,
        budget=2.0,  # the text is in the message twice
    ),
    Reader(
        "sim: rewrite",
        _sim(REWRITE_MARKER, "<section>{}</section><input>{}</input><variant>1</variant>"),
        "section bodies, failing inputs",
        (_S.HINT_RE, _S._HINT_LEAD, _S._HINT_TAIL, _S._VARIANT, _S._WORD, _S._TOPIC_STOP),
        setup=_clear_sim,
        budget=2.0,  # the text is in the message twice
    ),
    Reader(
        "sim: pass_dist",
        _M.llm.noise.parse_pass_dist,
        "the sim_pass_dist param",
        (_M.llm.noise,),
        raises=(ValueError,),
    ),
    # faithfulness of a compression proposal
    Reader(
        "faithfulness.check (proposal)",
        lambda t: faithful(ORIGINAL, t, CONTEXT),
        "proposals",
        (_M.core.faithfulness, _M.core.provenance, _M.core.reading),
        corpus=("do you ",),  # issue 27: "do you " x 32000 held the GIL for 46 s
    ),
    Reader(
        "faithfulness.check (two texts)",
        lambda halves: faithful(halves[0], halves[1], CONTEXT),
        "section bodies and proposals",
        (_M.core.faithfulness, _M.core.provenance, _M.core.reading),
        prepare=_halves,
    ),
    Reader(
        "provenance (original)",
        lambda t: provenance(t, ORIGINAL, CONTEXT.labels),
        "section bodies",
        (_M.core.provenance, _M.core.reading),
        corpus=("Do not. ", "RFD-201 ", "positive, ", "14 days "),
    ),
    Reader(
        "provenance (two texts)",
        lambda halves: provenance(halves[0], halves[1], ("negative", "positive", "very bad")),
        "section bodies and proposals",
        (_M.core.provenance, _M.core.reading, _M.core.clauses, _M.core.sentences, _M.core.vocabulary),
        prepare=_halves,
        corpus=(
            "Do not share order numbers, addresses or names. ",
            "Share order numbers, never addresses; ",
            'Review: "Great, it broke."\nAnswer: negative\n',
            "Escalate to Legal when a lawyer calls, except about a parking ticket on Mondays. ",
            "2FA two-factor authentication ",
        ),
    ),
    Reader(
        "faithfulness.context_for",
        lambda t: context_for([t, ORIGINAL], [t, {"q": t}], [t, "positive", "negative"]),
        "section bodies, sample inputs, expected values",
        (_M.core.faithfulness,),
    ),
    # extractive compression
    Reader("extract.pieces", pieces, "section bodies", (_M.core.compress.extract,)),
    Reader(
        "extract.numbered and rebuild",
        lambda ps: (numbered(ps), rebuild(ps, range(1, len(ps) + 1, 2))),
        "section bodies",
        (_M.core.compress.extract,),
        prepare=_pieces,
        corpus=("${a}; ", "Keep this rule; "),
    ),
    Reader("extract.chosen", lambda t: chosen(t, 1000), "a model's reply", (_M.core.compress.extract,)),
    # the rule-based compressor, relevance
    Reader(
        "rules.compress_text",
        _M.core.compress.rules.compress_text,
        "section bodies",
        (_M.core.compress.rules,),
        corpus=("Please note that ${a} is due to the fact that ${b}. ", "in order to${a}in order to "),
    ),
    Reader("relevance.words", _M.core.relevance.words, "sample inputs", (_M.core.relevance,)),
    Reader("relevance.probe", _relevance, "section bodies, sample inputs", (_M.core.relevance,)),
    # token counting
    Reader(
        "tokens.count_tokens", _M.llm.tokens.count_tokens, "every text a model reads", setup=_clear_tokens
    ),
    Reader(
        "tokens.count_tokens (o200k)",
        lambda t: _M.llm.tokens.count_tokens(t, "gpt-4o"),
        "every text a model reads",
        setup=_clear_tokens,
    ),
    # optimizers that read text
    Reader("failures.analyze_failures", _failing, "tags, expected values of failing samples"),
    Reader(
        "params: block parse",
        BLOCK.parse,
        "the parameter block section",
        (_M.core.optimize.params, BLOCK._line("limit")),
    ),
    Reader(
        "params: block render",
        lambda t: BLOCK.render(t + "\nlimit: 0.5\n", {"limit": 0.25}),
        "the parameter block section",
        (_M.core.optimize.params, BLOCK._line("limit")),
    ),
    Reader(
        "demonstrations: render and find",
        _demonstrations,
        "train samples' inputs and expected values",
        (_M.core.optimize.demonstrations,),
    ),
    Reader(
        "demonstrations: template",
        _template,
        "the demonstrations template",
        (_M.core.optimize.demonstrations,),
    ),
    # what terminals and answers show
    Reader(
        "console.boxed",
        lambda t: _M.interfaces.console.boxed("title", t),
        "reports",
        (_M.interfaces.console,),
    ),
    Reader(
        "cli.printable", _M.interfaces.cli._common.printable, "names and ids", (_M.interfaces.cli._common,)
    ),
    Reader("errors.public_message", _M.errors.public_message, "error texts", (_M.errors,)),
)


def reader(name: str) -> Reader:
    return next(r for r in READERS if r.name == name)


__all__ = ["ALLOWED", "READERS", "Reader", "reader"]
