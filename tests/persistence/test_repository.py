"""The job repository on SQLite and PostgreSQL: core models in and out, idempotent upserts,
record_step's compare-and-set, events deduplicated by key and ordered by seq, recovery queries."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from optiflow.core.dataset import Sample
from optiflow.core.evaluation import EvalResult, TrialSummary
from optiflow.core.records import Event, Rejection, Trial
from optiflow.errors import NotFoundError, ValidationError
from optiflow.persistence import JobRepository

SUMMARY = TrialSummary(
    total=4,
    passed=3,
    failed=1,
    pass_rate=0.75,
    total_cost=0.01,
    avg_latency_ms=12.5,
    avg_ttft_ms=None,
    total_tokens=400,
)


def count(repo: JobRepository, table: str, job_id: str = "j1") -> int:
    with repo.engine.connect() as conn:
        return int(
            conn.execute(
                sa.text(f"SELECT count(*) FROM {table} WHERE job_id = :j"), {"j": job_id}
            ).scalar_one()
        )


def item(candidate: str, sample: str, run: int = 0, **kw: object) -> EvalResult:
    return EvalResult.model_validate(
        {"experiment_id": candidate, "sample_id": sample, "run": run, "passed": True, "score": 1.0, **kw}
    )


def ev(key: str, type_: str = "progress_changed", **payload: object) -> Event:
    return Event(type=type_, key=key, payload=dict(payload))


@pytest.fixture
def job(repo: JobRepository) -> str:
    repo.create("j1", "compress", "demo", {"kind": "compress", "objective": "maximize"})
    return "j1"


# -- jobs -----------------------------------------------------------------------------------------
def test_create_get_list_filters_by_status(repo: JobRepository) -> None:
    repo.create("a", "compress", "first", {"x": 1})
    repo.create("b", "optimize", "second", {})
    repo.create("c", "compress", "third", {})
    assert repo.finish("b", "completed", result={"ok": True})
    rec = repo.get("a")
    assert (rec.kind, rec.name, rec.status, rec.spec, rec.step_index) == (
        "compress",
        "first",
        "queued",
        {"x": 1},
        0,
    )
    assert rec.created_at.tzinfo is not None and rec.heartbeat is None
    assert {r.id for r in repo.list()} == {"a", "b", "c"}
    assert [r.id for r in repo.list("completed")] == ["b"]
    assert {r.id for r in repo.list(status=("queued", "completed"))} == {"a", "b", "c"}
    assert {r.id for r in repo.list(kind="compress")} == {"a", "c"}
    assert repo.list("running") == []
    assert len(repo.list(limit=2)) == 2
    with pytest.raises(ValidationError, match="unknown status 'done'") as info:
        repo.list("done")
    assert info.value.field == "status"
    with pytest.raises(NotFoundError):
        repo.get("zzz")


def test_dataset_snapshot_is_kept_once(repo: JobRepository) -> None:
    samples = [Sample(id="s2", input={"q": "b"}, expected="B"), Sample(id="s1", input="a", tags=("t",))]
    repo.create("j1", "compress", "n", {}, dataset=samples)
    assert repo.dataset("j1") == samples
    repo.snapshot_dataset("j1", [Sample(id="s1", input="changed")])
    assert repo.dataset("j1") == samples  # a snapshot is never rewritten


# -- idempotent upserts ---------------------------------------------------------------------------
def test_trial_upsert_same_key_twice_is_one_updated_row(repo: JobRepository, job: str) -> None:
    first = Trial(candidate_id="c1", step_index=1, overrides_tag="opt-j1-1", parent_candidate_ids=("base",))
    repo.upsert_trials(job, [first])
    created = repo.trial(job, "c1").created_at
    time.sleep(0.01)
    done = first.model_copy(
        update={"status": "completed", "objective_score": 0.75, "summary": SUMMARY, "extra": {"iteration": 2}}
    )
    repo.upsert_trials(job, [done])
    assert count(repo, "optiflow_trials") == 1
    got = repo.trial(job, "c1")
    assert got.model_dump(exclude={"created_at", "updated_at"}) == done.model_dump(
        exclude={"created_at", "updated_at"}
    )
    assert got.created_at == created and got.updated_at is not None and got.updated_at > created
    with pytest.raises(NotFoundError):
        repo.trial(job, "nope")


def test_trial_item_upsert_same_key_twice_is_one_updated_row(repo: JobRepository, job: str) -> None:
    repo.upsert_trial_items(job, [item("c1", "s1", output="first", passed=False, score=0.0)])
    second = item("c1", "s1", output="second", prompt_tokens=10, completion_tokens=5, cost=0.002, ttft_ms=3.5)
    repo.upsert_trial_items(job, [second, item("c1", "s1", run=1), item("c2", "s1")])
    assert count(repo, "optiflow_trial_items") == 3
    assert repo.trial_items(job, "c1") == [second, item("c1", "s1", run=1)]
    assert repo.trial_items(job, "c2") == [item("c2", "s1")]
    assert len(repo.trial_items(job)) == 3


def test_item_upsert_keeps_the_stored_output_and_real_evaluations(repo: JobRepository, job: str) -> None:
    """The evaluation stores the full output; the chord's compact copy (no output) written later
    by advance keeps it. A fail-fast skip delivered late never replaces a made evaluation."""
    full = item("c1", "s1", output="the answer", prompt_tokens=7)
    repo.upsert_trial_items(job, [full])
    repo.upsert_trial_items(job, [full.compact().model_copy(update={"cached": True})])
    assert repo.trial_items(job, "c1") == [full.model_copy(update={"cached": True})]
    repo.upsert_trial_items(job, [item("c1", "s1", passed=False, score=0.0, skipped=True)])
    assert repo.trial_items(job, "c1") == [full.model_copy(update={"cached": True})]
    skipped = item("c1", "s2", passed=False, score=0.0, skipped=True)
    repo.upsert_trial_items(job, [skipped])
    made = item("c1", "s2", output="late but real")
    repo.upsert_trial_items(job, [made])  # a real evaluation does replace a skip
    assert repo.trial_items(job, "c1")[1] == made


def test_items_of_an_unknown_job_are_refused(repo: JobRepository) -> None:
    with pytest.raises(sa.exc.IntegrityError):
        repo.upsert_trial_items("ghost", [item("c1", "s1")])


def test_rejections_are_stored_once(repo: JobRepository, job: str) -> None:
    dup = Rejection(step_index=1, reason_code="duplicate", config_hash="abc", message="same as c1")
    other = Rejection(
        step_index=1,
        reason_code="frozen_section",
        message="edits a frozen section",
        iteration=2,
        proposed_index=1,
        parent_candidate_ids=("c1",),
        rationale="shorter",
    )
    repo.add_rejections(job, [dup, other, dup])
    repo.add_rejections(job, [dup])
    got = repo.rejections(job)
    assert len(got) == 2
    assert {r.reason_code for r in got} == {"duplicate", "frozen_section"}
    stored = next(r for r in got if r.reason_code == "frozen_section")
    assert stored.model_dump(exclude={"key", "created_at"}) == other.model_dump(exclude={"key", "created_at"})


# -- record_step ----------------------------------------------------------------------------------
def test_record_step_writes_everything_in_one_guarded_transaction(repo: JobRepository, job: str) -> None:
    assert repo.record_step(job, expected_step=0, new_step=1, state={"s": 0}, action={"type": "step"})
    trials = [
        Trial(candidate_id="base", step_index=1, status="completed", objective_score=0.5, summary=SUMMARY)
    ]
    items = [item("base", "s1"), item("base", "s2", passed=False, score=0.0)]
    rejections = [Rejection(step_index=1, reason_code="duplicate", config_hash="h")]
    events = [ev("progress:1", done=2), ev("trial:base:completed", "trial_added_or_updated")]
    won = repo.record_step(
        job,
        expected_step=1,
        new_step=2,
        state={"s": 1},
        action={"type": "step", "index": 2},
        trials=trials,
        items=items,
        rejections=rejections,
        events=events,
    )
    assert won and won.won
    assert [(e.seq, e.key, e.job_id) for e in won.events] == [
        (1, "progress:1", job),
        (2, "trial:base:completed", job),
    ]
    rec = repo.get(job)
    assert (rec.step_index, rec.state, rec.status) == (2, {"s": 1}, "running")
    assert rec.heartbeat is not None

    # the same step delivered again: loses, writes nothing at all
    lost = repo.record_step(
        job,
        expected_step=1,
        new_step=2,
        state={"s": "dup"},
        action=None,
        trials=[Trial(candidate_id="other", step_index=1)],
        items=[item("other", "s1")],
        rejections=[Rejection(step_index=1, reason_code="invalid_shape")],
        events=[ev("progress:dup")],
    )
    assert not lost and lost.events == ()
    assert repo.get(job).state == {"s": 1}
    assert [t.candidate_id for t in repo.trials(job)] == ["base"]
    assert len(repo.trial_items(job)) == 2
    assert len(repo.rejections(job)) == 1
    assert [e.key for e in repo.events(job)] == ["progress:1", "trial:base:completed"]


def test_record_step_expected_status_and_finished_jobs(repo: JobRepository, job: str) -> None:
    assert not repo.record_step(
        job, expected_step=0, new_step=1, state={}, action=None, expected_status="running"
    )
    assert repo.record_step(job, expected_step=0, new_step=1, state={}, action=None, expected_status="queued")
    assert repo.finish(job, "cancelled", error="cancelled by user", events=[ev("finished", "run_finished")])
    assert not repo.record_step(job, expected_step=1, new_step=2, state={}, action=None, events=[ev("late")])
    assert not repo.finish(job, "failed", events=[ev("finished-again", "run_finished")])  # first writer won
    assert [e.key for e in repo.events(job)] == ["finished"]
    assert repo.get(job).status == "cancelled"


def test_record_step_race_has_one_winner(repo: JobRepository, job: str) -> None:
    """Two deliveries of the same chord body at once: exactly one writes."""
    outcomes: list[bool] = []
    barrier = threading.Barrier(4)

    def deliver(n: int) -> None:
        barrier.wait()
        won = repo.record_step(
            job,
            expected_step=0,
            new_step=1,
            state={"by": n},
            action=None,
            trials=[Trial(candidate_id=f"c{n}", step_index=0)],
            events=[ev(f"e{n}")],
        )
        outcomes.append(won.won)

    threads = [threading.Thread(target=deliver, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(outcomes) == [False, False, False, True]
    winner = repo.get(job).state
    assert winner is not None
    assert [t.candidate_id for t in repo.trials(job)] == [f"c{winner['by']}"]
    assert [(e.seq, e.key) for e in repo.events(job)] == [(1, f"e{winner['by']}")]


# -- events ---------------------------------------------------------------------------------------
def test_events_dedupe_by_key_and_order_by_seq(repo: JobRepository, job: str) -> None:
    stored = repo.append_events(job, [ev("a"), ev("b"), ev("a", other=True)])
    assert [(e.seq, e.key) for e in stored] == [(1, "a"), (2, "b")]
    assert repo.append_events(job, [ev("b"), ev("a")]) == []  # repeats: nothing stored
    stored = repo.append_events(job, [ev("c", "run_finished", status="completed")])
    assert [(e.seq, e.key, e.type, e.payload) for e in stored] == [
        (3, "c", "run_finished", {"status": "completed"})
    ]
    got = repo.events(job)
    assert [(e.seq, e.key) for e in got] == [(1, "a"), (2, "b"), (3, "c")]
    assert got[0].payload == {} and got[0].created_at is not None
    assert [e.key for e in repo.events(job, after_seq=1)] == ["b", "c"]
    assert [e.key for e in repo.events(job, after_seq=1, limit=1)] == ["b"]
    assert repo.events(job, after_seq=3) == []
    with pytest.raises(NotFoundError):
        repo.append_events("ghost", [ev("x")])


def test_event_seqs_are_per_job(repo: JobRepository, job: str) -> None:
    repo.create("j2", "compress", "other", {}, events=[ev("queued", "run_status_changed")])
    repo.append_events(job, [ev("x")])
    repo.append_events("j2", [ev("x")])
    assert [(e.seq, e.key) for e in repo.events("j2")] == [(1, "queued"), (2, "x")]
    assert [(e.seq, e.key) for e in repo.events(job)] == [(1, "x")]


def test_concurrent_appends_get_distinct_consecutive_seqs(repo: JobRepository, job: str) -> None:
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def append(n: int) -> None:
        try:
            barrier.wait()
            for i in range(5):
                repo.append_events(job, [ev(f"w{n}-{i}"), ev("shared")])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    got = repo.events(job)
    assert [e.seq for e in got] == list(range(1, 22))
    assert len({e.key for e in got}) == 21


def test_a_repository_owns_its_engine(db_url: str, repo: JobRepository, job: str) -> None:
    """No engine is shared through class state: closing one repository leaves another working."""
    other = JobRepository(db_url)
    assert other.engine is not repo.engine
    other.close()
    assert repo.get(job).id == job
