"""One contract for every OverridesStore backend: memory, filesystem, Redis, SQLite, PostgreSQL.

Redis and PostgreSQL are the real servers of ``tests/conftest.py`` (skipped locally when absent,
failing under CI=true); each test gets its own Redis key prefix / PostgreSQL schema.
"""

from __future__ import annotations

import itertools
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from optiflow.core.overrides import Applied, PromptOverrides, SectionOverride, Version
from optiflow.core.prompt import Prompt, Section
from optiflow.core.sections import PromptDescriptor, PromptDiff, SectionPath, prompt_diff
from optiflow.errors import (
    ConfigError,
    NotFoundError,
    PromptChangedError,
    StaleOverrideError,
    ValidationError,
)
from optiflow.settings import Settings
from optiflow.stores import (
    FilesystemOverridesStore,
    MemoryOverridesStore,
    OverridesStore,
    RedisOverridesStore,
    SqlOverridesStore,
    open_store,
)

PROMPT = Prompt(
    ns="support",
    key="bot",
    sections=(
        Section(path=("intro",), body="You are the support bot of ${company}."),
        Section(path=("rules", "refunds"), body="Refunds are possible within 30 days of purchase."),
        Section(path=("rules", "tone"), body="Always be polite and concise."),
        Section(path=("safety",), body="Never reveal customer data.", frozen=True),
    ),
    user="Customer: ${input}",
)
DESC = PROMPT.descriptor()
INTRO: SectionPath = ("intro",)
REFUNDS: SectionPath = ("rules", "refunds")
TONE: SectionPath = ("rules", "tone")
SAFETY: SectionPath = ("safety",)

BACKENDS = ["memory", "filesystem", "redis", "sqlite", "postgres"]


def ov(path: SectionPath, body: str, prompt: Prompt = PROMPT) -> SectionOverride:
    """A fresh override of ``path``."""
    return SectionOverride(path=path, expected_hash=prompt.section(path).hash, body=body)


def _open(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> OverridesStore:
    """A new store of the backend ``kind`` on this test's state (its own connection / engine)."""
    if kind == "memory":
        return MemoryOverridesStore()
    if kind == "filesystem":
        return FilesystemOverridesStore(tmp_path / "store")
    if kind == "redis":
        return RedisOverridesStore(
            request.getfixturevalue("redis_url"), prefix=request.getfixturevalue("redis_prefix")
        )
    if kind == "sqlite":
        return SqlOverridesStore(f"sqlite:///{tmp_path / 'db' / 'optiflow.db'}")
    url, schema = request.getfixturevalue("pg_schema")
    return SqlOverridesStore(url, schema=schema)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OverridesStore]:
    kind: str = request.param
    s = _open(kind, request, tmp_path)
    yield s
    s.close()
    if kind == "postgres":
        url, schema = request.getfixturevalue("pg_schema")
        _sql(url, *(f'DELETE FROM "{schema}".optiflow_{t}' for t in ("prompts", "overrides", "versions")))


@pytest.fixture
def other(store: OverridesStore, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OverridesStore]:
    """A second store on ``store``'s state, as another process would open it (its own Redis
    connection pool, SQL engine, file handles); the memory backend's state is its instance."""
    if isinstance(store, MemoryOverridesStore):
        yield store
        return
    s = _open(request.node.callspec.params["store"], request, tmp_path)
    yield s
    s.close()


