"""Fault scenarios shared by tests and ``make chaos``: a kill -9 round (tests/distributed/
test_rabbitmq.py), and a model provider that fails (transient errors to retry, permanent ones to
report; bench/chaos_faults.py).

One round: a control and an eval worker run a compress job; once a random step is a random
fraction done, the eval worker is killed with SIGKILL, then the control worker; both are started
again. The control worker finds the stalled job (``optiflow.distributed.recovery``) and launches
its pending step again; the job must end with the same report as an undisturbed run, with every
(experiment, sample, run) counted once and no temporary tag left. The crash matrix (every step
kind, each worker role killed separately) is tests/support/chaos_matrix.py and chaos_wave.py.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from optiflow.core.compress.report import OptimizationReport
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.experiment import TEMP_TAG_PREFIX
from optiflow.core.model import ModelConfig
from optiflow.core.optimize.spec import OptimizeSpec
from tests.support.workers import WorkerProcess

if TYPE_CHECKING:
    from collections.abc import Mapping

    from optiflow.interfaces.client import Client


@dataclass(frozen=True)
class Round:
    kill_step: int
    kill_fraction: float
    killed_at: str  # "step N, d/t evaluations" as observed when the eval worker was killed
    recovered_s: float  # from the kill to the job's end
    wall_s: float
    report: OptimizationReport
    temp_tags_left: list[str]


def small(spec: CompressSpec, samples: int = 22, runs: int = 2) -> CompressSpec:
    """The example cut to ``samples`` x ``runs``: still every branch (accepted, rejected at the
    candidate step and at greedy), a quarter of the evaluations. For tests that kill workers."""
    dataset = spec.dataset.model_copy(update={"samples": spec.dataset.samples[:samples]})
    return CompressSpec.model_validate(
        {**spec.model_dump(mode="json"), "dataset": dataset.model_dump(mode="json"), "eval_runs": runs}
    )


def decisions(report: OptimizationReport) -> tuple[object, ...]:
    return (
        report.baseline_pass_rate,
        tuple((m.section_path, m.token_reduction, m.candidate_pass_rate) for m in report.modifications),
        tuple((r.section_path, r.stage, r.token_reduction, r.regression_count) for r in report.rejected),
        report.total_token_reduction,
    )


def start_workers(env: Mapping[str, str], logdir: Path, tag: str, concurrency: int) -> list[WorkerProcess]:
    control = logdir / f"control-{tag}.log"
    procs = [
        WorkerProcess(env, "optiflow.control", pool="prefork", concurrency=1, log=control),
        WorkerProcess(
            env, "optiflow.eval", pool="threads", concurrency=concurrency, log=logdir / f"eval-{tag}.log"
        ),
    ]
    for p in procs:
        p.wait_ready()
    return procs


def run_round(
    env: Mapping[str, str],
    logdir: Path,
    client: Client,
    spec: CompressSpec,
    rng: random.Random,
    *,
    eval_steps: int,
    n: int,
    workers: list[WorkerProcess] | None = None,
    concurrency: int = 8,
    timeout: float = 240,
) -> tuple[Round, list[WorkerProcess]]:
    """One round on ``workers`` (a running control + eval pair; started when None). Returns the
    round and the pair started after the kill, which finished the job: the next round's pair.
    On an error every worker is stopped."""
    kill_step = rng.randint(1, eval_steps)
    fraction = rng.uniform(0.1, 0.9)
    control, evaluator = workers or start_workers(env, logdir, f"{n}a", concurrency)
    restarted: list[WorkerProcess] = []
    try:
        started = time.monotonic()
        job = client.submit(spec)
        killed_at = _wait_for(client, job.id, kill_step, fraction, timeout)
        killed = time.monotonic()
        evaluator.kill()
        time.sleep(rng.uniform(0.0, 0.5))
        control.kill()
        restarted = start_workers(env, logdir, f"{n}b", concurrency)
        result = job.wait(timeout=timeout).raise_for_error()
        ended = time.monotonic()
    except BaseException:
        for p in (control, evaluator, *restarted):
            p.stop()
        raise
    assert isinstance(result.report, OptimizationReport)
    tags = client.runtime.store.list_tags(spec.prompt.ns, spec.prompt.key)
    done = Round(
        kill_step=kill_step,
        kill_fraction=round(fraction, 3),
        killed_at=killed_at,
        recovered_s=ended - killed,
        wall_s=ended - started,
        report=result.report,
        temp_tags_left=[t for t in tags if t.startswith(TEMP_TAG_PREFIX)],
    )
    return done, restarted


def _wait_for(client: Client, job_id: str, step: int, fraction: float, timeout: float) -> str:
    """Until the job's ``step``-th evaluation step is ``fraction`` done (or past it)."""
    deadline = time.monotonic() + timeout
    steps_seen: list[int] = []
    while time.monotonic() < deadline:
        rec = client.runtime.jobs.get(job_id)
        if rec.finished:
            return f"job ended before step {step} ({rec.status})"
        progress = client.runtime.scratch.progress(job_id)
        if progress is not None and progress.total:
            if not steps_seen or steps_seen[-1] != progress.step:
                steps_seen.append(progress.step)
            if len(steps_seen) > step or (
                len(steps_seen) == step and progress.done >= fraction * progress.total
            ):
                return f"step {progress.step}, {progress.done}/{progress.total} evaluations"
        time.sleep(0.01)
    raise TimeoutError(f"job {job_id} did not reach evaluation step {step}")


