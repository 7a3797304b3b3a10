"""``make chaos``: the kill -9 fault round of tests/distributed/test_recovery.py, 20 times, then
20 jobs on a provider that fails a fifth of the attempts (bench/chaos_faults.md).

Each round starts a control and an eval worker on the real Redis, submits the example's compress
job (fail-fast off, so every number is deterministic), kills the eval worker (SIGKILL) once a
random evaluation step is a random fraction done, then the control worker, and starts both
again. It writes ``bench/chaos_results.md`` (and ``.json``): per round where the kill landed,
how long recovery took, and whether the report, the evaluation count and the temp tags match an
undisturbed run (the pure workflow with the same model answers).

The provider-fault part runs the same job 20 times on fresh workers, each time on a simulated
model whose every attempt fails with probability 0.2 (429, 500 or timeout, seeded per job) for
the evaluations and the compression proposals, with 8 retries (backoff base 0.05 s): each job
must end with the undisturbed report and no evaluation error. Then the permanent error (401): a
job whose every call is refused ends failed with the provider's message, and an optimize job whose
one candidate is refused completes with that trial failed with the message. It writes
``bench/chaos_faults.md`` (and ``.json``); ``--rounds 0`` runs only this part.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import random
import sys
import tempfile
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from bench.compress import bench_env
from optiflow.core.compress.report import OptimizationReport
from optiflow.core.compress.spec import CompressSpec
from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job
from optiflow.settings import Settings
from tests.support.chaos import (
    AUTH_MESSAGE,
    decisions,
    optimize_with_a_failing_candidate,
    run_round,
    start_workers,
    with_permanent_error,
    with_provider_faults,
)
from tests.support.inline import run_inline
from tests.support.workers import ROOT, WorkerProcess, postgres_database

EXAMPLE = ROOT / "examples" / "support-bot" / "job.yaml"
STALE_AFTER_S = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=20261126)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "chaos_results.md")
    parser.add_argument("--fault-jobs", type=int, default=20)
    parser.add_argument("--fault-rate", type=float, default=0.2)
    parser.add_argument("--faults-out", type=Path, default=ROOT / "bench" / "chaos_faults.md")
    parser.add_argument(
        "--postgres",
        default="postgresql+psycopg://postgres@127.0.0.1:5432/test",
        help="server for the PostgreSQL rounds ('' = SQLite only); rounds alternate SQLite / PostgreSQL",
    )
    args = parser.parse_args()

    model = {"model": "optiflow/sim", "params": {"sim_latency_ms": 5}}
    spec = load_job(EXAMPLE, overrides={"fail_fast": False, "model": model})
    expected = run_inline(spec)
    passed = True
    if args.rounds:
        passed = kill_rounds(args, spec, expected)
    if args.fault_jobs:
        passed = provider_faults(args, spec, expected) and passed
    sys.exit(0 if passed else 1)


def kill_rounds(args: argparse.Namespace, spec: CompressSpec, expected: OptimizationReport) -> bool:
    rng = random.Random(args.seed)
    rows = []
    with (
        bench_env() as (redis_env, _),
        tempfile.TemporaryDirectory() as logs,
        contextlib.ExitStack() as stack,
    ):
        base_env = {
            **redis_env,
            "OPTIFLOW_STALE_AFTER_S": str(STALE_AFTER_S),
            "OPTIFLOW_RECOVER_INTERVAL_S": "1",
        }
        databases = {"sqlite": base_env["OPTIFLOW_DATABASE_URL"]}
        if args.postgres:
            databases["postgres"] = stack.enter_context(postgres_database(args.postgres))
        clients = {}
        for db, url in databases.items():
            settings = Settings(
                redis_url=base_env["OPTIFLOW_REDIS_URL"],
                key_prefix=base_env["OPTIFLOW_KEY_PREFIX"],
                home=Path(base_env["OPTIFLOW_HOME"]),
                database_url=url,
                stale_after_s=STALE_AFTER_S,
            )
            clients[db] = stack.enter_context(Client(settings, embedded=False))
        names = list(databases)
        workers: list[WorkerProcess] = []
        for n in range(args.rounds):
            db = names[n * len(names) // args.rounds]  # half the rounds on each database
            env = {**base_env, "OPTIFLOW_DATABASE_URL": databases[db]}
            if n and db != names[(n - 1) * len(names) // args.rounds]:
                for p in workers:  # the workers of the other database
                    p.stop()
                workers = []
            r, workers = run_round(
                env, Path(logs), clients[db], spec, rng, eval_steps=expected.stats.steps, n=n, workers=workers
            )
            ok = {
                "same_report": decisions(r.report) == decisions(expected),
                "each_evaluation_once": r.report.stats.evaluations == expected.stats.evaluations,
                "no_temp_tag_left": r.temp_tags_left == [],
            }
            evaluations = r.report.stats.evaluations
            rows.append({**asdict(r), "report": None, **ok, "evaluations": evaluations, "database": db})
            print(
                f"round {n + 1}/{args.rounds} ({db}): killed at {r.killed_at}; recovered in "
                f"{r.recovered_s:.1f}s; {'OK' if all(ok.values()) else f'FAILED {ok}'}",
                flush=True,
            )
        for p in workers:
            p.stop()
    passed = sum(all(r[k] for k in ("same_report", "each_evaluation_once", "no_temp_tag_left")) for r in rows)
    lines = [
        "# optiflow chaos: kill -9 workers in the middle of a job",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.machine()}, Python "
        f"{platform.python_version()} by `make chaos` (`python -m bench.chaos`, seed {args.seed}).",
        f"Job: `examples/support-bot` compress, fail-fast off, simulated model at 5 ms; eval worker "
        f"`-P threads -c 8`, control worker prefork 1; OPTIFLOW_STALE_AFTER_S={STALE_AFTER_S}.",
        "The first half of the rounds keep the jobs database on SQLite, the second on PostgreSQL;",
        "each round's restarted workers run the next round.",
        "Each round kills the eval worker (SIGKILL to its process group) once a random evaluation step",
        "is a random fraction done, then the control worker, and starts both again. Reference: the",
        f"pure workflow with the same model answers ({expected.stats.evaluations} evaluations, "
        f"{len(expected.modifications)} accepted, {len(expected.rejected)} rejected).",
        "",
        f"**{passed}/{len(rows)} rounds** ended with the reference report, every evaluation counted once "
        "and no temporary tag left.",
        "",
        "| round | database | killed at | recovered in s | wall s | evaluations | same report | each once | no temp tag |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for i, r in enumerate(rows, 1):
        lines.append(
            f"| {i} | {r['database']} | {r['killed_at']} | {r['recovered_s']:.1f} | {r['wall_s']:.1f} | {r['evaluations']} | "
            f"{r['same_report']} | {r['each_evaluation_once']} | {r['no_temp_tag_left']} |"
        )
    args.out.write_text("\n".join(lines) + "\n")
    args.out.with_suffix(".json").write_text(json.dumps(rows, indent=2, default=str))
    print(f"{passed}/{len(rows)} rounds passed; wrote {args.out}")
    return passed == len(rows)


RETRY_LINE = "model call to "


def _retries(logs: list[Path]) -> int:
    return sum(p.read_text(errors="replace").count(RETRY_LINE) for p in logs if p.exists())


def provider_faults(args: argparse.Namespace, spec: CompressSpec, expected: OptimizationReport) -> bool:
    rows: list[dict[str, object]] = []
    permanent: dict[str, object] = {}
    with bench_env() as (redis_env, _), tempfile.TemporaryDirectory() as logs:
        env = {**redis_env, "OPTIFLOW_RETRY_BACKOFF_S": "0.05"}
        settings = Settings(
            redis_url=env["OPTIFLOW_REDIS_URL"],
            key_prefix=env["OPTIFLOW_KEY_PREFIX"],
            home=Path(env["OPTIFLOW_HOME"]),
            database_url=env["OPTIFLOW_DATABASE_URL"],
        )
        workers = start_workers(env, Path(logs), "faults", concurrency=8)
        eval_log = [Path(logs) / "eval-faults.log"]
        try:
            with Client(settings, embedded=False) as client:
                for n in range(args.fault_jobs):
                    seed = args.seed + n
                    faulty = with_provider_faults(spec, rate=args.fault_rate, seed=seed)
                    before = _retries(eval_log)
                    started = time.monotonic()
                    result = client.submit(faulty).wait(timeout=600)
                    wall = time.monotonic() - started
                    retries = _retries(eval_log) - before
                    report = result.report
                    ok = {
                        "completed": result.ok,
                        "same_report": isinstance(report, OptimizationReport)
                        and decisions(report) == decisions(expected),
                        "no_error": isinstance(report, OptimizationReport) and report.stats.errors == 0,
                    }
                    calls = (
                        report.stats.model_calls + report.stats.proposal_calls
                        if isinstance(report, OptimizationReport)
                        else 0
                    )
                    rows.append(
                        {"job": n + 1, "seed": seed, "wall_s": wall, "calls": calls, "retries": retries, **ok}
                    )
                    share = retries / (calls + retries) if calls + retries else 0.0
                    print(
                        f"fault job {n + 1}/{args.fault_jobs}: {calls} calls, {retries} failed attempts retried "
                        f"({share:.1%}), {wall:.1f}s; {'OK' if all(ok.values()) else f'FAILED {ok} {result.error}'}",
                        flush=True,
                    )
                refused = client.submit(with_permanent_error(spec)).wait(timeout=300)
                permanent["job_status"] = refused.status
                permanent["job_error"] = refused.error
                permanent["job_ok"] = refused.status == "failed" and AUTH_MESSAGE in (refused.error or "")
                opt = client.submit(optimize_with_a_failing_candidate(spec)).wait(timeout=300)
                trials = list(getattr(opt.report, "trials", ()))
                failed = [t for t in trials if t.status == "failed"]
                permanent["optimize_status"] = opt.status
                permanent["trials"] = [(t.candidate_id, t.status, t.error) for t in trials]
                permanent["trial_ok"] = (
                    opt.ok and bool(failed) and all(AUTH_MESSAGE in (t.error or "") for t in failed)
                )
        finally:
            for p in workers:
                p.stop()
    passed = sum(all(r[k] for k in ("completed", "same_report", "no_error")) for r in rows)
    calls = sum(int(r["calls"]) for r in rows)  # type: ignore[call-overload]
    retries = sum(int(r["retries"]) for r in rows)  # type: ignore[call-overload]
    lines = [
        "# optiflow chaos: a flaky and a refusing model provider",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.machine()}, Python "
        f"{platform.python_version()} by `make chaos` (`python -m bench.chaos`, seed {args.seed}).",
        f"Job: `examples/support-bot` compress, fail-fast off, simulated model at 5 ms; every attempt "
        f"of every model call (evaluations and compression proposals) fails with probability "
        f"{args.fault_rate:g} with a transient error (429, 500 or timeout, seeded per job), retried up "
        "to 8 times with backoff (base 0.05 s). Workers: eval `-P threads -c 8`, control prefork 1, "
        "on Redis and SQLite. Reference: the pure workflow with the undisturbed model "
        f"({expected.stats.evaluations} evaluations, {len(expected.modifications)} accepted, "
        f"{len(expected.rejected)} rejected).",
        "",
        f"**{passed}/{len(rows)} jobs** ended with the undisturbed report and no evaluation error; "
        f"{retries} failed attempts were retried over {calls} model calls "
        f"({retries / (calls + retries) if calls + retries else 0:.1%} of the attempts).",
        "",
        "| job | seed | model calls | failed attempts retried | share of attempts | wall s | completed | same report | no error |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        c, t = int(r["calls"]), int(r["retries"])  # type: ignore[call-overload]
        lines.append(
            f"| {r['job']} | {r['seed']} | {c} | {t} | {t / (c + t) if c + t else 0:.1%} | {r['wall_s']:.1f} | "
            f"{r['completed']} | {r['same_report']} | {r['no_error']} |"
        )
    lines += [
        "",
        "## Permanent errors",
        "",
        f"- A job whose every call is refused (401, not retried) ends `{permanent.get('job_status')}`: "
        f"`{permanent.get('job_error')}` ({'OK' if permanent.get('job_ok') else 'FAILED'}).",
        f"- An optimize job (grid over `sim_error_rate` 0 / 1 with `sim_error: auth`) ends "
        f"`{permanent.get('optimize_status')}` with its trials "
        + "; ".join(f"`{c}` {s}" + (f" (`{e}`)" if e else "") for c, s, e in permanent.get("trials", []))  # type: ignore[attr-defined]
        + f" ({'OK' if permanent.get('trial_ok') else 'FAILED'}).",
        "",
    ]
    args.faults_out.write_text("\n".join(lines))
    args.faults_out.with_suffix(".json").write_text(
        json.dumps({"jobs": rows, "permanent": permanent}, indent=2, default=str)
    )
    print(f"{passed}/{len(rows)} fault jobs passed; wrote {args.faults_out}")
    return passed == len(rows) and bool(permanent.get("job_ok")) and bool(permanent.get("trial_ok"))


if __name__ == "__main__":
    main()
