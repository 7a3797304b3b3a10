"""Property-based fuzzing of job documents, prompts and datasets (issue 12).

Property: a document is either refused with an optiflow error code and nothing written (no job
row, no file under the home, no Redis key), or accepted and run to a terminal state by the
embedded worker. Documents are mostly well-formed, with one or a few fields broken in the ways
users and attackers break them: wrong types, missing fields, malformed placeholders, parameters no
sample provides, patterns RE2 refuses or that backtrack for ever, checks outside the allowlist,
duplicate or odd ids. Few, small examples (about half a minute); derandomized under CI=true.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from optiflow.errors import OptiflowError
from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job_data
from optiflow.settings import Settings
from tests.support.workers import embedded_settings

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
EXAMPLES = int(os.environ.get("OPTIFLOW_FUZZ_EXAMPLES", "25"))
ALLOWED = "tests.security.check_functions:fine"
TERMINAL = ("completed", "failed", "cancelled")

# -- strategies: a well-formed document, then a few of the ways documents get broken ------------
RULES = [
    "When a customer asks about refunds, reply with code RFD-201.",
    "When a customer asks about shipping delays, reply with code SHP-404.",
    "When a user asks about passwords, answer with code ACC-7.",
]
FILLER = ["Be polite and brief.", "Refunds over $$50 need approval.", "Thank ${customer} for writing."]
QUESTIONS = {
    "RFD-201": "How do refunds work?",
    "SHP-404": "My parcel has shipping delays.",
    "ACC-7": "I forgot my passwords",
}
text = st.text(max_size=12)
bodies = st.lists(st.sampled_from(RULES + FILLER) | text, min_size=1, max_size=4).map(" ".join)
sections = st.lists(bodies, min_size=1, max_size=3).map(
    lambda bs: [{"path": f"s{i}", "body": b, "frozen": i == 0 and len(bs) > 1} for i, b in enumerate(bs)]
)
samples = st.lists(
    st.tuples(st.sampled_from(sorted(QUESTIONS)), st.sampled_from(["Ann", "Bo"]), text),
    min_size=1,
    max_size=4,
).map(
    lambda rows: [
        {"id": f"q{i}", "input": {"question": QUESTIONS[label] + extra, "customer": who}, "expected": label}
        for i, (label, who, extra) in enumerate(rows)
    ]
)
checks = st.sampled_from(
    [
        {"type": "contains"},
        {"type": "exact"},
        {"type": "regex", "pattern": "[A-Z]{3}-\\d+"},
        {"type": "regex", "pattern": "^([A-Za-z ]+)+$"},  # catastrophic on a backtracking engine
        {"type": "regex"},  # each sample's expected value is its pattern
        {"type": "json_field", "field": "code"},
        {"type": "numeric", "tolerance": 0.5},
        {"type": "python", "function": ALLOWED},
    ]
)
models = st.fixed_dictionaries(
    {"model": st.just("optiflow/sim")},
    optional={
        "params": st.fixed_dictionaries(
            {},
            optional={
                "sim_noise": st.sampled_from([0.0, 0.3]),
                "sim_style": st.sampled_from(["sentence", "label", "json"]),
                "sim_error_rate": st.sampled_from([0.0, 0.2]),
            },
        ),
        "retries": st.integers(0, 2),
    },
)


@st.composite
def well_formed(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["compress", "measure"]))
    doc: dict[str, Any] = {
        "kind": kind,
        "name": "fuzz",
        "prompt": {"ns": "fuzz", "key": "bot", "sections": draw(sections), "user": "${question}"},
        "dataset": draw(samples),
        "check": draw(checks),
        "model": draw(models),
    }
    if kind == "measure":
        doc["runs"] = draw(st.integers(1, 2))
    else:
        doc.update(
            eval_runs=draw(st.integers(1, 2)),
            fail_fast=draw(st.booleans()),
            min_section_tokens=draw(st.sampled_from([0, 5, 40])),
        )
    return doc


def _set(path: tuple[Any, ...], value: Any) -> Any:
    def change(doc: dict[str, Any]) -> dict[str, Any]:
        target: Any = doc
        for part in path[:-1]:
            target = target[part]
        if value is _DROP:
            target.pop(path[-1], None)
        else:
            target[path[-1]] = value
        return doc

    return change


_DROP = object()
BREAKS = {
    "no kind": _set(("kind",), _DROP),
    "unknown kind": _set(("kind",), "bogus"),
    "no check": _set(("check",), _DROP),
    "runs as a bool": lambda d: {**d, ("runs" if d.get("kind") == "measure" else "eval_runs"): True},
    "runs as text": lambda d: {**d, ("runs" if d.get("kind") == "measure" else "eval_runs"): "2"},
    "zero runs": lambda d: {**d, ("runs" if d.get("kind") == "measure" else "eval_runs"): 0},
    "a broken placeholder": lambda d: _body(d, " Sign as ${agent"),
    "a lone dollar": lambda d: _body(d, " Costs $ 5."),
    "a parameter no sample has": lambda d: _body(d, " Reply in ${language}."),
    "an unsupported pattern": _set(("check",), {"type": "regex", "pattern": "(?<=code )[A-Z]+"}),
    "an invalid pattern": _set(("check",), {"type": "regex", "pattern": "("}),
    "a function outside the allowlist": _set(("check",), {"type": "python", "function": "os.system"}),
    "an empty model": _set(("model", "model"), ""),
    "a timeout as text": _set(("model", "timeout"), "30"),
    "duplicate sample ids": lambda d: {**d, "dataset": [*d["dataset"], d["dataset"][0]]},
    "no samples": _set(("dataset",), []),
    "a bad section path": lambda d: _section(d, "path", "a b/"),
    "duplicate section paths": lambda d: _section(d, "path", d["prompt"]["sections"][-1]["path"]),
    "frozen as text": lambda d: _section(d, "frozen", "yes"),
    "an unknown field": lambda d: {**d, "surprise": 1},
    "a sample id as a list": lambda d: _sample(d, "id", [1]),
    "an odd input": lambda d: _sample(d, "input", draw_free_input()),
    "a bad split": lambda d: _sample(d, "split", "bogus"),
}


def draw_free_input() -> Any:
    return ["not", "a", "mapping"]


def _body(doc: dict[str, Any], extra: str) -> dict[str, Any]:
    doc["prompt"]["sections"][-1]["body"] += extra
    return doc


def _section(doc: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    doc["prompt"]["sections"][0][key] = value
    return doc


def _sample(doc: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    doc["dataset"][0][key] = value
    return doc


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    """Well-formed a quarter of the time; else broken in one or two ways."""
    doc = draw(well_formed())
    breaks = draw(st.sampled_from([0, 1, 1, 2]))
    for name in draw(st.lists(st.sampled_from(sorted(BREAKS)), min_size=breaks, max_size=breaks)):
        doc = BREAKS[name](doc)
    return doc


# -- the system under test ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    home = tmp_path_factory.mktemp("fuzz-home")
    with Client(embedded_settings(home).model_copy(update={"python_checks": [ALLOWED]})) as c:
        yield c


@pytest.fixture(scope="module")
def distributed(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Client, str]]:
    """The same refusals on a distributed client (no worker: a refused document never reaches one),
    to see that no Redis key is written either."""
    prefix = f"optiflow-fuzz-{uuid.uuid4().hex[:8]}"
    home = tmp_path_factory.mktemp("fuzz-distributed")
    s = Settings(
        redis_url=redis_url,
        key_prefix=prefix,
        home=home,
        database_url=f"sqlite:///{home / 'jobs.db'}",
        python_checks=[ALLOWED],
    )
    with Client(s, embedded=False) as c:
        yield c, prefix
    r = redis.Redis.from_url(redis_url)
    keys = list(r.scan_iter(match=f"{prefix}*"))
    if keys:
        r.delete(*keys)


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} if root.exists() else set()


def submit(client: Client, doc: dict[str, Any]) -> str:
    return client.submit(load_job_data(doc, source="fuzz", store=client.runtime.store)).id


@pytest.mark.redis
@pytest.mark.timeout(300)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=IN_CI,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(doc=documents())
def test_a_document_is_refused_with_nothing_written_or_runs_to_the_end(
    doc: dict[str, Any], client: Client, distributed: tuple[Client, str]
) -> None:
    home = client.settings.home
    rows = len(client.runtime.jobs.list(limit=10_000))
    files = files_under(home)
    try:
        job_id = submit(client, doc)
    except OptiflowError as exc:
        event(f"refused: {exc.code} {str(exc.field).removeprefix('fuzz: ').split('.')[0]}")
        assert exc.code and exc.field, exc
        assert files_under(home) == files, f"refused ({exc}) but files changed"
        assert len(client.runtime.jobs.list(limit=10_000)) == rows, f"refused ({exc}) but a row was written"
        remote, prefix = distributed
        with pytest.raises(OptiflowError) as again:
            submit(remote, doc)
        assert again.value.code == exc.code
        assert remote.runtime.jobs.list(limit=10_000) == []
        assert list(remote.runtime.redis.scan_iter(match=f"{prefix}*")) == []
        return
    result = client.job(job_id).wait(timeout=120)
    event(f"accepted: {result.status}")
    assert result.status in TERMINAL
    assert client.runtime.jobs.get(job_id).status in TERMINAL
