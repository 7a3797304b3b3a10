"""Job documents -> a self-contained spec of their ``kind`` (compress, optimize, measure).

A job document is a mapping: ``kind`` (required: compress, optimize or measure), ``name``,
``prompt``, ``dataset``, ``check``, ``model`` and the kind's options. It comes from a YAML file
(:func:`load_job`) or from an HTTP body (:func:`load_job_data`); both go through the same
validation, so a field is refused the same way wherever it comes from. Everything is validated
before anything is written.

``prompt`` is an inline prompt mapping, or ``NS/KEY`` of a prompt pushed to the store, or (only in
a file, relative to it) a prompt file. ``dataset`` is an inline list of samples or (only in a
file) a dataset file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optiflow.core.compress.spec import CompressSpec
from optiflow.core.kinds import KINDS
from optiflow.core.measure.spec import MeasureSpec
from optiflow.core.optimize.spec import OptimizeSpec
from optiflow.errors import ValidationError
from optiflow.files import (
    check_document,
    dataset_from_rows,
    load_dataset,
    load_prompt,
    parse_model,
    read_yaml,
)

if TYPE_CHECKING:
    from optiflow.stores.base import OverridesStore

SPECS: dict[str, type[CompressSpec | OptimizeSpec | MeasureSpec]] = {
    "compress": CompressSpec,
    "optimize": OptimizeSpec,
    "measure": MeasureSpec,
}
REQUIRED = ("prompt", "dataset", "check", "model")
FILE_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl", ".csv")


def load_job(
    path: str | Path, *, store: OverridesStore | None = None, overrides: Mapping[str, Any] | None = None
) -> CompressSpec | OptimizeSpec | MeasureSpec:
    """A job file: its ``prompt`` and ``dataset`` may be files next to it; ``name`` defaults to
    the file's stem (or its directory's name for a ``job.yaml``)."""
    p = Path(path)
    data = read_yaml(p)
    if not isinstance(data, dict):
        raise ValidationError("expected a mapping (kind, prompt, dataset, check, model, ...)", field=str(p))
    data = {**data, **(overrides or {})}
    data.setdefault("name", p.stem if p.stem != "job" else p.parent.name)
    return load_job_data(data, source=str(p), store=store, base_dir=p.parent)


def load_job_data(
    data: Mapping[str, Any],
    *,
    source: str,
    store: OverridesStore | None = None,
    base_dir: Path | None = None,
) -> CompressSpec | OptimizeSpec | MeasureSpec:
    """A job document already parsed (YAML file, JSON body). Errors name ``source: field``.

    Without ``base_dir`` no file is read: ``prompt`` must be inline or ``NS/KEY`` (with a
    ``store``) and ``dataset`` an inline list, which is what an HTTP body may carry."""
    job = dict(check_document(data, source))
    if "kind" not in job:  # stored specs written before this rule still read as compress (parse_spec)
        raise ValidationError(f"required: one of {', '.join(KINDS)}", field=f"{source}: kind")
    kind = job["kind"]
    if kind not in KINDS:
        raise ValidationError(
            f"unknown job kind {kind!r} (known: {', '.join(KINDS)})", field=f"{source}: kind"
        )
    for name in REQUIRED:
        if name not in job:
            raise ValidationError("required", field=f"{source}: {name}")
    job["prompt"] = _prompt(job["prompt"], source, store, base_dir)
    job["dataset"] = _dataset(job["dataset"], source, base_dir)
    if kind == "compress":
        job.setdefault("strategy", {"type": "llm", "model": job["model"]})
    return parse_model(SPECS[kind], job, source)


def _prompt(value: Any, source: str, store: OverridesStore | None, base_dir: Path | None) -> Any:
    """A prompt file (only with ``base_dir``) or ``NS/KEY`` -> the prompt; a mapping is left to
    the spec's validation."""
    if not isinstance(value, str):
        return value
    if base_dir is not None:
        candidate = base_dir / value
        if candidate.suffix in (".yaml", ".yml") or candidate.exists():
            return load_prompt(candidate)
    elif value.lower().endswith(FILE_SUFFIXES) or value.count("/") != 1:
        raise ValidationError(
            f"{value!r}: no file paths here; give the prompt inline or NS/KEY of a stored prompt",
            field=f"{source}: prompt",
        )
    ns, sep, key = value.partition("/")
    if not sep or store is None:
        raise ValidationError(f"{value!r} is neither a prompt file nor NS/KEY", field=f"{source}: prompt")
    return store.get_prompt(ns, key)


def _dataset(value: Any, source: str, base_dir: Path | None) -> Any:
    """A dataset file (only with ``base_dir``) or an inline list of samples -> the dataset; any
    other value is left to the spec's validation."""
    if isinstance(value, list):
        return dataset_from_rows(value, name="dataset", source=f"{source}: dataset")
    if not isinstance(value, str):
        return value
    if base_dir is None:
        raise ValidationError(
            f"{value!r}: no file paths here; give the samples inline as a list",
            field=f"{source}: dataset",
        )
    return load_dataset(base_dir / value)
