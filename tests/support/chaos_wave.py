"""One wave of the crash matrix: many cells' jobs on one pair of real workers, each parked where
its cell wants the kill, then ``kill -9`` of the eval worker, then of the control worker.

The wave starts a control worker (prefork, a child per control cell and a few to spare) and an
eval worker (threads) of :mod:`tests.support.chaos_app` with parking on, and a standby eval worker
(litellm loaded, consuming no eval queue yet). It submits each document's reference job and each
cell's job, holds each cell's ``resume`` lock (so no recovery sweep touches a parked job before
its kill) and waits until every reference ended, every eval cell's job has its evaluations parked
in the eval worker (the rest of its step done) and every control cell's job its ``advance``
parked in a child of the control worker. Then:

1. the eval worker is killed with SIGKILL; the standby starts consuming ``optiflow.eval`` (the
   restart), a fresh control worker starts, and the eval cells' locks are dropped: the control
   worker finds their jobs stalled and launches their pending steps again;
2. once every eval cell's job ended, the control worker is killed with SIGKILL (it holds only the
   parked control cells' ``advance``), and their locks are dropped: the fresh control worker
   resumes them.

At each kill only the parked jobs are unfinished, and each of them has work in flight in one of
the two workers only, so a job sees the kill of its cell's role alone. Before killing, the wave
checks that each job parked at its cell's step kind, in the process about to be killed.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optiflow.core.experiment import temp_tag_prefix
from optiflow.stores import keys
from tests.support.chaos_matrix import (
    Cell,
    comparable,
    count_key,
    counts_agree,
    differences,
    parked_key,
    plan_key,
    release_key,
    spec_of,
    step_kind,
    steps_key,
)
from tests.support.workers import WorkerProcess

if TYPE_CHECKING:
    from optiflow.interfaces.client import Client

APP = "tests.support.chaos_app"
ACTIVE = ("queued", "running")
LOCK_S = 3600
STATUS_POLL_S = 2.0


@dataclass(frozen=True)
class Plan:
    """Where a cell's kill lands: ``role`` (eval / control), the step ``kind`` and which of its
    ``occurrence``-s; eval: ``hold`` evaluations parked once a fraction ``after`` of the step's
    started; control: the ``point`` of the step's ``advance`` (entry, committed, launched)."""

    role: str
    kind: str
    occurrence: int = 0
    after: float = 0.3
    hold: int = 1
    point: str = "entry"

    @property
    def parks_evaluation(self) -> bool:
        """Its job parks evaluations in the eval worker (an eval kill, or a control kill ``idle``)."""
        return self.role == "eval" or self.point == "idle"

    def describe(self) -> str:
        if self.role == "eval":
            return f"{self.kind}#{self.occurrence} after {self.after:.0%} started, {self.hold} parked"
        if self.point == "idle":
            return f"{self.kind}#{self.occurrence} idle (evaluations parked after {self.after:.0%} started)"
        return f"{self.kind}#{self.occurrence} advance at {self.point}"


@dataclass
class Reference:
    doc: str
    name: str
    job_id: str = ""
    status: str = ""
    report: Any = None
    steps: list[str] = field(default_factory=list)


@dataclass
class Kill:
    """One cell's job in a wave and what became of it."""

    cell: Cell
    plan: Plan
    name: str
    job_id: str = ""
    submitted: float = 0.0
    where: dict[str, Any] | None = None
    observed: str = ""
    killed: float = 0.0
    ended: float = 0.0
    status: str = ""
    error: str | None = None
    report: Any = None
    steps: list[str] = field(default_factory=list)
    same_report: bool = False
    each_once: bool = False
    no_temp_tag: bool = False
    diff: list[str] = field(default_factory=list)
    temp_tags: list[str] = field(default_factory=list)
    launches_before: int = 0
    resumed: str = ""
    """What recovery launched first after the kill (``step N``), or ``nothing``."""

    @property
    def ok(self) -> bool:
        return self.status == "completed" and self.same_report and self.each_once and self.no_temp_tag

    @property
    def wall_s(self) -> float:
        return self.ended - self.submitted

    @property
    def recovered_s(self) -> float | None:
        """From the kill to the job's end; None when it ended first (parked after its next step
        was launched, a job goes on)."""
        return self.ended - self.killed if self.killed and self.ended > self.killed else None


@dataclass
class Wave:
    kills: list[Kill]
    refs: dict[str, Reference]
    phases: dict[str, float]


def _hostname(worker: WorkerProcess) -> str:
    return worker.name.replace("%h", socket.gethostname())


def _worker(
    env: Mapping[str, str], logdir: Path, tag: str, queue: str, *, park: bool, **kw: Any
) -> WorkerProcess:
    extra = {"OPTIFLOW_CHAOS_PARK": "1" if park else "0"}
    if queue == "chaos.standby":
        extra["OPTIFLOW_CHAOS_PRELOAD"] = "1"
    return WorkerProcess({**env, **extra}, queue, log=logdir / f"{tag}.log", app=APP, **kw)


