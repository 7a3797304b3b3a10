"""Loading user files: prompts (YAML), datasets (JSONL / YAML / CSV).

Every failure is a :class:`~optiflow.errors.ValidationError` naming the file and the field, raised
before anything is written anywhere.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any, TypeVar

import pydantic
import yaml

from optiflow.core.dataset import Dataset, Sample
from optiflow.core.prompt import Prompt
from optiflow.errors import ValidationError

M = TypeVar("M", bound=pydantic.BaseModel)

MAX_DEPTH = 64
"""The deepest nesting of any document optiflow reads (a job, a prompt, a dataset, the model
limits, an HTTP body): the deepest real one is about 8. One limit for every path."""


def check_document(data: Any, source: str) -> Any:
    """``data`` as parsed (YAML, JSON), walked without recursion: nested at most
    :data:`MAX_DEPTH` deep, and every number finite (``1e400`` and ``.inf`` parse to infinity: a
    timeout or a latency of infinity would pin a thread). ValidationError naming the field."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValidationError(f"nested deeper than {MAX_DEPTH} levels", field=source)
        if isinstance(value, float) and not math.isfinite(value):
            where = f"{source}: {path}" if path else source
            raise ValidationError(f"{value} is not a finite number", field=where)
        if isinstance(value, dict):
            stack.extend(
                (item, f"{path}.{key}" if path else str(key), depth + 1) for key, item in value.items()
            )
        elif isinstance(value, list | tuple):
            stack.extend((item, f"{path}.{i}" if path else str(i), depth + 1) for i, item in enumerate(value))
    return data


def parse_json(text: str | bytes, source: str) -> Any:
    """JSON text as :func:`check_document` allows it (no NaN, no infinity, at most MAX_DEPTH deep)."""

    def no_constant(name: str) -> Any:
        raise ValidationError(f"not JSON: {name} is not a number JSON allows", field=source)

    try:
        data = json.loads(text, parse_constant=no_constant)
    except RecursionError:
        raise ValidationError(f"nested deeper than {MAX_DEPTH} levels", field=source) from None
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, or an int of > 4300 digits
        raise ValidationError(f"invalid JSON: {exc}", field=source) from None
    return check_document(data, source)


def read_yaml(path: Path) -> Any:
    text = read_text(path)
    try:
        return check_document(yaml.safe_load(text), str(path))
    except RecursionError:  # PyYAML composes recursively: a few hundred levels exhaust the stack
        raise ValidationError(f"nested deeper than {MAX_DEPTH} levels", field=str(path)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ValidationError(f"malformed YAML{where}: {problem}", field=str(path)) from None


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")  # a byte-order mark (Excel's "CSV UTF-8") is dropped
    except FileNotFoundError:
        raise ValidationError("file not found", field=str(path)) from None
    except IsADirectoryError:
        raise ValidationError("is a directory, expected a file", field=str(path)) from None
    except UnicodeDecodeError:
        raise ValidationError("not UTF-8 text", field=str(path)) from None
    except OSError as exc:
        raise ValidationError(f"cannot read: {exc.strerror}", field=str(path)) from None


def pydantic_error(exc: pydantic.ValidationError, source: str) -> ValidationError:
    """The first pydantic error as one line naming the field: ``source: sections.2.body: ...``."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    field = f"{source}: {loc}" if loc else source
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return ValidationError(f"{msg}{more}", field=field)


def parse_model(model: type[M], data: Any, source: str) -> M:
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        raise pydantic_error(exc, source) from None


def load_prompt(path: str | Path) -> Prompt:
    """A prompt from YAML: ``ns``, ``key``, ``sections: [{path, body, title?, frozen?}]``, ``user``."""
    p = Path(path)
    data = read_yaml(p)
    if not isinstance(data, dict):
        raise ValidationError("expected a mapping with ns, key and sections", field=str(p))
    return parse_model(Prompt, data, str(p))


def load_dataset(path: str | Path, *, name: str | None = None) -> Dataset:
    """A dataset from ``.jsonl``, ``.yaml``/``.yml`` (a list, or ``{samples: [...]}``) or ``.csv``.

    CSV columns: ``id``, ``input``, ``expected``, optional ``tags`` (``;``-separated) and ``split``;
    other columns become entries of a mapping input when there is no ``input`` column.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    rows: list[Any]
    if suffix == ".jsonl":
        rows = []
        for n, line in enumerate(read_text(p).splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rows.append(check_document(json.loads(line), f"{p}: line {n}"))
            except RecursionError:
                raise ValidationError(
                    f"line {n}: nested deeper than {MAX_DEPTH} levels", field=str(p)
                ) from None
            except json.JSONDecodeError as exc:
                raise ValidationError(f"line {n}: invalid JSON: {exc.msg}", field=str(p)) from None
    elif suffix in (".yaml", ".yml"):
        data = read_yaml(p)
        if isinstance(data, dict):
            data = data.get("samples")
        if not isinstance(data, list):
            raise ValidationError("expected a list of samples (or a mapping with 'samples')", field=str(p))
        rows = data
    elif suffix == ".csv":
        rows = _csv_rows(p)
    else:
        raise ValidationError(
            f"unknown dataset format {suffix or '(none)'!r}: use .jsonl, .yaml or .csv", field=str(p)
        )
    return dataset_from_rows(rows, name=name or p.stem, source=str(p))


def dataset_from_rows(rows: list[Any], *, name: str, source: str) -> Dataset:
    if not rows:
        raise ValidationError("dataset has no samples", field=source)
    samples: list[Sample] = []
    seen: dict[str, int] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ValidationError(f"sample {i}: expected a mapping", field=source)
        data = dict(row)
        if data.get("id") is not None:
            data["id"] = str(data["id"])
        sample = parse_model(Sample, data, f"{source}: sample {i}")
        if sample.id in seen:
            raise ValidationError(
                f"duplicate sample id {sample.id!r} (samples {seen[sample.id]} and {i})", field=source
            )
        seen[sample.id] = i
        samples.append(sample)
    return Dataset(name=name, samples=tuple(samples))


def _csv_rows(p: Path) -> list[dict[str, Any]]:
    reader = csv.DictReader(read_text(p).splitlines())
    if not reader.fieldnames or "id" not in reader.fieldnames:
        raise ValidationError("CSV needs a header row with an 'id' column", field=str(p))
    known = {"id", "input", "expected", "tags", "split"}
    rows: list[dict[str, Any]] = []
    for rec in reader:
        row: dict[str, Any] = {"id": rec["id"]}
        extra = {k: v for k, v in rec.items() if k not in known and k is not None}
        row["input"] = rec.get("input", extra)
        if rec.get("expected") not in (None, ""):
            row["expected"] = rec["expected"]
        if rec.get("tags"):
            row["tags"] = [t for t in rec["tags"].split(";") if t]
        if rec.get("split"):
            row["split"] = rec["split"]
        rows.append(row)
    return rows
