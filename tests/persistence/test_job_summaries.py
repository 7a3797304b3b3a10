"""Listing jobs reads their summary columns only (issue 27, medium 5): the outcome is stored when a
job ends, a database from before it gets the outcomes of its finished jobs when it is upgraded,
and the list's query never selects a spec, a checkpoint or a result."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import sqlalchemy as sa

from optiflow.persistence import JobRepository
from optiflow.persistence.migrate import upgrade

REPORT = {"report": {"kind": "measure", "pass_rate": 0.75, "wilson": {"lower": 0.6}, "fail_below": 0.5}}
BIG = {"prompt": {"sections": [{"path": "a", "body": "x" * 4_000_000}]}}


def test_a_finished_job_lists_its_outcome_without_its_spec_or_result(db_url: str) -> None:
    repo = JobRepository(db_url, auto_migrate=True)
    try:
        repo.create("j1", kind="measure", name="big", spec=BIG)
        repo.finish("j1", "completed", result=REPORT)
        statements: list[str] = []
        sa.event.listen(repo.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
        (summary,) = repo.summaries(limit=10)
        assert summary.outcome == {
            "text": "pass rate 75.0% · lower bound 60.0% above the floor 50.0%",
            "bad": False,
        }
        assert (summary.id, summary.status) == ("j1", "completed")
        (select,) = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
        columns = select.split("FROM")[0]
        for heavy in ("spec", "state", "action", "result"):
            assert f".{heavy}" not in columns and f" {heavy}," not in columns, select
    finally:
        repo.close()


def test_upgrading_fills_the_outcomes_of_finished_jobs(db_url: str) -> None:
    upgrade(db_url, "0001")
    engine = sa.create_engine(db_url, poolclass=sa.pool.NullPool)
    now = datetime.now(UTC)
    row = {
        "kind": "measure",
        "name": "n",
        "spec": "{}",
        "step_index": 0,
        "created_at": now,
        "updated_at": now,
    }
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO optiflow_jobs (id, kind, name, status, spec, step_index, result, created_at, "
                    "updated_at) VALUES (:id, :kind, :name, :status, :spec, :step_index, :result, :created_at, "
                    ":updated_at)"
                ),
                [
                    {**row, "id": "done", "status": "completed", "result": json.dumps(REPORT)},
                    {**row, "id": "running", "status": "running", "result": None},
                ],
            )
    finally:
        engine.dispose()
    upgrade(db_url)
    repo = JobRepository(db_url)
    try:
        outcomes = {s.id: s.outcome for s in repo.summaries()}
    finally:
        repo.close()
    assert outcomes["running"] is None
    assert outcomes["done"] is not None and outcomes["done"]["text"].startswith("pass rate 75.0%")
