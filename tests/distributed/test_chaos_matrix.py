"""The crash matrix: every step kind of every job kind, under every gate where it occurs, survives
``kill -9`` of the eval worker and, separately, of the control worker, with the reference report.

One wave (:mod:`tests.support.chaos_wave`) runs every cell's two jobs and each document's
reference on real ``celery worker`` processes on Redis and SQLite: each eval cell's job parks one
evaluation of its step in the eval worker once a fraction of the step's evaluations started
(0.2, 0.5 or 0.8, by cell), each control cell's job parks its step's ``advance`` in the control
worker before the workflow reads the results (``entry``) or once the transition is committed and
the next step not launched yet (``committed``), alternately. The eval worker is killed (SIGKILL),
a standby takes its queue and a fresh control worker starts; once the eval cells' jobs ended, the
control worker is killed. Each job must end with its document's reference report (see
``chaos_matrix.comparable``: the same decisions and figures; under fail-fast a strict rejection's
regression count may differ within its lower bound), as many evaluations (each (experiment,
sample, run) once), the same steps, no temporary tag left, and its step launched again after the
kill (or its end sent again when the kill came after its last step was committed).

``make chaos`` runs the matrix three times per role at random kill points, on SQLite and
PostgreSQL, and writes bench/chaos_results.md.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from optiflow.interfaces.client import Client
from optiflow.settings import Settings
from tests.support.chaos_matrix import MATRIX, ROLES, Cell, step_kind
from tests.support.chaos_wave import Kill, Plan, Wave, run_wave
from tests.support.workers import worker_env

pytestmark = [pytest.mark.redis, pytest.mark.workers]
STALE_AFTER_S = 3
AFTER = (0.2, 0.5, 0.8)
POINTS = ("entry", "committed")


def plans() -> list[tuple[Cell, Plan]]:
    out = []
    for i, cell in enumerate(MATRIX):
        n = cell.occurrence
        out.append((cell, Plan("eval", cell.step, occurrence=n, after=AFTER[i % len(AFTER)])))
        out.append((cell, Plan("control", cell.step, occurrence=n, point=POINTS[i % len(POINTS)])))
    return out


@pytest.fixture(scope="module")
def wave(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wave]:
    import redis

    home = tmp_path_factory.mktemp("chaos-matrix")
    prefix = f"optiflow-test-{uuid.uuid4().hex[:10]}"
    env = worker_env(
        redis_url,
        prefix,
        home,
        OPTIFLOW_STALE_AFTER_S=str(STALE_AFTER_S),
        OPTIFLOW_RECOVER_INTERVAL_S="0.5",
    )
    settings = Settings(
        redis_url=redis_url,
        key_prefix=prefix,
        home=home,
        database_url=env["OPTIFLOW_DATABASE_URL"],
        stale_after_s=STALE_AFTER_S,
    )
    try:
        with Client(settings, embedded=False) as client:
            done = run_wave(env, Path(home), client, plans(), tag="suite", timeout=400)
            print(f"chaos matrix: {', '.join(f'{k} {v:.1f}s' for k, v in done.phases.items())}")
            yield done
    finally:
        r = redis.Redis.from_url(redis_url)
        found = list(r.scan_iter(match=f"{prefix}*", count=1000))
        for i in range(0, len(found), 500):
            r.delete(*found[i : i + 500])
        r.close()


def _kill(wave: Wave, cell: Cell, role: str) -> Kill:
    (kill,) = [k for k in wave.kills if k.cell == cell and k.plan.role == role]
    return kill


@pytest.mark.timeout(900)
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("cell", MATRIX, ids=lambda c: c.id)
def test_kill_9_mid_step_ends_with_the_reference_report(wave: Wave, cell: Cell, role: str) -> None:
    kill = _kill(wave, cell, role)
    ref = wave.refs[cell.doc]
    where = f"{kill.name}: {kill.observed}"
    assert cell.step in {step_kind(s) for s in ref.steps}, (
        f"{cell.doc} takes no {cell.step} step: {ref.steps}"
    )
    assert kill.where is not None and step_kind(kill.where["name"]) == cell.step, where  # the step killed
    assert kill.status == "completed", f"{where}: {kill.status} {kill.error}"
    assert kill.same_report, f"{where}: {kill.diff}"
    assert kill.each_once, f"{where}: {kill.report.stats.evaluations} != {ref.report.stats.evaluations}"
    assert kill.steps == ref.steps, where  # the same steps: a kill costs no step
    assert kill.no_temp_tag, f"{where}: {kill.temp_tags}"
    last = kill.where["step"] == len(ref.steps) - 1
    if role == "control" and kill.plan.point == "committed" and last:
        assert kill.resumed == "nothing", where  # its pending Finish was sent again
    else:
        relaunched = kill.where["step"] + (1 if kill.plan.point == "committed" and role == "control" else 0)
        assert kill.resumed == f"step {relaunched}", f"{where}: recovery launched {kill.resumed}"