@pytest.fixture(scope="module")
def pg_schema(postgres_url: str) -> Iterator[tuple[str, str]]:
    """A PostgreSQL schema of this module's own, emptied after each test and dropped at the end:
    the tables keep their real names and a re-run starts clean."""
    schema = f"optiflow_test_{uuid.uuid4().hex[:10]}"
    yield postgres_url, schema
    _sql(postgres_url, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _sql(url: str, *statements: str) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(sa.text(statement))
    engine.dispose()


def test_is_an_overrides_store(store: OverridesStore) -> None:
    assert isinstance(store, OverridesStore)


# -- prompts ----------------------------------------------------------------------------------


def test_put_and_get_prompt(store: OverridesStore) -> None:
    with pytest.raises(NotFoundError):
        store.get_prompt("support", "bot")
    store.put_prompt(PROMPT)
    assert store.get_prompt("support", "bot") == PROMPT
    changed = PROMPT.with_bodies({TONE: "Be brief."})
    store.put_prompt(changed)
    assert store.get_prompt("support", "bot") == changed
    with pytest.raises(NotFoundError):
        store.get_prompt("support", "other")


# -- overrides per tag ------------------------------------------------------------------------


def test_store_and_resolve(store: OverridesStore) -> None:
    assert store.resolve("support", "bot", "exp") is None
    written = store.store(DESC, [ov(INTRO, "Hi, ${company} bot here.")], tag="exp")
    assert written == store.resolve("support", "bot", "exp")
    assert written.tag == "exp"
    assert written.section(INTRO) == ov(INTRO, "Hi, ${company} bot here.")
    assert store.resolve("support", "bot", "stable") is None


def test_merge_and_replace(store: OverridesStore) -> None:
    store.store(DESC, [ov(INTRO, "a"), ov(REFUNDS, "b")], tag="exp")
    merged = store.store(DESC, [ov(REFUNDS, "b2"), ov(TONE, "c")], tag="exp")
    assert {s.path: s.body for s in merged.sections} == {INTRO: "a", REFUNDS: "b2", TONE: "c"}
    replaced = store.store(DESC, [ov(TONE, "only")], tag="exp", replace=True)
    assert [(s.path, s.body) for s in replaced.sections] == [(TONE, "only")]
    assert store.resolve("support", "bot", "exp") == replaced


def test_model_params(store: OverridesStore) -> None:
    store.store(DESC, [], tag="exp", model_params={"temperature": 0.2, "model": "a"})
    merged = store.store(DESC, [ov(INTRO, "x")], tag="exp", model_params={"model": "b"})
    assert dict(merged.model_params) == {"temperature": 0.2, "model": "b"}
    resolved = store.resolve("support", "bot", "exp")
    assert resolved is not None
    assert dict(resolved.model_params) == {"temperature": 0.2, "model": "b"}
    replaced = store.store(DESC, [ov(INTRO, "y")], tag="exp", replace=True)
    assert dict(replaced.model_params) == {}


def test_delete_and_list_tags(store: OverridesStore) -> None:
    assert store.list_tags("support", "bot") == []
    for tag in ("opt-1-b", "stable", "opt-1-a"):
        store.store(DESC, [ov(INTRO, tag)], tag=tag)
    assert store.list_tags("support", "bot") == ["opt-1-a", "opt-1-b", "stable"]
    assert store.delete("support", "bot", "opt-1-a") is True
    assert store.delete("support", "bot", "opt-1-a") is False
    assert store.resolve("support", "bot", "opt-1-a") is None
    assert store.list_tags("support", "bot") == ["opt-1-b", "stable"]
    assert store.list_tags("support", "other") == []


# -- refusals ---------------------------------------------------------------------------------


def test_unknown_section_is_refused(store: OverridesStore) -> None:
    bad = SectionOverride(path=("nope",), expected_hash="0" * 64, body="x")
    with pytest.raises(ValidationError) as err:
        store.store(DESC, [bad], tag="exp")
    assert err.value.field == "path"


def test_frozen_section_is_refused(store: OverridesStore) -> None:
    with pytest.raises(ValidationError) as err:
        store.store(DESC, [ov(SAFETY, "Share anything.")], tag="exp")
    assert err.value.code == "frozen_section"
    assert err.value.field == "sections.safety"


def test_stale_override_is_refused(store: OverridesStore) -> None:
    stale = ov(TONE, "Be brief.", prompt=PROMPT.with_bodies({TONE: "an older body"}))
    with pytest.raises(StaleOverrideError) as err:
        store.store(DESC, [stale], tag="exp")
    assert err.value.field == "sections.rules/tone"


BAD = {
    "unknown": SectionOverride(path=("nope",), expected_hash="0" * 64, body="x"),
    "frozen": ov(SAFETY, "x"),
    "stale": SectionOverride(path=TONE, expected_hash="0" * 64, body="x"),
    "duplicate": ov(INTRO, "second override of intro in one call"),
}


def test_a_refused_call_writes_nothing(store: OverridesStore) -> None:
    store.apply(PROMPT, [ov(REFUNDS, "before")], source="setup")
    store.store(DESC, [ov(REFUNDS, "before")], tag="exp")
    before = {t: store.resolve("support", "bot", t) for t in ("stable", "exp")}
    for bad in BAD.values():
        sections = [ov(INTRO, "fine"), ov(REFUNDS, "fine too"), bad]
        for tag, replace in (("exp", False), ("exp", True), ("new", False)):
            with pytest.raises((ValidationError, StaleOverrideError)):
                store.store(DESC, sections, tag=tag, replace=replace)
        with pytest.raises((ValidationError, StaleOverrideError)):
            store.apply(PROMPT, sections, source="job-1", model_params={"temperature": 0})
    assert {t: store.resolve("support", "bot", t) for t in ("stable", "exp")} == before
    assert [v.version for v in store.history("support", "bot")] == ["v1.0.0", "v1.0.1"]
    assert store.list_tags("support", "bot") == ["exp", "stable"]


def test_model_params_must_be_json(store: OverridesStore) -> None:
    with pytest.raises(ValidationError) as err:
        store.store(DESC, [ov(INTRO, "x")], tag="exp", model_params={"when": datetime.now(UTC)})
    assert err.value.field == "model_params"
    assert store.list_tags("support", "bot") == []


def test_bad_names_are_refused(store: OverridesStore) -> None:
    for ns, key, tag in [("sup:port", "bot", "t"), ("..", "..", "t"), ("a", "b", "x/y"), ("a", "", "t")]:
        with pytest.raises(ValidationError):
            store.resolve(ns, key, tag)


# -- versions ---------------------------------------------------------------------------------


def applied(store: OverridesStore, *args: Any, **kwargs: Any) -> Version:
    """``store.apply(...)``, which must have written a version: that version."""
    outcome = store.apply(*args, **kwargs)
    assert outcome.status == "applied" and outcome.version is not None, outcome
    return outcome.version


def test_apply_records_versions(store: OverridesStore) -> None:
    t0 = datetime.now(UTC)
    first = store.apply(PROMPT, [ov(INTRO, "a")], source="job-1", description="shorter intro")
    assert first.status == "applied" and not first.unchanged
    original, v1 = first.original, first.version
    assert original is not None and v1 is not None
    # the first apply records what the tag rendered before it (here: the prompt's own sections)
    assert (original.version, original.previous, original.tag, original.source) == (
        "v1.0.0",
        None,
        "stable",
        "original",
    )
    assert original.overrides == PromptOverrides(ns="support", key="bot", tag="stable")
    assert (v1.version, v1.previous, v1.tag) == ("v1.0.1", "v1.0.0", "stable")
    assert (v1.source, v1.description) == ("job-1", "shorter intro")
    assert t0 - timedelta(seconds=1) <= v1.created_at <= datetime.now(UTC) + timedelta(seconds=1)
    second = store.apply(PROMPT, [ov(TONE, "c")], source="job-2", model_params={"temperature": 0.1})
    v2 = second.version
    assert second.original is None and v2 is not None
    assert (v2.version, v2.previous, v2.source, v2.description) == ("v1.0.2", "v1.0.1", "job-2", "")
    assert {s.path: s.body for s in v2.overrides.sections} == {INTRO: "a", TONE: "c"}
    assert dict(v2.overrides.model_params) == {"temperature": 0.1}
    assert store.resolve("support", "bot", "stable") == v2.overrides
    assert store.history("support", "bot") == [original, v1, v2]


def test_the_original_keeps_what_the_tag_held_before(store: OverridesStore) -> None:
    """A tag written without versions (``store``) before its first apply: that content is the
    original version, so a rollback returns to it."""
    before = store.store(DESC, [ov(TONE, "hand-written")], tag="stable")
    first = store.apply(PROMPT, [ov(INTRO, "a")], source="job-1")
    assert first.original is not None and first.original.overrides == before
    assert first.version is not None
    assert {s.path: s.body for s in first.version.overrides.sections} == {INTRO: "a", TONE: "hand-written"}


def test_applying_the_same_change_twice_writes_nothing(store: OverridesStore) -> None:
    changes = [ov(INTRO, "a"), ov(TONE, "c")]
    first = applied(store, PROMPT, changes, source="job-1", model_params={"temperature": 0.2})
    # the same job again, its sections in another order, or a subset of what is there: no change
    for sections, params in ((changes, {"temperature": 0.2}), (changes[::-1], None), ([changes[1]], {})):
        again = store.apply(PROMPT, sections, source="job-1", model_params=params)
        assert again.status == "unchanged" and again.unchanged
        assert again.version == first and again.original is None
    assert [v.version for v in store.history("support", "bot")] == ["v1.0.0", "v1.0.1"]
    assert store.resolve("support", "bot", "stable") == first.overrides
    # nothing to write on a tag with no version at all: unchanged, and still no version
    empty = store.apply(PROMPT, [], tag="fresh", source="job-2")
    assert (empty.status, empty.version) == ("unchanged", None)
    assert store.history("support", "bot", "fresh") == []
    assert store.resolve("support", "bot", "fresh") is None
    # a real change after that is a new version again
    assert applied(store, PROMPT, [ov(INTRO, "b")], source="job-3").version == "v1.0.2"


def test_history_is_oldest_first_and_per_tag(store: OverridesStore) -> None:
    for i in range(3):
        store.apply(PROMPT, [ov(INTRO, f"stable {i}")], source=f"job-{i}")
    store.apply(PROMPT, [ov(INTRO, "mine")], tag="alice", source="cli")
    stable = store.history("support", "bot")
    assert [v.version for v in stable] == ["v1.0.0", "v1.0.1", "v1.0.2", "v1.0.3"]
    assert [v.source for v in stable] == ["original", "job-0", "job-1", "job-2"]
    assert [v.version for v in store.history("support", "bot", "alice")] == ["v1.0.0", "v1.0.1"]
    assert store.history("support", "bot", "nothing") == []


def test_rollback_restores_a_set_as_a_new_version(store: OverridesStore) -> None:
    v1 = applied(store, PROMPT, [ov(INTRO, "a")], source="job-1", model_params={"temperature": 0.3})
    store.apply(PROMPT, [ov(REFUNDS, "b"), ov(INTRO, "a2")], source="job-2", model_params={"model": "m"})
    v3 = store.rollback(DESC, "v1.0.1")
    assert (v3.version, v3.previous, v3.source) == ("v1.0.3", "v1.0.2", "rollback")
    assert "v1.0.1" in v3.description
    assert v3.overrides == v1.overrides
    assert store.resolve("support", "bot", "stable") == v1.overrides
    assert [v.version for v in store.history("support", "bot")] == ["v1.0.0", "v1.0.1", "v1.0.2", "v1.0.3"]
    v4 = store.rollback(DESC, "v1.0.2", source="alice")
    assert (v4.version, v4.source) == ("v1.0.4", "alice")
    assert {s.path: s.body for s in v4.overrides.sections} == {INTRO: "a2", REFUNDS: "b"}


def test_rollback_undoes_the_first_apply(store: OverridesStore) -> None:
    store.put_prompt(PROMPT)
    first = store.apply(PROMPT, [ov(INTRO, "Hi.")], source="job-1")
    assert first.original is not None
    back = store.rollback(DESC, first.original.version)
    assert (back.version, back.previous) == ("v1.0.2", "v1.0.1")
    stable = store.resolve("support", "bot", "stable")
    assert stable is not None and not stable.sections and not stable.model_params
    rendered = store.get_prompt("support", "bot").render("x", params={"company": "Acme"}, overrides=stable)
    assert rendered.system == PROMPT.render("x", params={"company": "Acme"}).system


def test_rollback_to_an_unknown_version(store: OverridesStore) -> None:
    store.apply(PROMPT, [ov(INTRO, "a")], source="job-1")
    with pytest.raises(NotFoundError) as err:
        store.rollback(DESC, "v1.0.7")
    assert err.value.field == "version"
    with pytest.raises(ValidationError):
        store.rollback(DESC, "1.0.0")
    with pytest.raises(NotFoundError):
        store.rollback(DESC, "v1.0.0", tag="other")
    assert len(store.history("support", "bot")) == 2


def test_rollback_refuses_a_set_that_is_now_stale(store: OverridesStore) -> None:
    store.apply(PROMPT, [ov(TONE, "c")], source="job-1")
    store.apply(PROMPT, [ov(INTRO, "a")], source="job-2")
    newer = PROMPT.with_bodies({TONE: "A rewritten tone section."}).descriptor()
    with pytest.raises(StaleOverrideError):
        store.rollback(newer, "v1.0.1")
    assert len(store.history("support", "bot")) == 3


def test_deleting_a_tag_keeps_its_history(store: OverridesStore) -> None:
    store.apply(PROMPT, [ov(INTRO, "a")], tag="exp-7", source="job-7")
    assert store.delete("support", "bot", "exp-7") is True
    assert store.resolve("support", "bot", "exp-7") is None
    assert [v.version for v in store.history("support", "bot", "exp-7")] == ["v1.0.0", "v1.0.1"]
    again = applied(store, PROMPT, [ov(TONE, "b")], tag="exp-7", source="job-7")
    assert again.version == "v1.0.2"
    assert [s.path for s in again.overrides.sections] == [TONE]


# -- apply: a compare-and-set against the prompt the job read ----------------------------------

WARRANTY: SectionPath = ("warranty",)
NEWER = PROMPT.model_copy(
    update={
        "sections": (*PROMPT.sections, Section(path=WARRANTY, body="Products carry a two-year warranty."))
    }
)
"""The prompt pushed after the job read PROMPT: one more section (issue 26's reproduction)."""
JOB_CHANGES = [ov(INTRO, "Hi, ${company} bot here."), ov(TONE, "Be brief.")]


def state(store: OverridesStore) -> dict[str, object]:
    """Everything the store holds for support/bot: the prompt, every tag's content and history."""
    try:
        prompt: Prompt | None = store.get_prompt("support", "bot")
    except NotFoundError:
        prompt = None
    tags = store.list_tags("support", "bot")
    return {
        "prompt": prompt,
        "tags": {t: store.resolve("support", "bot", t) for t in tags},
        "history": {t: store.history("support", "bot", t) for t in ("stable", "exp", "alice", *tags)},
    }


def test_apply_of_a_job_older_than_the_stored_prompt_writes_nothing(store: OverridesStore) -> None:
    """Push a prompt, a job reads it, a newer prompt with one more section is pushed: applying the
    older job's changes is refused, names the section, and the newer prompt stays as it is."""
    store.put_prompt(PROMPT)
    job_read = store.get_prompt("support", "bot")
    store.put_prompt(NEWER)
    before = state(store)
    with pytest.raises(PromptChangedError) as err:
        store.apply(job_read, JOB_CHANGES, source="job:older", description="older job")
    assert (err.value.code, err.value.field) == ("prompt_changed", "prompt")
    assert (err.value.added, err.value.removed, err.value.changed, err.value.frozen) == (
        ("warranty",),
        (),
        (),
        (),
    )
    assert (
        "added: warranty" in err.value.message and "rerun the job on the current prompt" in err.value.message
    )
    assert "job:older" in err.value.message
    assert isinstance(err.value, StaleOverrideError)  # the hash guard, for the whole prompt
    assert state(store) == before
    assert store.get_prompt("support", "bot") == NEWER  # the warranty section is still there
    # on a tag that already holds versions too
    applied(store, NEWER, [ov(REFUNDS, "30 days.", NEWER)], source="job:newer")
    before = state(store)
    with pytest.raises(PromptChangedError):
        store.apply(job_read, JOB_CHANGES, source="job:older")
    assert state(store) == before


CHANGED_SINCE: dict[str, tuple[Prompt, dict[str, object]]] = {
    "a section added": (NEWER, {"added": ("warranty",)}),
    "a section removed": (
        PROMPT.model_copy(update={"sections": PROMPT.sections[:2] + PROMPT.sections[3:]}),
        {"removed": ("rules/tone",)},
    ),
    "a body changed": (PROMPT.with_bodies({TONE: "Be warm."}), {"changed": ("rules/tone",)}),
    "a section unfrozen": (
        PROMPT.model_copy(
            update={
                "sections": (*PROMPT.sections[:3], PROMPT.sections[3].model_copy(update={"frozen": False}))
            }
        ),
        {"frozen": ("safety",)},
    ),
    "a title changed": (
        PROMPT.model_copy(
            update={
                "sections": (
                    PROMPT.sections[0],
                    PROMPT.sections[1].model_copy(update={"title": "Refunds"}),
                    *PROMPT.sections[2:],
                )
            }
        ),
        {"retitled": ("rules/refunds",)},
    ),
    "the user message changed": (PROMPT.model_copy(update={"user": "Client: ${input}"}), {"user": True}),
    "sections reordered": (
        PROMPT.model_copy(
            update={"sections": (PROMPT.sections[1], PROMPT.sections[0], *PROMPT.sections[2:])}
        ),
        {"reordered": True},
    ),
}


def test_every_kind_of_change_since_the_job_is_refused_by_name(store: OverridesStore) -> None:
    for name, (pushed, named) in CHANGED_SINCE.items():
        store.put_prompt(pushed)
        before = state(store)
        with pytest.raises(PromptChangedError) as err:
            store.apply(PROMPT, [ov(INTRO, "a")], source="job-1")
        fields = ("added", "removed", "changed", "frozen", "retitled", "reordered", "user")
        got = {k: getattr(err.value, k) for k in fields}
        want = dict.fromkeys(fields, ()) | {"reordered": False, "user": False} | named
        assert got == want, name
        assert state(store) == before, name


def test_a_failed_apply_writes_nothing(store: OverridesStore) -> None:
    """Refused for any reason (the tag, an override, the params, the prompt), an apply writes
    nothing: not the prompt when it was not registered, not the tag, not a version."""
    bad_calls: list[tuple[Prompt, list[SectionOverride], dict[str, Any]]] = [
        (PROMPT, JOB_CHANGES, {"tag": "bad tag!"}),
        (PROMPT, JOB_CHANGES, {"tag": "opt-keepme"}),
        *((PROMPT, [*JOB_CHANGES, bad], {}) for bad in BAD.values()),
        (PROMPT, JOB_CHANGES, {"model_params": {"when": datetime.now(UTC)}}),
    ]
    empty = state(store)
    for prompt, sections, kwargs in bad_calls:  # an unregistered prompt stays unregistered
        with pytest.raises((ValidationError, StaleOverrideError)):
            store.apply(prompt, sections, source="job-1", **kwargs)
        assert state(store) == empty, kwargs
    applied(store, PROMPT, [ov(REFUNDS, "before")], source="setup")
    store.store(DESC, [ov(REFUNDS, "before")], tag="exp")
    before = state(store)
    store.put_prompt(NEWER)
    bad_calls.append((PROMPT, JOB_CHANGES, {}))  # the prompt changed since the job
    for prompt, sections, kwargs in bad_calls:
        with pytest.raises((ValidationError, StaleOverrideError)):
            store.apply(prompt, sections, source="job-1", **kwargs)
    assert state(store) == {**before, "prompt": NEWER}


def test_the_first_apply_of_an_unregistered_prompt_registers_it(store: OverridesStore) -> None:
    nothing = store.apply(PROMPT, [], tag="exp", source="job-0")  # writes nothing: registers nothing
    assert (nothing.status, nothing.version) == ("unchanged", None)
    with pytest.raises(NotFoundError):
        store.get_prompt("support", "bot")
    first = applied(store, PROMPT, JOB_CHANGES, source="job-1")
    assert store.get_prompt("support", "bot") == PROMPT
    assert store.resolve("support", "bot", "stable") == first.overrides
    # from now on the registered prompt is what every apply is compared with
    assert applied(store, PROMPT, [ov(REFUNDS, "b")], source="job-2").version == "v1.0.2"
    with pytest.raises(PromptChangedError):
        store.apply(NEWER, [ov(REFUNDS, "c", NEWER)], source="job-3")
    assert store.get_prompt("support", "bot") == PROMPT


def test_temporary_tags_are_the_workers_alone(store: OverridesStore) -> None:
    """``apply`` and ``rollback`` refuse a tag under the temporary prefix; ``store``, the workers'
    primitive for their experiment tags, writes it."""
    store.store(DESC, [ov(INTRO, "candidate")], tag="opt-job1-0")
    for call in (
        lambda: store.apply(PROMPT, JOB_CHANGES, tag="opt-keepme", source="job-1"),
        lambda: store.rollback(DESC, "v1.0.0", tag="opt-job1-0"),
    ):
        with pytest.raises(ValidationError) as err:
            call()
        assert err.value.field == "tag" and "temporary" in err.value.message
    assert store.list_tags("support", "bot") == ["opt-job1-0"]
    assert store.history("support", "bot", "opt-keepme") == []


def test_rollback_is_a_compare_and_set_too(store: OverridesStore) -> None:
    store.put_prompt(PROMPT)
    applied(store, PROMPT, [ov(INTRO, "a")], source="job-1")
    applied(store, PROMPT, [ov(REFUNDS, "b")], source="job-2")
    store.put_prompt(NEWER)
    before = state(store)
    with pytest.raises(PromptChangedError) as err:
        store.rollback(DESC, "v1.0.1")  # read before the push
    assert err.value.added == ("warranty",) and "the rollback" in err.value.message
    assert state(store) == before
    restored = store.rollback(NEWER.descriptor(), "v1.0.1")  # read again: the same sets are fresh
    assert restored.version == "v1.0.3"


def test_the_compare_is_atomic_with_the_write(
    store: OverridesStore, other: OverridesStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A push from another connection exactly between apply's compare and its write. A backend
    that locks (memory, filesystem, SQL: the prompt's lock or row) holds the push back until the
    apply committed; Redis lets it land, and the WATCH on the prompt makes the apply compare again
    and refuse. Never both: an apply made against PROMPT committed over NEWER."""
    store.put_prompt(PROMPT)
    optimistic = isinstance(store, RedisOverridesStore)
    compare = prompt_diff
    pushed = threading.Event()
    pusher = threading.Thread(target=lambda: push(other, pushed))
    landed_during_compare: list[bool] = []

    def compare_while_pushing(read: PromptDescriptor, now: PromptDescriptor) -> PromptDiff:
        if not landed_during_compare:  # the first compare: push from the other connection now
            pusher.start()
            landed_during_compare.append(pushed.wait(10 if optimistic else 0.3))
        return compare(read, now)

    monkeypatch.setattr("optiflow.stores._common.prompt_diff", compare_while_pushing)
    try:
        outcome: Applied | None = store.apply(PROMPT, JOB_CHANGES, source="job-1")
    except PromptChangedError as exc:
        assert exc.added == ("warranty",)
        outcome = None
    pusher.join(timeout=30)
    assert pushed.is_set() and store.get_prompt("support", "bot") == NEWER  # the push always lands
    history = store.history("support", "bot")
    if optimistic:  # the push landed under the apply's WATCH: refused, nothing written
        assert landed_during_compare == [True]
        assert outcome is None and history == [] and store.list_tags("support", "bot") == []
    else:  # the push waited for the apply's commit
        assert landed_during_compare == [False]
        assert outcome is not None and outcome.status == "applied"
        assert [v.version for v in history] == ["v1.0.0", "v1.0.1"]


def push(store: OverridesStore, done: threading.Event) -> None:
    store.put_prompt(NEWER)
    done.set()


# -- concurrency ------------------------------------------------------------------------------

THREADS = 8


def _race(work: Callable[[int], object]) -> list[object]:
    """Run ``work(i)`` in THREADS threads released at once; re-raise the first failure."""
    barrier = threading.Barrier(THREADS)
    results: list[object] = [None] * THREADS
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    if errors:
        raise errors[0]
    return results


def test_racing_applies_never_lose_a_version(store: OverridesStore) -> None:
    outcomes = _race(lambda i: store.apply(PROMPT, [ov(INTRO, f"body {i}")], source=f"job-{i}"))
    versions = [o.version.version for o in outcomes if isinstance(o, Applied) and o.version]
    assert sorted(versions) == sorted(f"v1.0.{i}" for i in range(1, THREADS + 1))
    originals = [o.original for o in outcomes if isinstance(o, Applied) and o.original]
    assert [v.version for v in originals] == ["v1.0.0"]  # recorded once, by the first apply
    history = store.history("support", "bot")
    assert [v.version for v in history] == [f"v1.0.{i}" for i in range(THREADS + 1)]
    assert [v.previous for v in history] == [None] + [f"v1.0.{i}" for i in range(THREADS)]
    assert sorted(v.source for v in history) == sorted(["original"] + [f"job-{i}" for i in range(THREADS)])
    assert store.resolve("support", "bot", "stable") == history[-1].overrides


def test_concurrent_applies_of_different_jobs_never_lose_an_update(
    store: OverridesStore, other: OverridesStore
) -> None:
    """Jobs that read the same prompt (not in the store yet) applied to one tag at once, from two
    connections: each one applies on top of what the others wrote, under its own hash guards.
    Every version is its predecessor plus its job's change, the prompt is registered once."""
    mutable = (INTRO, REFUNDS, TONE)

    def change(i: int) -> tuple[list[SectionOverride], dict[str, Any]]:
        return [ov(mutable[i % len(mutable)], f"job {i}")], {f"p{i}": i}

    def job(i: int) -> Applied:
        sections, params = change(i)
        return (store if i % 2 else other).apply(PROMPT, sections, source=f"job-{i}", model_params=params)

    outcomes = _race(job)
    assert all(isinstance(o, Applied) and o.status == "applied" for o in outcomes)
    history = store.history("support", "bot")
    assert [v.version for v in history] == [f"v1.0.{i}" for i in range(THREADS + 1)]
    assert history[0].source == "original" and sorted(v.source for v in history[1:]) == sorted(
        f"job-{i}" for i in range(THREADS)
    )
    for before, version in itertools.pairwise(history):
        sections, params = change(int(version.source.removeprefix("job-")))
        assert version.overrides == before.overrides.merged(sections, params), version.source
    stable = store.resolve("support", "bot", "stable")
    assert stable == history[-1].overrides
    assert stable is not None and dict(stable.model_params) == {f"p{i}": i for i in range(THREADS)}
    assert other.get_prompt("support", "bot") == PROMPT


def test_racing_merges_never_lose_a_write(store: OverridesStore) -> None:
    _race(lambda i: store.store(DESC, [], tag="exp", model_params={f"p{i}": i}))
    resolved = store.resolve("support", "bot", "exp")
    assert resolved is not None
    assert dict(resolved.model_params) == {f"p{i}": i for i in range(THREADS)}


# -- rendering --------------------------------------------------------------------------------


def test_render_skips_an_override_gone_stale(store: OverridesStore, caplog: pytest.LogCaptureFixture) -> None:
    store.put_prompt(PROMPT)
    store.store(DESC, [ov(TONE, "Be terse."), ov(REFUNDS, "Refunds: 30 days.")], tag="exp")
    store.put_prompt(PROMPT.with_bodies({TONE: "Always be warm and polite."}))

    prompt = store.get_prompt("support", "bot")
    overrides = store.resolve("support", "bot", "exp")
    with caplog.at_level(logging.WARNING):
        rendered = prompt.render("Where is my refund?", params={"company": "Acme"}, overrides=overrides)
    assert "Always be warm and polite." in rendered.system
    assert "Be terse." not in rendered.system
    assert "Refunds: 30 days." in rendered.system
    assert "Acme" in rendered.system
    assert rendered.user == "Customer: Where is my refund?"
    assert "stale override for rules/tone" in caplog.text


# -- open_store -------------------------------------------------------------------------------


def test_open_store_picks_the_backend(tmp_path: Path, redis_url: str) -> None:
    picks: list[tuple[Settings, type]] = [
        (Settings(home=tmp_path, store="memory"), MemoryOverridesStore),
        (Settings(home=tmp_path), FilesystemOverridesStore),
        (Settings(home=tmp_path, store="sql"), SqlOverridesStore),
        (Settings(home=tmp_path, redis_url=redis_url), RedisOverridesStore),
    ]
    for settings, cls in picks:
        s = open_store(settings)
        try:
            assert type(s) is cls
        finally:
            s.close()
    assert (tmp_path / "optiflow.db").exists()
    with pytest.raises(ConfigError):
        open_store(Settings(home=tmp_path, store="redis"))


def test_stores_share_state_across_instances(tmp_path: Path) -> None:
    """Two filesystem stores on one directory (two processes in real life) see one state."""
    a, b = FilesystemOverridesStore(tmp_path), FilesystemOverridesStore(tmp_path)
    a.apply(PROMPT, [ov(INTRO, "a")], source="one")
    assert applied(b, PROMPT, [ov(TONE, "b")], source="two").version == "v1.0.2"
    assert isinstance(a.resolve("support", "bot", "stable"), PromptOverrides)
    assert len(a.history("support", "bot")) == 3
    assert b.apply(PROMPT, [ov(TONE, "b")], source="two").unchanged
