"""Candidate validation (seed 001 §6.3): guardrails applied before anything is evaluated.

Checks, in order, each giving a rejection ``reason_code``:

- ``invalid_shape``: not ``{"sections": {...}, "model_params": {...}}``, a bad section path, or a
  treatment section / param missing (a configuration is *full*: every treatment value);
- ``unknown_section``: a section the prompt does not have;
- ``frozen_section``: a frozen section (never edited by any optimizer);
- ``fixed_factor``: a mutable section or a model param outside the treatment factor;
- ``invalid_value``: a body that is not text, empty, too long or changes the ``${param}``
  placeholders; a param value that is not a finite JSON scalar or outside its domain;
- ``unknown_parent``: a parent that is not an existing candidate;
- ``duplicate``: same canonical config hash as a candidate already accepted or evaluated in this
  optimization (the baseline included) or earlier in the same batch;
- ``over_limit``: valid, but the step already has ``max_candidates`` accepted.

A rejected proposal is never evaluated; it is recorded as a validation event.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from pydantic import Field

from optiflow.core.base import Frozen, JSONValue
from optiflow.core.optimize.configuration import (
    Configuration,
    TreatmentFactor,
    canonical,
    config_hash,
    normalize_value,
)
from optiflow.core.prompt import Prompt, template_params
from optiflow.core.records import Rejection
from optiflow.core.sections import SectionPath, parse_path, path_str
from optiflow.errors import OptiflowError

ReasonCode = Literal[
    "invalid_shape",
    "unknown_section",
    "frozen_section",
    "fixed_factor",
    "invalid_value",
    "unknown_parent",
    "duplicate",
    "over_limit",
]


class AcceptedProposal(Frozen):
    proposed_index: int = Field(ge=0)
    configuration: Configuration
    config_hash: str
    parent_candidate_ids: tuple[str, ...] = ()
    rationale: str | None = None


class ValidationOutcome(Frozen):
    accepted: tuple[AcceptedProposal, ...] = ()
    rejected: tuple[Rejection, ...] = ()


class _Refused(Exception):
    def __init__(self, code: ReasonCode, message: str) -> None:
        super().__init__(message)
        self.code: ReasonCode = code
        self.message = message


class CandidateValidator:
    """Validates proposals against a prompt and a treatment factor (pure, stateless)."""

    def __init__(
        self, prompt: Prompt, treatment: TreatmentFactor, *, max_section_chars: int = 20_000
    ) -> None:
        self.prompt = prompt
        self.treatment = treatment
        self.max_section_chars = max_section_chars

    def validate(
        self,
        proposals: Sequence[object],
        *,
        known_candidates: Iterable[str],
        seen_hashes: Mapping[str, str],
        max_candidates: int,
        step_index: int,
        iteration: int,
    ) -> ValidationOutcome:
        """``seen_hashes``: config hash -> candidate id of everything accepted so far."""
        known = frozenset(known_candidates)
        seen = {digest: f"candidate {cid}" for digest, cid in seen_hashes.items()}
        accepted: list[AcceptedProposal] = []
        rejected: list[Rejection] = []
        for index, proposal in enumerate(proposals):
            configuration = getattr(proposal, "configuration", proposal)
            parents = tuple(getattr(proposal, "parent_candidate_ids", ()) or ())
            rationale = getattr(proposal, "rationale", None)
            digest: str | None = None
            duplicate_of: str | None = None
            try:
                config = self.check_configuration(configuration)
                digest = config_hash(config)
                unknown = [p for p in parents if p not in known]
                if unknown:
                    raise _Refused("unknown_parent", f"unknown parent candidate(s) {unknown}")
                if digest in seen:
                    duplicate_of = seen[digest].removeprefix("candidate ")
                    raise _Refused("duplicate", f"same configuration as {seen[digest]}")
                if len(accepted) >= max_candidates:
                    raise _Refused("over_limit", f"the step already has {max_candidates} candidates")
            except _Refused as refused:
                rejected.append(
                    Rejection(
                        step_index=step_index,
                        iteration=iteration,
                        proposed_index=index,
                        reason_code=refused.code,
                        message=refused.message,
                        config_hash=digest,
                        parent_candidate_ids=parents,
                        rationale=rationale,
                        duplicate_of=duplicate_of,
                    )
                )
                continue
            seen[digest] = f"proposal {index} of this step"
            accepted.append(
                AcceptedProposal(
                    proposed_index=index,
                    configuration=config,
                    config_hash=digest,
                    parent_candidate_ids=parents,
                    rationale=rationale,
                )
            )
        return ValidationOutcome(accepted=tuple(accepted), rejected=tuple(rejected))

    # -- one configuration ------------------------------------------------------------------
    def check_configuration(self, configuration: object) -> Configuration:
        """The canonical configuration, or :class:`_Refused` with the first problem found."""
        if not isinstance(configuration, Mapping):
            raise _Refused("invalid_shape", "a configuration is a mapping {sections, model_params}")
        extra = sorted(set(configuration) - {"sections", "model_params"})
        if extra:
            raise _Refused("invalid_shape", f"unknown configuration key(s) {extra}")
        sections = configuration.get("sections") or {}
        params = configuration.get("model_params") or {}
        if not isinstance(sections, Mapping) or not isinstance(params, Mapping):
            raise _Refused("invalid_shape", "sections and model_params must be mappings")
        bodies = self._sections(sections)
        self._params(params)
        missing = [path_str(p) for p in self.treatment.sections if p not in bodies]
        missing += [name for name in self.treatment.model_params if name not in params]
        if missing:
            raise _Refused("invalid_shape", f"treatment value(s) missing: {missing}")
        try:
            return canonical(configuration)
        except ValueError as exc:
            raise _Refused("invalid_value", str(exc)) from None

    def _sections(self, sections: Mapping[object, JSONValue]) -> dict[SectionPath, str]:
        bodies: dict[SectionPath, str] = {}
        for key, body in sections.items():
            try:
                path = parse_path(str(key))
            except OptiflowError:
                raise _Refused("invalid_shape", f"invalid section path {key!r}") from None
            try:
                section = self.prompt.section(path)
            except OptiflowError:
                raise _Refused("unknown_section", f"prompt {self.prompt.id} has no section {key!r}") from None
            if section.frozen:
                raise _Refused("frozen_section", f"section {key!r} is frozen")
            if path not in self.treatment.sections:
                raise _Refused("fixed_factor", f"section {key!r} is a fixed factor (not in the treatment)")
            if not isinstance(body, str):
                raise _Refused("invalid_value", f"section {key!r}: the body must be text")
            if not body.strip():
                raise _Refused("invalid_value", f"section {key!r}: the body is empty")
            if len(body) > self.max_section_chars:
                raise _Refused(
                    "invalid_value",
                    f"section {key!r}: {len(body)} characters, more than {self.max_section_chars}",
                )
            before, after = template_params(section.body), template_params(body)
            if before != after:
                raise _Refused(
                    "invalid_value",
                    f"section {key!r}: placeholders {sorted(after)} differ from the original's "
                    f"{sorted(before)}",
                )
            bodies[path] = body
        return bodies

    def _params(self, params: Mapping[object, JSONValue]) -> None:
        for name, value in params.items():
            domain = self.treatment.model_params.get(str(name))
            if domain is None:
                raise _Refused(
                    "fixed_factor", f"model param {name!r} is a fixed factor (not in the treatment)"
                )
            if value is not None and not isinstance(value, str | int | float | bool):
                raise _Refused("invalid_value", f"model param {name!r}: {value!r} is not a JSON scalar")
            try:
                normalize_value(value)
            except ValueError as exc:
                raise _Refused("invalid_value", f"model param {name!r}: {exc}") from None
            problem = domain.violation(value)
            if problem:
                raise _Refused("invalid_value", f"model param {name!r}: {problem}")


__all__ = ["AcceptedProposal", "CandidateValidator", "ReasonCode", "Rejection", "ValidationOutcome"]
