"""Job files (YAML) -> a self-contained spec of their ``kind`` (compress, optimize, measure).

``prompt`` and ``dataset`` are paths relative to the job file; ``prompt`` may instead be
``NS/KEY`` of a prompt pushed to the store. Everything is validated before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optiflow.core.compress import CompressSpec
from optiflow.core.jobs import KINDS
from optiflow.core.measure import MeasureSpec
from optiflow.core.optimize.spec import OptimizeSpec
from optiflow.errors import ValidationError
from optiflow.files import load_dataset, load_prompt, parse_model, read_yaml

if TYPE_CHECKING:
    from optiflow.stores.base import OverridesStore

SPECS: dict[str, type[CompressSpec | OptimizeSpec | MeasureSpec]] = {
    "compress": CompressSpec,
    "optimize": OptimizeSpec,
    "measure": MeasureSpec,
}


def load_job(
    path: str | Path, *, store: OverridesStore | None = None, overrides: Mapping[str, Any] | None = None
) -> CompressSpec | OptimizeSpec | MeasureSpec:
    p = Path(path)
    data = read_yaml(p)
    if not isinstance(data, dict):
        raise ValidationError("expected a mapping (kind, prompt, dataset, check, model, ...)", field=str(p))
    data = {**data, **(overrides or {})}
    kind = data.get("kind", "compress")
    if kind not in KINDS:
        raise ValidationError(f"unknown job kind {kind!r} (known: {', '.join(KINDS)})", field=f"{p}: kind")
    for name in ("prompt", "dataset", "check", "model"):
        if name not in data:
            raise ValidationError("required", field=f"{p}: {name}")
    data["prompt"] = _prompt(data["prompt"], p, store)
    if isinstance(data["dataset"], str):
        data["dataset"] = load_dataset(p.parent / data["dataset"])
    data.setdefault("name", p.stem if p.stem != "job" else p.parent.name)
    if kind == "compress":
        data.setdefault("strategy", {"type": "llm", "model": data["model"]})
    return parse_model(SPECS[kind], data, str(p))


def _prompt(value: Any, job_path: Path, store: OverridesStore | None) -> Any:
    if not isinstance(value, str):
        return value
    candidate = job_path.parent / value
    if candidate.suffix in (".yaml", ".yml") or candidate.exists():
        return load_prompt(candidate)
    ns, sep, key = value.partition("/")
    if not sep or store is None:
        raise ValidationError(f"{value!r} is neither a prompt file nor NS/KEY", field=f"{job_path}: prompt")
    return store.get_prompt(ns, key)
