"""The provider-fault half of ``make chaos``: 20 jobs on a provider that fails a fifth of the
attempts (429, 500 or timeout, seeded per job), then the permanent error (401). Writes
``bench/chaos_faults.md`` (and ``.json``).

Each job runs the example's compress job (fail-fast off, so every number is deterministic) on
fresh workers, on a simulated model whose every attempt fails with probability 0.2 for the
evaluations and the compression proposals, with 8 retries (backoff base 0.05 s): each job must end
with the undisturbed report and no evaluation error. Then a job whose every call is refused ends
failed with the provider's message, and an optimize job whose one candidate is refused completes
with that trial failed with the message.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.compress import bench_env
from optiflow.core.compress.report import OptimizationReport
from optiflow.core.compress.spec import CompressSpec
from optiflow.interfaces.client import Client
from optiflow.settings import Settings
from tests.support.chaos import (
    AUTH_MESSAGE,
    decisions,
    optimize_with_a_failing_candidate,
    start_workers,
    with_permanent_error,
    with_provider_faults,
)

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