def run_wave(
    env: Mapping[str, str],
    logdir: Path,
    client: Client,
    plans: Sequence[tuple[Cell, Plan]],
    *,
    tag: str,
    refs: Mapping[str, Reference] | None = None,
    timeout: float = 600,
) -> Wave:
    """Run ``plans`` (with the references of their documents unless ``refs`` are given) and
    return every cell's outcome; each compared with its document's reference."""
    rt = client.runtime
    t0, cpu0 = time.monotonic(), time.process_time()
    rt.redis.delete(release_key(rt.settings.key_prefix))  # an earlier wave's release
    w = _Workers(env, logdir, tag, plans)
    try:
        w.start()
        phases = {"workers_ready": time.monotonic() - t0}
        references = dict(refs or {})
        if refs is None:
            for doc in sorted({c.doc for c, _ in plans}):
                references[doc] = Reference(doc, f"chaos-{tag}-ref-{doc}")
                references[doc].job_id = client.submit(spec_of(doc, references[doc].name)).id
        kills = [_submit(client, cell, plan, f"chaos-{tag}-{plan.role}-{cell.id}") for cell, plan in plans]
        _park_all(client, kills, [] if refs is not None else list(references.values()), timeout)
        phases["parked"] = time.monotonic() - t0
        e_kills = [k for k in kills if k.plan.role == "eval"]
        c_kills = [k for k in kills if k.plan.role == "control"]
        if e_kills:
            w.kill_eval(client, e_kills)
            phases["eval_killed"] = time.monotonic() - t0
        if c_kills:
            w.kill_control(client, c_kills, timeout)
            phases["control_killed"] = time.monotonic() - t0
        _wait_ended(client, kills, timeout)
        phases["cells_ended"] = time.monotonic() - t0
        if refs is None:
            for ref in references.values():
                _finish_reference(client, ref)
        for kill in kills:
            _judge(client, kill, references[kill.cell.doc])
        phases["wall"] = time.monotonic() - t0
        phases["client_cpu"] = time.process_time() - cpu0
        return Wave(kills, references, phases)
    finally:
        w.close()


class _Workers:
    """A wave's workers: control and eval with parking on, a standby eval worker (with eval
    cells), and the control worker that replaces the first (with control cells)."""

    def __init__(
        self, env: Mapping[str, str], logdir: Path, tag: str, plans: Sequence[tuple[Cell, Plan]]
    ) -> None:
        self.env, self.logdir, self.tag = env, logdir, tag
        controls = sum(1 for _, p in plans if p.role == "control")
        held = sum(p.hold for _, p in plans if p.parks_evaluation)
        self.c1 = self._new(
            "control1", "optiflow.control", park=True, pool="prefork", concurrency=controls + 3
        )
        self.e1 = self._new("eval1", "optiflow.eval", park=True, pool="threads", concurrency=16 + held)
        self.standby = any(p.role == "eval" for _, p in plans)
        self.e2: WorkerProcess | None = None
        self.c2: WorkerProcess | None = None

    def _new(self, name: str, queue: str, *, park: bool, **kw: Any) -> WorkerProcess:
        return _worker(self.env, self.logdir, f"{self.tag}-{name}", queue, park=park, **kw)

    @property
    def all(self) -> list[WorkerProcess]:
        return [w for w in (self.c1, self.e1, self.e2, self.c2) if w is not None]

    def start(self) -> None:
        """Start the wave's first workers; then the standby eval worker, which boots while the
        jobs run (it is needed at the eval kill only)."""
        for w in self.all:
            w.wait_ready()
        if self.standby:
            self.e2 = self._new("eval2", "chaos.standby", park=False, pool="threads", concurrency=16)

    def kill_eval(self, client: Client, kills: list[Kill]) -> None:
        """Kill the eval worker that holds the eval cells' parked evaluations; the standby takes
        its queue, and recovery may resume the cells' jobs."""
        assert self.e2 is not None
        self.e2.wait_ready()
        _kill(client, self.e1, kills, lambda k, pid: pid == self.e1.pid)
        client.app.control.add_consumer(
            "optiflow.eval", destination=[_hostname(self.e2)], reply=True, timeout=10
        )
        _release(client, kills)

    def kill_control(self, client: Client, kills: list[Kill], timeout: float) -> None:
        """Start the replacement control worker; once it is up, the first takes no new task and,
        holding only the control cells' parked ``advance``, is killed."""
        self.c2 = self._new("control2", "optiflow.control", park=False, pool="prefork", concurrency=4)
        self.c2.wait_ready()
        client.app.control.cancel_consumer(
            "optiflow.control", destination=[_hostname(self.c1)], reply=True, timeout=10
        )
        _drained(client, self.c1, kills, timeout)
        # parked in the control worker's children; ``idle``: in the eval worker (the job holds
        # nothing in the control worker), let go once the control worker is dead
        _kill(
            client,
            self.c1,
            kills,
            lambda k, pid: os.getpgid(pid) == (self.e1 if k.plan.point == "idle" else self.c1).pid,
        )
        _release(client, kills)
        if any(k.plan.point == "idle" for k in kills):
            rt = client.runtime
            rt.redis.set(release_key(rt.settings.key_prefix), b"1", ex=LOCK_S)

    def close(self) -> None:
        for w in self.all:
            if w.proc.poll() is not None:
                w.log.close()
            elif w in (self.c1, self.e1):
                w.kill()  # a parked task never lets a warm shutdown end
            else:
                w.stop()


