"""Admission: what a job must satisfy before anything is written (no row, no key, no file).

:func:`admit` is the one check every submission passes, whatever it came from (a job file, an
HTTP body, Python): :meth:`optiflow.interfaces.client.Client.submit` calls it before it writes.
The document's shape and types were checked when it was parsed (strict ints, bools and floats,
``kind`` required: :mod:`optiflow.jobfile`); this checks what only the whole job can tell, so a job
that would fail on every sample is refused now instead of failing later on a worker:

- a ``python`` check names a function in the allowlist (``OPTIFLOW_PYTHON_CHECKS``);
- a ``regex`` check's pattern (or, without one, every sample's expected value) is one RE2 runs;
- every ``$`` in the prompt is a well-formed placeholder (``${name}`` / ``$name``) or ``$$``;
- every sample provides every parameter the prompt's sections and user message use (as the
  baseline renders them: with the baseline tag's overrides);
- the job is within the size limits (:func:`optiflow.core.limits.check_limits`), and every number
  it sets within its bound (:func:`optiflow.bounds.check_bounds`);
- an optimize job with ``splits: true`` has train, val and test samples (without test samples
  its best could never be confirmed on held-out data).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from string import Template
from typing import TYPE_CHECKING

from optiflow.bounds import check_bounds
from optiflow.checking import canonical, compile_pattern
from optiflow.core.checks import CheckSpec, PythonCheck, RegexCheck, regex_pattern
from optiflow.core.limits import check_limits
from optiflow.core.model import check_params as check_model_params
from optiflow.core.overrides import validate_overrides
from optiflow.core.sections import SectionPath, path_str
from optiflow.errors import OptiflowError, ValidationError

if TYPE_CHECKING:
    from optiflow.core.dataset import Dataset
    from optiflow.core.kinds import AnySpec
    from optiflow.settings import Settings


def admit(spec: AnySpec, settings: Settings) -> None:
    """ValidationError naming the field for the first reason the job cannot run."""
    check_limits(spec, settings.job_limits)
    check_bounds(spec)
    check_printable(spec)
    check_baseline(spec)
    check_splits(spec)
    check_protect(spec)
    check_check(spec.check, spec.dataset, settings.python_checks)
    bodies = {s.path: s.body for s in spec.prompt.sections}
    bodies.update((ov.path, ov.body) for ov in spec.baseline_overrides if ov.path in bodies)
    params = check_templates(bodies, spec.prompt.user)
    check_params(params, spec.dataset)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def check_printable(spec: AnySpec) -> None:
    """A job name and sample ids reach terminals (``optiflow jobs``, reports): no control
    character (an escape sequence can set a window title or clear the screen)."""
    names = [("name", spec.name)]
    names += [(f"dataset: sample {s.id!r}: id", s.id) for s in spec.dataset.samples]
    for field, text in names:
        m = _CONTROL.search(text)
        if m is not None:
            raise ValidationError(f"control character {m.group()!r} is not allowed", field=field)


def check_baseline(spec: AnySpec) -> None:
    """The document's ``baseline_overrides`` name sections of the prompt that are not frozen, made
    against their current bodies; the baseline's effective model (the job's model with
    ``baseline_model_params``, e.g. from the baseline tag's snapshot) is one that can run."""
    descriptor = spec.prompt.descriptor()
    known = {s.path for s in descriptor.sections}
    for i, ov in enumerate(spec.baseline_overrides):
        if ov.path not in known:
            raise ValidationError(
                f"unknown section {path_str(ov.path)!r} (sections: "
                f"{', '.join(path_str(p) for p in sorted(known))})",
                field=f"baseline_overrides.{i}.path",
            )
        try:
            validate_overrides(descriptor, [ov])
        except OptiflowError as exc:
            raise ValidationError(exc.message, field=f"baseline_overrides.{i}", code=exc.code) from None
    if spec.baseline_model_params:
        effective = spec.model.with_params(spec.baseline_model_params)
        try:
            check_model_params(effective.model, effective.params, "baseline_model_params")
        except ValueError as exc:
            raise ValidationError(str(exc), field="baseline_model_params") from None


