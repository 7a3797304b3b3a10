"""The pure compress workflow run as the driver and the workers run it, without Celery or Redis.

What a job's evaluations share, emulated as ``optiflow.distributed`` keeps it:

- the order a step's evaluations are queued in (``driver._evaluation_order``: probes first, then
  runs x samples x targets interleaved under fail-fast) and the held evaluations (``driver._held``:
  they wait for the step's probes);
- evaluations in flight: ``inflight`` run at once, so an evaluation's lookup sees only what the
  evaluations before it that already finished recorded (``work.evaluate_one``: ``scratch.lookup``
  before the call, ``scratch.record`` after);
- the job scratch (``scratch``): fail-fast's regression marks, keyed by experiment id and never
  cleared during a job, and the eval cache, keyed by what the worker rendered and the run;
- each worker process's memory of a temporary tag's overrides (``Runtime.overrides``, keyed by
  tag and never forgotten), over ``processes`` processes taking evaluations in turn;
- the store: the driver writes each target's overrides under its tag before the step and
  deletes them after it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from optiflow.core.actions import Fail, Finish
from optiflow.core.compress.report import OptimizationReport
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.compress.workflow import CompressWorkflow
from optiflow.core.evaluation import EvalResult
from optiflow.core.overrides import SectionOverride
from optiflow.core.sections import SectionPath
from optiflow.core.step import EvalTarget, SectionEdit, Step, StepResults
from optiflow.distributed.driver import _evaluation_order, _held

Bodies = Mapping[SectionPath, str]
Answer = Callable[[Bodies, str, int], bool | None]
HARD_CAP = 500
"""Steps after which the emulation gives up (a workflow without a bound would loop forever)."""


def words(text: str) -> int:
    return len(text.split())


@dataclass
class Record:
    """What ``scratch.record`` writes once an evaluation finishes."""

    experiment_id: str
    key: tuple[object, ...] | None
    fresh: EvalResult | None
    regressed: bool
    probe: bool = False


@dataclass
class Fleet:
    spec: CompressSpec
    answer: Answer
    inflight: int = 1
    processes: int = 1
    calls: int = 0
    marks: set[str] = field(default_factory=set)
    cache: dict[tuple[object, ...], EvalResult] = field(default_factory=dict)
    memory: list[dict[str, tuple[SectionOverride, ...] | None]] = field(default_factory=list)
    store: dict[str, tuple[SectionOverride, ...]] = field(default_factory=dict)
    turn: int = 0

    def __post_init__(self) -> None:
        self.memory = [{} for _ in range(self.processes)]

    # -- one evaluation (work.evaluate_one) ---------------------------------------------------
    def _evaluate(self, target: EvalTarget, sid: str, run: int) -> tuple[EvalResult, Record]:
        process = self.memory[self.turn % self.processes]
        self.turn += 1
        tag, eid = target.experiment.overrides_tag, target.experiment.id
        if tag not in process:  # Runtime.overrides: resolved once per process, then remembered
            process[tag] = self.store.get(tag)
        bodies = {s.path: s.body for s in self.spec.prompt.sections}
        for ov in process[tag] or ():
            bodies[ov.path] = ov.body
        key = (tuple(sorted(bodies.items())), sid, run)
        guarded = target.guard is not None and sid in target.guard
        hit = self.cache.get(key)  # scratch.lookup: an answer already made, before any mark
        if hit is None and eid in self.marks:
            skipped = EvalResult(experiment_id=eid, sample_id=sid, run=run, skipped=True, reason="regressed")
            return skipped, Record(eid, None, None, regressed=False)
        if hit is not None:
            result = hit.model_copy(update={"experiment_id": eid, "run": run, "cached": True})
            fresh = None
        else:
            self.calls += 1
            ok = self.answer(bodies, sid, run)
            if ok is None:
                result = EvalResult(experiment_id=eid, sample_id=sid, run=run, error="503 overloaded")
            else:
                result = EvalResult(experiment_id=eid, sample_id=sid, run=run, passed=ok, score=float(ok))
            fresh = result if result.error is None else None
        regressed = guarded and not (result.success and result.passed)
        return result, Record(eid, key, fresh, regressed)

    def _apply(self, rec: Record) -> None:
        if rec.fresh is not None and rec.key is not None:
            self.cache[rec.key] = rec.fresh
        if rec.regressed:
            self.marks.add(rec.experiment_id)

    # -- one step (driver._launch_step, then the chord's header) ------------------------------
    def run_step(self, step: Step) -> tuple[EvalResult, ...]:
        for target in step.targets:  # driver: each tag's overrides written before the step
            self.store[target.experiment.overrides_tag] = target.overrides
        first, rest = _evaluation_order(step)
        held = _held(step) if step.index > 0 else set()
        queue = [(t, sid, run, True) for t, sid, run in first] + [
            (t, sid, run, False) for t, sid, run in rest
        ]
        running: deque[Record] = deque()
        results: list[EvalResult] = []
        for target, sid, run, probe in queue:
            if id(target) in held and not probe:  # held: waits for the step's probes to answer
                while any(r.probe for r in running):
                    self._apply(running.popleft())
            while len(running) >= self.inflight:
                self._apply(running.popleft())
            result, rec = self._evaluate(target, sid, run)
            rec.probe = probe
            running.append(rec)
            results.append(result)
        while running:
            self._apply(running.popleft())
        for target in step.targets:  # driver: the step's tags removed after it (memory stays)
            self.store.pop(target.experiment.overrides_tag, None)
        return tuple(results)


def proposals_of(
    spec: CompressSpec,
    step: Step,
    edits: Mapping[SectionPath, str],
    count_tokens: Callable[[str], int] = words,
) -> tuple[SectionEdit, ...]:
    return tuple(
        SectionEdit(
            path=p,
            original_hash=spec.prompt.section(p).hash,
            proposed_body=edits.get(p, spec.effective_body(p)),
            original_tokens=count_tokens(spec.effective_body(p)),
            proposed_tokens=count_tokens(edits.get(p, spec.effective_body(p))),
        )
        for p in step.propose
    )


@dataclass
class Run:
    outcome: OptimizationReport | Fail | None
    """The report, the Fail, or None when the job was still going after :data:`HARD_CAP` steps."""
    steps: list[Step]
    calls: int
    max_steps: int


def run_job(
    spec: CompressSpec,
    answer: Answer,
    edits: Mapping[SectionPath, str],
    *,
    inflight: int = 1,
    processes: int = 1,
    job_id: str = "job1",
    count_tokens: Callable[[str], int] = words,
    proposals: Mapping[SectionPath, SectionEdit] | None = None,
) -> Run:
    """Run a job to its end. The strategy proposes ``edits`` (token counts by ``count_tokens``),
    or hands over ``proposals`` as they are."""
    wf = CompressWorkflow(spec, job_id)
    bound: int = getattr(wf, "max_steps", HARD_CAP)  # (a workflow before issue 19 had none)
    fleet = Fleet(spec, answer, inflight=inflight, processes=processes)
    tr = wf.start(count_tokens)
    state, action = tr.state, tr.action
    steps: list[Step] = []
    while isinstance(action, Step):
        if len(steps) >= HARD_CAP:
            return Run(None, steps, fleet.calls, bound)
        steps.append(action)
        evals = fleet.run_step(action)
        made = (
            tuple(proposals[p] for p in action.propose)
            if proposals is not None
            else proposals_of(spec, action, edits, count_tokens)
        )
        results = StepResults(step=action, evals=evals, edits=made)
        tr = wf.advance(state, results)
        state, action = tr.state, tr.action
    if isinstance(action, Fail):
        return Run(action, steps, fleet.calls, bound)
    assert isinstance(action, Finish) and isinstance(action.report, OptimizationReport)
    return Run(action.report, steps, fleet.calls, bound)
