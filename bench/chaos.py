"""``make chaos``: the crash matrix at random kill points, on SQLite and on PostgreSQL, then the
provider-fault jobs (bench/chaos_faults.py).

For each database, each document of the matrix (tests/support/chaos_matrix.py) is first run
undisturbed: its report is the reference and its steps say where each cell's kills may land. Then
``--kills`` waves per role (tests/support/chaos_wave.py): in each, every cell's job is parked at a
point drawn at random and the worker of that role is killed with SIGKILL, then replaced:

- eval: one of the cell's steps of its kind (any round), once a random fraction (5-95%) of its
  evaluations started, with 1 to 3 evaluations in flight;
- control: one of the cell's steps of its kind, and a random point of the control worker's part in
  it: ``idle`` (the step's evaluations in flight, the control worker holding nothing of the job),
  ``entry`` (its ``advance`` before reading the results), ``committed`` (the next action recorded,
  not launched) or ``launched`` (the next step published, the step's rows not stored).

Every job must end with its document's reference report, as many evaluations (each (experiment,
sample, run) once) and no temporary tag left. The jobs run the defaults: fail-fast on, the
ablation on. Writes ``bench/chaos_results.md`` (and ``.json``): one row per cell, role and
database.
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
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.chaos_faults import provider_faults
from bench.compress import bench_env
from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job
from optiflow.settings import Settings
from tests.support.chaos_matrix import MATRIX, ROLES, Cell, step_kind
from tests.support.chaos_wave import Kill, Plan, Reference, run_references, run_wave
from tests.support.inline import run_inline
from tests.support.workers import ROOT, postgres_database

EXAMPLE = ROOT / "examples" / "support-bot" / "job.yaml"
STALE_AFTER_S = 3
POINTS = ("idle", "entry", "committed", "launched")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kills", type=int, default=3, help="kills per cell, role and database")
    parser.add_argument("--seed", type=int, default=20261127)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "chaos_results.md")
    parser.add_argument("--fault-jobs", type=int, default=20)
    parser.add_argument("--fault-rate", type=float, default=0.2)
    parser.add_argument("--faults-out", type=Path, default=ROOT / "bench" / "chaos_faults.md")
    parser.add_argument(
        "--postgres",
        default="postgresql+psycopg://postgres@127.0.0.1:5432/test",
        help="server for the PostgreSQL half ('' = SQLite only)",
    )
    args = parser.parse_args()
    passed = True
    if args.kills:
        passed = matrix(args)
    if args.fault_jobs:
        model = {"model": "optiflow/sim", "params": {"sim_latency_ms": 5}}
        spec = load_job(EXAMPLE, overrides={"fail_fast": False, "model": model})
        passed = provider_faults(args, spec, run_inline(spec)) and passed
    sys.exit(0 if passed else 1)


def draw(rng: random.Random, cell: Cell, role: str, ref: Reference) -> Plan:
    """A random kill point of ``cell`` for ``role``, among the steps of its kind ``ref`` took."""
    occurrences = sum(1 for s in ref.steps if step_kind(s) == cell.step)
    return Plan(
        role,
        cell.step,
        occurrence=rng.randrange(occurrences),
        after=round(rng.uniform(0.05, 0.95), 2),
        hold=rng.randint(1, 3),
        point=rng.choice(POINTS) if role == "control" else "evaluation",
    )


def matrix(args: argparse.Namespace) -> bool:
    rng = random.Random(args.seed)
    started = time.monotonic()
    kills: list[tuple[str, Kill]] = []
    waves: list[dict[str, Any]] = []
    with bench_env() as (redis_env, _), contextlib.ExitStack() as stack:
        base = {
            **redis_env,
            "OPTIFLOW_STALE_AFTER_S": str(STALE_AFTER_S),
            "OPTIFLOW_RECOVER_INTERVAL_S": "0.5",
        }
        databases = {"sqlite": base["OPTIFLOW_DATABASE_URL"]}
        if args.postgres:
            databases["postgres"] = stack.enter_context(postgres_database(args.postgres))
        for db, url in databases.items():
            env = {**base, "OPTIFLOW_DATABASE_URL": url}
            settings = Settings(
                redis_url=env["OPTIFLOW_REDIS_URL"],
                key_prefix=env["OPTIFLOW_KEY_PREFIX"],
                home=Path(env["OPTIFLOW_HOME"]),
                database_url=url,
                stale_after_s=STALE_AFTER_S,
            )
            logs = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            with Client(settings, embedded=False) as client:
                docs = sorted({c.doc for c in MATRIX})
                refs = run_references(env, logs, client, docs, tag=f"{db}-ref")
                for role in ROLES:
                    for n in range(args.kills):
                        plans = [(c, draw(rng, c, role, refs[c.doc])) for c in MATRIX]
                        tag = f"{db}-{role}-{n + 1}"
                        wave = run_wave(env, logs, client, plans, tag=tag, refs=refs, timeout=900)
                        kills += [(db, k) for k in wave.kills]
                        ok = sum(k.ok for k in wave.kills)
                        waves.append({"database": db, "role": role, "wave": n + 1, **wave.phases, "ok": ok})
                        print(
                            f"{tag}: {ok}/{len(wave.kills)} cells with the reference report "
                            f"({wave.phases['wall']:.0f}s)",
                            flush=True,
                        )
                        for k in wave.kills:
                            if not k.ok:
                                print(
                                    f"  FAILED {k.name}: {k.observed}; {k.status} {k.error} {k.diff[:3]}",
                                    flush=True,
                                )
    write(args, kills, waves, time.monotonic() - started)
    return all(k.ok for _, k in kills)


def _point(k: Kill) -> str:
    w = k.where or {}
    name = w.get("name", "?")
    if k.plan.role == "eval" or k.plan.point == "idle":
        point = f"{name} {w.get('started', '?')}/{w.get('total', '?')} started"
        return point + (" (control idle)" if k.plan.role == "control" else "")
    return f"{name} {k.plan.point}"


def _one_per_line(data: dict[str, list[dict[str, Any]]]) -> str:
    """JSON with one wave or kill a line (a third of the indented size)."""
    parts = [
        f"{json.dumps(k)}: [\n" + ",\n".join(json.dumps(row, default=str) for row in rows) + "\n]"
        for k, rows in data.items()
    ]
    return "{\n" + ",\n".join(parts) + "\n}\n"


def _max(values: Any) -> str:
    known = [v for v in values if v is not None]
    return f"{max(known):.1f}" if known else "- (ended before)"


def write(
    args: argparse.Namespace, kills: list[tuple[str, Kill]], waves: list[dict[str, Any]], wall: float
) -> None:
    rows: dict[tuple[str, str, str], list[Kill]] = {}
    for db, k in kills:
        rows.setdefault((k.cell.id, k.plan.role, db), []).append(k)
    passed = sum(k.ok for _, k in kills)
    points = Counter(k.plan.point for _, k in kills if k.plan.role == "control")
    lines = [
        "# optiflow chaos: kill -9 a worker in the middle of every step kind",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.machine()}, Python "
        f"{platform.python_version()} by `make chaos` (`python -m bench.chaos`, seed {args.seed}), "
        f"in {wall / 60:.0f} minutes.",
        "Cells: tests/support/chaos_matrix.py (compress: baseline, ablation, candidates and their paired "
        "rounds, combined, greedy; optimize: baseline, iteration, race rounds, held-out test; measure; "
        "under each gate where the step occurs). Jobs run the defaults (fail-fast on, the ablation on) "
        "on the simulated model (5 ms; the paired cells on its seeded noise mode).",
        f"Each cell, role and database: {args.kills} kills (SIGKILL), each at a point drawn at random "
        "(tests/support/chaos_wave.py): eval, one of the cell's steps of its kind, once 5-95% of its "
        "evaluations started, 1-3 of them in flight; control, one of those steps and a point of the "
        f"control worker's part in it ({', '.join(f'{p} {n}' for p, n in sorted(points.items()))}). "
        "The killed worker is replaced; the other keeps running. "
        f"OPTIFLOW_STALE_AFTER_S={STALE_AFTER_S}.",
        "Reference: each document run undisturbed on the same database. Same report: every decision "
        "and figure but clock times, how each evaluation was answered (model, cache, fail-fast skip) "
        "and, under fail-fast, a strict rejection's regression count (a lower bound that depends on "
        "which evaluations finished before the mark; the counts must agree within it).",
        "",
        f"**{passed}/{len(kills)} kills** ended with the reference report, every evaluation counted once "
        "and no temporary tag left.",
        "",
        "| job | step | gate | role killed | database | kill points | same report | each once | no temp tag "
        "| kill to end s (max) | wall s (max) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (_, role, db), ks in rows.items():
        c = ks[0].cell
        n = len(ks)
        lines.append(
            f"| {c.job} | {c.step} | {c.gate} | {role} | {db} | {'; '.join(_point(k) for k in ks)} | "
            f"{sum(k.same_report for k in ks)}/{n} | {sum(k.each_once for k in ks)}/{n} | "
            f"{sum(k.no_temp_tag for k in ks)}/{n} | {_max(k.recovered_s for k in ks)} | "
            f"{max(k.wall_s for k in ks):.1f} |"
        )
    lines += [
        "",
        "## Waves",
        "",
        "| database | role | wave | workers ready s | parked s | wall s | cells ok |",
    ]
    lines += ["| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [
        f"| {w['database']} | {w['role']} | {w['wave']} | {w['workers_ready']:.0f} | {w['parked']:.0f} | "
        f"{w['wall']:.0f} | {w['ok']} |"
        for w in waves
    ]
    args.out.write_text("\n".join(lines) + "\n")
    data = [
        {
            "cell": k.cell.id,
            "job": k.cell.job,
            "step": k.cell.step,
            "gate": k.cell.gate,
            "document": k.cell.doc,
            "role": k.plan.role,
            "database": db,
            "plan": k.plan.__dict__,
            "parked": k.where,
            "observed": k.observed,
            "resumed": k.resumed,
            "status": k.status,
            "error": k.error,
            "same_report": k.same_report,
            "each_once": k.each_once,
            "no_temp_tag": k.no_temp_tag,
            "diff": k.diff,
            "recovered_s": None if k.recovered_s is None else round(k.recovered_s, 2),
            "wall_s": round(k.wall_s, 2),
        }
        for db, k in kills
    ]
    args.out.with_suffix(".json").write_text(_one_per_line({"waves": waves, "kills": data}))
    print(f"{passed}/{len(kills)} kills passed; wrote {args.out}")


if __name__ == "__main__":
    main()
