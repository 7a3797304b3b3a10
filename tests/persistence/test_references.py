"""Drift references and nights in the jobs database, on SQLite and PostgreSQL: a new reference
supersedes the key's current one, nights are numbered in order under the key's lock even when
measures end at the same moment, and a job's record is found again (a redelivered end)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from optiflow.core.drift.detector import Evidence
from optiflow.core.drift.estimate import Change
from optiflow.core.drift.identity import Identity
from optiflow.core.drift.report import Night, Reference
from optiflow.persistence import JobRepository
from optiflow.persistence.references import DriftRepository, lock_key

T0 = datetime(2025, 1, 1, tzinfo=UTC)
IDENT = Identity(prompt="p1", model="m", dataset="d", check="c")


def reference(rid: str, job: str, at: datetime, prompt: str = "p1", model: str = "m") -> Reference:
    return Reference(
        id=rid,
        ns="support",
        key="bot",
        tag="stable",
        identity=IDENT.model_copy(update={"prompt": prompt, "model": model}),
        job_id=job,
        created_at=at,
        source="test",
        sample_ids=("a", "b"),
        outcomes={"a": "1101", "b": "0010"},
        runs=4,
        pass_rate=0.5,
        next_run=4,
    )


def night(ref: Reference, k: int, job: str) -> Night:
    e = Evidence(night=k, alpha=0.01, log_drop=0.0, log_gain=0.0, window=1, gain_window=1, shown="none")
    change = Change(estimate=0.0, low=-0.1, high=0.1, confidence=0.95, samples=2)
    return Night(
        reference_id=ref.id,
        night=k,
        job_id=job,
        measured_at=T0 + timedelta(days=k),
        outcomes={"a": "1", "b": "0"},
        margin=0.1,
        alpha=0.05,
        evidence=e,
        change=change,
        pass_rate=0.5,
    )


def test_references_supersede_and_nights_follow_in_order(repo: JobRepository) -> None:
    drift = DriftRepository(repo.engine)
    first = reference("r1", "j1", T0)
    config = first.identity.config
    with drift.locked("support", "bot", "stable", config) as tx:
        assert tx.current() is None and tx.latest_for_tag() is None
        tx.add_reference(first)
    with drift.locked("support", "bot", "stable", config) as tx:
        assert tx.current() == first
        tx.add_night(night(first, 1, "j2"), first.model_copy(update={"next_run": 5}))
    assert drift.reference("r1").next_run == 5
    assert [n.job_id for n in drift.nights("r1")] == ["j2"]
    found = drift.of_job("j2")
    assert found is not None and found[0].id == "r1" and found[1] is not None and found[1].night == 1
    assert drift.of_job("j1") == (drift.reference("r1"), None)
    assert drift.of_job("nope") is None
    second = reference("r2", "j3", T0 + timedelta(days=3), prompt="p2")
    with drift.locked("support", "bot", "stable", config) as tx:
        tx.add_reference(second)
    other = reference("r3", "j4", T0 + timedelta(days=4), model="m2")  # another model: its own key
    with drift.locked("support", "bot", "stable", other.identity.config) as tx:
        assert tx.current() is None and tx.latest_for_tag() == second
        tx.add_reference(other)
    assert drift.current("support", "bot", "stable", config) == second
    assert [r.id for r in drift.current_for_tag("support", "bot", "stable")] == ["r3", "r2"]
    listed = drift.list("support", "bot", "stable")
    assert [(r.id, s is not None) for r, s in listed] == [("r3", False), ("r2", False), ("r1", True)]
    assert lock_key("a", "b", "c", "d") != lock_key("a", "b", "c", "e")


def test_two_measures_ending_at_once_get_nights_one_after_the_other(repo: JobRepository) -> None:
    drift = DriftRepository(repo.engine)
    ref = reference("r1", "j1", T0)
    config = ref.identity.config
    with drift.locked("support", "bot", "stable", config) as tx:
        tx.add_reference(ref)
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def end(job: str) -> None:
        try:
            start.wait(10)
            with drift.locked("support", "bot", "stable", config) as tx:
                current = tx.current()
                assert current is not None
                k = len(tx.nights(current.id)) + 1
                tx.add_night(night(current, k, job), current)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=end, args=(f"n{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert [n.night for n in drift.nights("r1")] == [1, 2, 3, 4]
    assert sorted(n.job_id for n in drift.nights("r1")) == ["n0", "n1", "n2", "n3"]