# -- provider faults ------------------------------------------------------------------------------
AUTH_MESSAGE = "simulated authentication failure: invalid API key"


def with_provider_faults(spec: CompressSpec, *, rate: float, seed: int, retries: int = 8) -> CompressSpec:
    """``spec`` on a simulated model whose every attempt fails with probability ``rate`` with a
    transient error (429, 500 or timeout, seeded by ``seed``), for the evaluations and the
    compression proposals alike, with ``retries`` retries. The answers, once they come, are the
    undisturbed ones: the report must be too."""

    def faulty(model: ModelConfig) -> ModelConfig:
        params = {**model.params, "sim_error_rate": rate, "sim_error": "mixed", "sim_seed": seed}
        return model.model_copy(update={"params": params, "retries": retries})

    update: dict[str, object] = {"model": faulty(spec.model)}
    strategy_model = getattr(spec.strategy, "model", None)
    if isinstance(strategy_model, ModelConfig):
        update["strategy"] = spec.strategy.model_copy(update={"model": faulty(strategy_model)})
    return spec.model_copy(update=update)


def with_permanent_error(spec: CompressSpec) -> CompressSpec:
    """``spec`` on a simulated model that refuses every call (401: not retried)."""
    params = {**spec.model.params, "sim_error_rate": 1.0, "sim_error": "auth"}
    return spec.model_copy(update={"model": spec.model.model_copy(update={"params": params})})


def optimize_with_a_failing_candidate(spec: CompressSpec) -> OptimizeSpec:
    """A grid search over ``sim_error_rate`` on ``spec``'s prompt and samples: the candidate at 1.0
    (with ``sim_error: auth``) has every call refused; its trial must fail with the provider's
    message while the job completes."""
    data = {
        "kind": "optimize",
        "name": "provider-faults",
        "prompt": spec.prompt.model_dump(mode="json"),
        "dataset": spec.dataset.model_dump(mode="json"),
        "check": spec.check.model_dump(mode="json"),
        "model": {**spec.model.model_dump(mode="json"), "params": {**spec.model.params, "sim_error": "auth"}},
        "optimizer": {"type": "grid", "space": {"sim_error_rate": [0.0, 1.0]}},
        "termination": {"max_iterations": 2},
        "max_candidates_per_step": 2,
    }
    return OptimizeSpec.model_validate(data)
