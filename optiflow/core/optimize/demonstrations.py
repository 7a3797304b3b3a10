"""The ``demonstrations`` optimizer: ``k`` labeled train examples written into a section.

No strong proposer needed (DESIGN §2a; DSPy's LabeledFewShot / BootstrapFewShot with random
search): every candidate is the baseline configuration whose ``section`` body gets, after its own
text, ``header`` and ``k`` demonstrations rendered by ``template`` (:func:`render_template`).
Candidates alternate between

- **random** subsets of the train split, and
- **bootstrapped** subsets: train samples the current best already passes in every run (what the
  model can do, shown back to it). The workflow's evaluations carry no model output (chord results
  stay small), so a bootstrapped demonstration shows the sample's labeled answer, which its check
  accepted from the best's own output.

The pool is the train split only, fixed when the optimizer is built (``splits: true`` is required):
a validation or test sample is never shown as a demonstration, so selection and the held-out
confirmation stay honest. Generation ``g`` proposes candidates ``g m .. g m + m - 1`` (``m`` =
``max_candidates_per_step``), candidate ``i`` drawn from ``random.Random(f"{seed}:{i}")``: deterministic
and resumable; after ``candidates`` proposals the optimizer proposes nothing (``exhausted``).
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, StrictBool, StrictInt, field_validator

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.dataset import Sample
from optiflow.core.optimize.configuration import (
    TreatmentFactor,
    config_hash,
    config_params,
    config_sections,
    make_config,
)
from optiflow.core.optimize.history import TrialHistory
from optiflow.core.optimize.protocol import (
    CONTINUE,
    CandidateProposal,
    OptimizerState,
    RunContext,
    StopDecision,
    observe_best,
)
from optiflow.core.optimize.trial import TrialResult
from optiflow.core.sections import SectionPath, parse_path, path_str

FIELDS = ("input", "expected")
DEFAULT_TEMPLATE = "Input: ${input}\nOutput: ${expected}"
MAX_TEMPLATE_CHARS = 2000
"""The longest ``template`` and ``header``."""
MAX_FIELDS = 8
"""The most ``${input}`` / ``${expected}`` in one template: a demonstration is at most
``MAX_FIELDS x max_value_chars`` characters plus the template (2,000 ``${input}`` in a 16 KB template
would repeat a 20,000-character input 2,000 times)."""


def template_error(template: str) -> str | None:
    """Why ``template`` is not a demonstrations template (None when it is one).

    A template is data: ``${input}`` and ``${expected}`` are replaced by a sample's values (each cut
    at ``max_value_chars``), every other character is copied into the section, which is itself a
    ``$`` template (``$$`` for a dollar sign, ``${param}`` for a prompt parameter is not allowed
    here). No format specs: a Python format string let a document set a field's width
    (``{input:>400000000}`` took the API from 94 to 474 MB; issue 27)."""
    fields = template.count("${input}") + template.count("${expected}")
    if fields > MAX_FIELDS:
        return f"{fields} fields; a template may use ${{input}} and ${{expected}} {MAX_FIELDS} times in all"
    rest = template.replace("${input}", "").replace("${expected}", "")
    t = string.Template(rest)
    if not t.is_valid():
        return (
            "only ${input} and ${expected} are replaced; the text goes into a prompt section, which is a "
            "$ template: write $$ for a dollar sign"
        )
    names = t.get_identifiers()
    if names:
        return (
            f"${{{names[0]}}} is not a demonstration field: use ${{input}} and ${{expected}} "
            "(write $$ for a dollar sign)"
        )
    return None


def upgrade_template(template: str) -> str:
    """A template in the old ``str.format`` form (``{input}``, ``{expected}``, ``{{`` for a brace) with
    no format spec, conversion or other field, rewritten to ``${...}`` with the same meaning; any
    other template as it is (:func:`template_error` then judges it)."""
    if "${" in template or "{" not in template:
        return template
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError:
        return template
    fields = [(name, spec, conv) for _, name, spec, conv in parsed if name is not None]
    if not fields or any(name not in FIELDS or spec or conv for name, spec, conv in fields):
        return template
    return "".join(text + (f"${{{name}}}" if name is not None else "") for text, name, _, _ in parsed)


def format_fields(template: str) -> str | None:
    """The first ``str.format`` field of ``template`` that is not a plain ``{input}`` / ``{expected}``
    (``{input:>400000000}``, ``{input!r}``, ``{0}``), or None."""
    if "{" not in template:
        return None
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError:
        return None
    for _, name, spec, conv in parsed:
        if name is not None and (name not in FIELDS or spec or conv):
            return "{" + name + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}"
    return None


class DemonstrationsSpec(Frozen):
    type: Literal["demonstrations"] = "demonstrations"
    section: SectionPath
    """The section the demonstrations are written into (in the treatment factor)."""
    k: StrictInt = Field(default=4, ge=1, le=32)
    candidates: StrictInt = Field(default=8, ge=1, le=200)
    """Proposals in all (random and bootstrapped alternate)."""
    bootstrapped: StrictBool = True
    seed: StrictInt = Field(default=0, ge=0, le=2**63 - 1)
    header: str = Field(default="Examples:", max_length=MAX_TEMPLATE_CHARS)
    template: str = Field(default=DEFAULT_TEMPLATE, max_length=MAX_TEMPLATE_CHARS)
    """``${input}`` and ``${expected}`` substitution (:func:`template_error`)."""
    max_value_chars: StrictInt = Field(default=2000, ge=1, le=20_000)
    """A sample's input or expected value longer than this is cut (with " ...") in its demonstration."""

    @field_validator("section", mode="before")
    @classmethod
    def _path(cls, value: Any) -> Any:
        return parse_path(value) if isinstance(value, str) else value

    @field_validator("template", mode="before")
    @classmethod
    def _upgrade(cls, value: Any) -> Any:
        return upgrade_template(value) if isinstance(value, str) else value

    @field_validator("template")
    @classmethod
    def _template(cls, value: str) -> str:
        field = format_fields(value)
        if field is not None and "${" not in value:
            raise ValueError(
                f"{field} is a Python format field: templates are ${{input}} and ${{expected}} substitution "
                "now (no width, no format spec): write e.g. 'Input: ${input}\\nOutput: ${expected}'"
            )
        error = template_error(value)
        if error is not None:
            raise ValueError(error)
        return value

    @field_validator("header")
    @classmethod
    def _header(cls, value: str) -> str:
        t = string.Template(value)
        if not t.is_valid() or t.get_identifiers():
            raise ValueError("the header goes into a prompt section, a $ template: write $$ for a dollar")
        return value

    def default_treatment(self) -> TreatmentFactor | None:
        return TreatmentFactor(sections=(self.section,))

    def description(self) -> str:
        kinds = "random and bootstrapped" if self.bootstrapped else "random"
        return (
            f"Demonstrations: {self.k} labeled train examples in {path_str(self.section)} "
            f"({kinds} subsets, {self.candidates} candidates, seed {self.seed})"
        )


def _text(value: JSONValue) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        return _text(next(iter(value.values())))
    if isinstance(value, dict):
        return "\n".join(f"{k}: {_text(v)}" for k, v in value.items())
    return json.dumps(value, ensure_ascii=False)


def _value(value: JSONValue, limit: int) -> str:
    """A sample's value as a demonstration shows it: cut at ``limit`` characters, every ``$`` doubled
    (the section is a ``$`` template: a value's ``$5`` or ``${name}`` is text, not a placeholder)."""
    text = _text(value)
    if len(text) > limit:
        text = text[:limit] + " ..."
    return text.replace("$", "$$")


def render_template(template: str, values: dict[str, str]) -> str:
    """``template`` with ``${input}`` and ``${expected}`` replaced, in one pass (a value holding
    ``${expected}`` is not replaced again)."""
    parts = template.split("${input}")
    return values["input"].join(p.replace("${expected}", values["expected"]) for p in parts)


def render_demonstrations(spec: DemonstrationsSpec, samples: Sequence[Sample]) -> str:
    shots = [
        render_template(
            spec.template,
            {
                "input": _value(s.input, spec.max_value_chars),
                "expected": _value(s.expected, spec.max_value_chars),
            },
        )
        for s in samples
    ]
    return "\n\n".join(x for x in (spec.header.strip(), *shots) if x)


class DemonstrationsOptimizer:
    def __init__(self, spec: DemonstrationsSpec, train: Sequence[Sample]) -> None:
        self.spec = spec
        self.train = tuple(train)
        self.by_id = {s.id: s for s in self.train}

    def description(self) -> str:
        return self.spec.description()

    def initialize(self, context: RunContext) -> OptimizerState:
        return OptimizerState(
            best_candidate_id=context.baseline_candidate_id,
            best_score=context.baseline_score,
            algorithm_data={"baseline_candidate_id": context.baseline_candidate_id},
        )

    def _passed_by_best(self, state: OptimizerState, history: TrialHistory) -> list[Sample]:
        best = history.trial(state.best_candidate_id or "")
        if best is None:
            return []
        failing = {f.sample_id for f in best.failing}
        return [s for s in self.train if s.id not in failing]

    def propose(
        self, state: OptimizerState, history: TrialHistory, max_candidates: int
    ) -> list[CandidateProposal]:
        base = history.trial(str(state.algorithm_data.get("baseline_candidate_id", "")))
        if base is None or not self.train:
            return []
        spec = self.spec
        body = config_sections(base.configuration).get(spec.section, "").rstrip()
        passed = self._passed_by_best(state, history) if spec.bootstrapped else []
        seen = set(history.seen_hashes())
        out: list[CandidateProposal] = []
        i = state.generation * max_candidates  # generation g proposes candidates g*m .. g*m + m - 1
        stop = min(spec.candidates, i + max_candidates)
        while i < stop:
            rng = random.Random(f"{spec.seed}:{i}")
            boot = spec.bootstrapped and i % 2 == 1 and len(passed) >= spec.k
            pool = passed if boot else list(self.train)
            chosen = rng.sample(pool, min(spec.k, len(pool)))
            demos = render_demonstrations(spec, chosen)
            sections = config_sections(base.configuration)
            sections[spec.section] = f"{body}\n\n{demos}" if body else demos
            config = make_config(sections, config_params(base.configuration))
            i += 1
            digest = config_hash(config)
            if digest in seen:
                continue
            seen.add(digest)
            kind = "bootstrapped (passed by the best)" if boot else "random"
            out.append(
                CandidateProposal(
                    configuration=config,
                    parent_candidate_ids=(base.candidate_id,),
                    rationale=f"{kind} demonstrations {i - 1}: {', '.join(s.id for s in chosen)}",
                )
            )
        return out

    def observe(self, state: OptimizerState, trial_results: list[TrialResult]) -> OptimizerState:
        return observe_best(state, trial_results)

    def should_stop(self, state: OptimizerState, history: TrialHistory) -> StopDecision:
        return CONTINUE


def demonstration_ids(body: str, train: Sequence[Sample]) -> list[str]:
    """Which train samples a rendered body shows (for tests and reports): those whose input, as a
    demonstration renders it, ends a line of ``body`` after a blank or a line start. Substring
    search (linear), not a pattern built from the input."""
    padded = "\n" + body + "\n"
    out = []
    for s in train:
        text = _text(s.input).replace("$", "$$")
        if any(f"{c}{text}\n" in padded for c in "\n \t\r\f\v"):
            out.append(s.id)
    return out


__all__ = [
    "DemonstrationsOptimizer",
    "DemonstrationsSpec",
    "demonstration_ids",
    "render_demonstrations",
    "render_template",
    "template_error",
    "upgrade_template",
]