def _submit(client: Client, cell: Cell, plan: Plan, name: str) -> Kill:
    """Submit the cell's job under its plan; its ``resume`` lock keeps recovery off it until the
    kill (a job parked for a while looks stalled)."""
    rt = client.runtime
    prefix = rt.settings.key_prefix
    kill = Kill(cell, plan, name)
    rt.redis.set(plan_key(prefix, name), json.dumps(plan.__dict__), ex=LOCK_S)
    kill.submitted = time.time()
    kill.job_id = client.submit(spec_of(cell.doc, name)).id
    rt.redis.set(keys.lock(prefix, f"resume:{kill.job_id}"), b"1", ex=LOCK_S)
    return kill


def _park_all(client: Client, kills: list[Kill], refs: list[Reference], timeout: float) -> None:
    """Until every reference ended and every cell's job is parked where its plan says (an eval
    cell: with the rest of its step done). A job that ends first never took its cell's step."""
    rt = client.runtime
    prefix = rt.settings.key_prefix
    deadline = time.monotonic() + timeout
    checked = 0.0
    while True:
        waiting = [k for k in kills if k.where is None]
        pipe = rt.redis.pipeline(transaction=False)
        for k in waiting:
            pipe.hget(parked_key(prefix, k.name), "where")
        for k, raw in zip(waiting, pipe.execute() if waiting else [], strict=True):
            if raw is not None:
                k.where = json.loads(raw)
        now = time.monotonic()
        if now - checked > STATUS_POLL_S:
            checked = now
            active = {r.id for r in rt.jobs.list(status=ACTIVE, limit=10_000)}
            missed = [k for k in kills if k.where is None and k.job_id not in active]
            if missed:
                raise AssertionError(
                    "jobs ended without reaching their cell's step: "
                    + "; ".join(
                        f"{k.name} ({k.plan.describe()}): {rt.jobs.get(k.job_id).status}" for k in missed
                    )
                )
            refs_done = all(r.job_id not in active for r in refs)
            if refs_done and all(k.where is not None and _quiet(client, k) for k in kills):
                return
        if now > deadline:
            stuck = [
                f"{k.name}: {k.where or rt.scratch.progress(k.job_id)}" for k in kills if k.where is None
            ]
            raise TimeoutError(f"cells not parked after {timeout:.0f}s: {stuck}")
        time.sleep(0.1)


def _quiet(client: Client, kill: Kill) -> bool:
    """An eval cell's job has nothing in flight but its parked evaluations."""
    if not kill.plan.parks_evaluation or kill.where is None:
        return True
    rt = client.runtime
    progress = rt.scratch.progress(kill.job_id)
    parked = min(int(rt.redis.get(count_key(rt.settings.key_prefix, kill.name)) or 0), kill.plan.hold)
    return (
        progress is not None
        and progress.step == kill.where["step"]
        and progress.done + parked >= progress.total
    )


def _kill(client: Client, worker: WorkerProcess, kills: list[Kill], owns: Any) -> None:
    """Check that each job parked at its cell's step kind in ``worker``, then kill it (SIGKILL)."""
    rt = client.runtime
    for k in kills:
        assert k.where is not None
        rec = rt.jobs.get(k.job_id)
        progress = rt.scratch.progress(k.job_id)
        where = k.where
        k.observed = (
            f"{where['role']} parked in step {where['step']} ({where['name']}, kind {step_kind(where['name'])}"
            + (f", point {where['point']}" if where.get("point") not in (None, "evaluation") else "")
            + (f", the {where['started']}th of {where['total']} evaluations" if "started" in where else "")
            + f"); job at step {rec.step_index} ({rec.status})"
            + (f", {progress.done}/{progress.total} done" if progress is not None else "")
        )
        assert step_kind(where["name"]) == k.cell.step, (k.name, k.observed)
        assert owns(k, int(where["pid"])), f"{k.name} parked in pid {where['pid']}, not where planned"
        # parked after the next step was launched, a job may go on to its end before the kill
        assert not rec.finished or k.plan.point == "launched", (k.name, k.observed)
        k.launches_before = rt.redis.llen(steps_key(rt.settings.key_prefix, k.job_id))
    killed = time.time()
    worker.kill()
    for k in kills:
        k.killed = killed


