"""``make chaos``: the kill -9 fault round of tests/distributed/test_recovery.py, 20 times.

Each round starts a control and an eval worker on the real Redis, submits the example's compress
job (fail-fast off, so every number is deterministic), kills the eval worker (SIGKILL) once a
random evaluation step is a random fraction done, then the control worker, and starts both
again. It writes ``bench/chaos_results.md`` (and ``.json``): per round where the kill landed,
how long recovery took, and whether the report, the evaluation count and the temp tags match an
undisturbed run (the pure workflow with the same model answers).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import random
import sys
import tempfile
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from bench.compress import bench_env
from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job
from optiflow.settings import Settings
from tests.support.chaos import decisions, run_round
from tests.support.inline import run_inline
from tests.support.workers import ROOT, WorkerProcess, postgres_database

EXAMPLE = ROOT / "examples" / "support-bot" / "job.yaml"
STALE_AFTER_S = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=20261126)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "chaos_results.md")
    parser.add_argument(
        "--postgres",
        default="postgresql+psycopg://postgres@127.0.0.1:5432/test",
        help="server for the PostgreSQL rounds ('' = SQLite only); rounds alternate SQLite / PostgreSQL",
    )
    args = parser.parse_args()

    model = {"model": "optiflow/sim", "params": {"sim_latency_ms": 5}}
    spec = load_job(EXAMPLE, overrides={"fail_fast": False, "model": model})
    expected = run_inline(spec)
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
    sys.exit(0 if passed == len(rows) else 1)


if __name__ == "__main__":
    main()
