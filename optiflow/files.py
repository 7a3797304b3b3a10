"""Loading user files: prompts (YAML), datasets (JSONL / YAML / CSV).

Every failure is a :class:`~optiflow.errors.ValidationError` naming the file and the field, raised
before anything is written anywhere.
"""

from __future__ import annotations

import csv
import json
import math
import re
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
MAX_ALIAS_VALUES = 100_000
"""The most values YAML aliases (``*name``) may add to a document when expanded. An alias is a
reference, but everything after parsing (the depth walk, validation, the stored spec) expands it:
a 1 KB "billion laughs" of 9 alias levels cost 53 s of CPU (issue 27)."""

_YAML_LOADER: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser when PyYAML has it (about ten times faster than the pure-Python one)."""
_LONG_BLANK = re.compile(r"(?<![ \t\r\n])[ \t\r\n]{256}")
"""A run of 256 blanks. libyaml clears its whitespace buffers to their capacity at every gap that
follows: one long run makes the rest of the document quadratic (``"a" + " " * 1_000_000 + "\\n" +
". " * 1_000_000`` took 20 s). Such a document is parsed by PyYAML's own (linear) parser."""


def _yaml_loader(text: str) -> type[Any]:
    return yaml.SafeLoader if _LONG_BLANK.search(text) else _YAML_LOADER


def check_document(data: Any, source: str) -> Any:
    """``data`` as parsed (YAML, JSON), walked without recursion: nested at most
    :data:`MAX_DEPTH` deep, every number finite (``1e400`` and ``.inf`` parse to infinity: a
    timeout or a latency of infinity would pin a thread), every string text (a JSON or YAML
    ``"\\ud800"`` escape parses to a lone surrogate, which no UTF-8 hash or database takes).
    ValidationError naming the field."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        where = f"{source}: {path}" if path else source
        if depth > MAX_DEPTH:
            raise ValidationError(f"nested deeper than {MAX_DEPTH} levels", field=source)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValidationError(f"{value} is not a finite number", field=where)
        if isinstance(value, str):
            _check_text(value, where)
        elif isinstance(value, dict):
            for key in value:
                if isinstance(key, str):
                    _check_text(key, where)
            stack.extend(
                (item, f"{path}.{key}" if path else str(key), depth + 1) for key, item in value.items()
            )
        elif isinstance(value, list | tuple):
            stack.extend((item, f"{path}.{i}" if path else str(i), depth + 1) for i, item in enumerate(value))
    return data


def _check_text(text: str, where: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError("a lone surrogate (\\ud800-\\udfff) is not text", field=where) from None


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
    return parse_yaml(read_text(path), str(path))


def parse_yaml(text: str, source: str) -> Any:
    """YAML text as :func:`check_document` allows it; its events are read first, so that a document
    nested deeper than :data:`MAX_DEPTH` or whose aliases expand to more than
    :data:`MAX_ALIAS_VALUES` values is refused before anything is built from it."""
    loader = _yaml_loader(text)
    try:
        _check_events(text, source, loader)
        return check_document(yaml.load(text, Loader=loader), source)  # a safe loader
    except RecursionError:  # PyYAML composes recursively: a few hundred levels exhaust the stack
        raise ValidationError(f"nested deeper than {MAX_DEPTH} levels", field=source) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ValidationError(f"malformed YAML{where}: {problem}", field=source) from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise ValidationError(f"a value YAML cannot read: {str(exc)[:120]}", field=source) from None


def _check_events(text: str, source: str, loader: type[Any]) -> None:
    """Depth and alias expansion from the parser's events, in one pass: a collection's expanded
    size is the count of values between its start and its end, an alias adds its anchor's."""
    sizes: dict[str, int] = {}
    open_: list[tuple[str | None, int]] = []  # each open collection: its anchor, the count at its start
    count = literal = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(open_) >= MAX_DEPTH:
                raise ValidationError(f"nested deeper than {MAX_DEPTH} levels", field=source)
            open_.append((event.anchor, count))
            count, literal = count + 1, literal + 1
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, start = open_.pop()
            if anchor is not None:
                sizes[anchor] = count - start
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor is not None:
                sizes[event.anchor] = 1
            count, literal = count + 1, literal + 1
        elif isinstance(event, yaml.AliasEvent):
            count += sizes.get(event.anchor or "", 1)
            if count - literal > MAX_ALIAS_VALUES:
                raise ValidationError(
                    f"its aliases (*{event.anchor}) expand it by more than {MAX_ALIAS_VALUES:,} values: "
                    "write the repeated part out, or alias less of it",
                    field=source,
                )


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
            except ValueError as exc:  # an integer of more than 4,300 digits
                raise ValidationError(f"line {n}: invalid JSON: {str(exc)[:120]}", field=str(p)) from None
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
    try:
        return _read_csv(p)
    except csv.Error as exc:  # a field over csv.field_size_limit() (128 KB), a NUL in a field ...
        raise ValidationError(
            f"invalid CSV: {exc} (long inputs read better from JSONL)", field=str(p)
        ) from None


def _read_csv(p: Path) -> list[dict[str, Any]]:
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