def _drained(client: Client, worker: WorkerProcess, kills: list[Kill], timeout: float) -> None:
    """Until ``worker`` (no longer consuming) runs only the parked ``advance`` of ``kills``' jobs
    and holds no other message: its kill then hits those jobs and no other."""
    host = _hostname(worker)
    jobs = {k.job_id for k in kills}
    inspect = client.app.control.inspect(destination=[host], timeout=5)
    deadline = time.monotonic() + timeout
    while True:
        active = (inspect.active() or {}).get(host, [])
        reserved = (inspect.reserved() or {}).get(host, [])
        others = [
            t
            for t in active
            if t.get("name") != "optiflow.advance" or not any(j in str(t.get("args")) for j in jobs)
        ]
        if not others and not reserved:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{host} still runs {[t.get('name') for t in others]} and holds {len(reserved)}"
            )
        time.sleep(0.2)


def _release(client: Client, kills: list[Kill]) -> None:
    rt = client.runtime
    rt.redis.delete(*[keys.lock(rt.settings.key_prefix, f"resume:{k.job_id}") for k in kills])


def _wait_ended(client: Client, kills: list[Kill], timeout: float) -> None:
    for k in kills:
        result = client.job(k.job_id).wait(timeout=timeout)
        k.ended = result.completed_at.timestamp() if result.completed_at else time.time()
        k.status, k.error, k.report = result.status, result.error, result.report


def _steps(client: Client, job_id: str) -> list[str]:
    """The job's steps in order (a step launched again after a kill counted once)."""
    raw = client.runtime.redis.lrange(steps_key(client.runtime.settings.key_prefix, job_id), 0, -1)
    seen: dict[int, str] = {}
    for item in raw:
        i, _, name = item.decode().partition(":")
        seen.setdefault(int(i), name)
    return [seen[i] for i in sorted(seen)]


def _finish_reference(client: Client, ref: Reference) -> None:
    result = client.job(ref.job_id).wait(timeout=60)
    ref.status, ref.report = result.status, result.report
    ref.steps = _steps(client, ref.job_id)
    assert result.status == "completed", f"reference {ref.doc}: {result.status} {result.error}"


def _judge(client: Client, kill: Kill, ref: Reference) -> None:
    kill.steps = _steps(client, kill.job_id)
    rt = client.runtime
    later = rt.redis.lrange(steps_key(rt.settings.key_prefix, kill.job_id), kill.launches_before, -1)
    kill.resumed = f"step {later[0].decode().partition(':')[0]}" if later else "nothing"
    spec = spec_of(kill.cell.doc, kill.name)
    prompt = spec.prompt
    tags = client.runtime.store.list_tags(prompt.ns, prompt.key)
    kill.temp_tags = [t for t in tags if t.startswith(temp_tag_prefix(kill.job_id))]
    kill.no_temp_tag = not kill.temp_tags
    if kill.report is None or ref.report is None:
        kill.diff = [f"no report: {kill.status} {kill.error}"]
        return
    fail_fast = bool(getattr(spec, "fail_fast", False))
    got = comparable(kill.report, kill.job_id, kill.name, fail_fast=fail_fast)
    want = comparable(ref.report, ref.job_id, ref.name, fail_fast=fail_fast)
    kill.diff = differences(got, want) + counts_agree(kill.report, ref.report)
    kill.same_report = not kill.diff
    kill.each_once = kill.report.stats.evaluations == ref.report.stats.evaluations


def run_references(
    env: Mapping[str, str],
    logdir: Path,
    client: Client,
    docs: Sequence[str],
    *,
    tag: str,
    timeout: float = 600,
) -> dict[str, Reference]:
    """Each document run undisturbed on a control and an eval worker of the chaos app (no
    parking): the reports the waves' jobs must reproduce, and the steps each document takes."""
    workers = [
        _worker(env, logdir, f"{tag}-control", "optiflow.control", park=False, pool="prefork", concurrency=2),
        _worker(env, logdir, f"{tag}-eval", "optiflow.eval", park=False, pool="threads", concurrency=16),
    ]
    try:
        for w in workers:
            w.wait_ready()
        refs = {}
        for doc in docs:
            ref = Reference(doc, f"chaos-{tag}-ref-{doc}")
            ref.job_id = client.submit(spec_of(doc, ref.name)).id
            refs[doc] = ref
        for ref in refs.values():
            client.job(ref.job_id).wait(timeout=timeout)
            _finish_reference(client, ref)
        return refs
    finally:
        for w in workers:
            w.stop()