def check_splits(spec: AnySpec) -> None:
    """``splits: true`` selects on train/val and confirms the best on test: each split needs
    samples (the spec itself refuses no train or no val; this also needs test)."""
    if not getattr(spec, "splits", False):
        return
    counts = {name: len(spec.dataset.split(name).samples) for name in ("train", "val", "test")}
    if not counts["test"]:
        found = ", ".join(f"{name} {n}" for name, n in counts.items())
        raise ValidationError(
            "a job with splits selects on train and val and confirms its best on test, but the "
            f"dataset has {found} (a sample without a split counts as train)",
            field="splits",
        )


def check_protect(spec: AnySpec) -> None:
    """``gate.protect`` names samples of the dataset, by id or by tag (a typo would protect nothing)."""
    gate = getattr(spec, "gate", None)
    protect = getattr(gate, "protect", ()) or ()
    names = {s.id for s in spec.dataset.samples}.union(*(s.tags for s in spec.dataset.samples))
    unknown = [p for p in protect if p not in names]
    if unknown:
        raise ValidationError(
            f"{', '.join(repr(u) for u in unknown[:5])}: neither a sample id nor a tag of the dataset "
            "(protect names samples by id or by tag)",
            field="gate.protect",
        )


def check_check(check: CheckSpec, dataset: Dataset, python_checks: Iterable[str]) -> None:
    if isinstance(check, PythonCheck):
        allowed = {canonical(a) for a in python_checks if a.strip()}
        if canonical(check.function) not in allowed:
            raise ValidationError(
                f"python check function {check.function!r} is not in the allowlist (OPTIFLOW_PYTHON_CHECKS)",
                field="check.function",
            )
    elif isinstance(check, RegexCheck):
        if check.pattern is not None:
            compile_pattern(check.pattern, "check.pattern")
            return
        for sample in dataset:  # no pattern: each sample's expected value is its pattern
            compile_pattern(regex_pattern(check, sample.expected), f"dataset: sample {sample.id!r}: expected")


def check_templates(bodies: Mapping[SectionPath, str], user: str) -> dict[str, str]:
    """Every placeholder name -> where it is first used; ValidationError for a malformed one."""
    used: dict[str, str] = {}
    for where, text in [
        *((f"prompt.sections.{path_str(p)}", b) for p, b in bodies.items()),
        ("prompt.user", user),
    ]:
        for m in Template.pattern.finditer(text):
            if m.group("invalid") is not None:
                at = m.start("invalid")
                line = text.count("\n", 0, at) + 1
                snippet = text[at : at + 12].split("\n", 1)[0]
                raise ValidationError(
                    f"malformed placeholder at line {line}: {snippet!r} (write ${{name}} for a "
                    "parameter, $$ for a dollar sign)",
                    field=where,
                )
            name = m.group("named") or m.group("braced")
            if name is not None:
                used.setdefault(name, where)
    return used


def check_params(used: Mapping[str, str], dataset: Dataset) -> None:
    """Every sample provides every used parameter: a mapping input its keys, any other input
    only ``input``."""
    if not used:
        return
    lacking = []
    for sample in dataset:
        given = {str(k) for k in sample.input} if isinstance(sample.input, Mapping) else {"input"}
        missing = sorted(set(used) - given)
        if missing:
            lacking.append((sample.id, missing))
    if lacking:
        sample_id, missing = lacking[0]
        more = f" (and {len(lacking) - 1} more sample(s))" if len(lacking) > 1 else ""
        names = ", ".join(f"{m!r} (used in {used[m]})" for m in missing)
        raise ValidationError(
            f"sample {sample_id!r} does not provide prompt parameter(s) {names}{more}", field="dataset"
        )


__all__ = [
    "admit",
    "check_baseline",
    "check_check",
    "check_params",
    "check_printable",
    "check_protect",
    "check_splits",
    "check_templates",
]
