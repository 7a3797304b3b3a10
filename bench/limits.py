"""``make bench-limits``: the example compress job against a rate-limited provider, with and
without optiflow's fleet-wide limiter, on 1, 2 and 4 eval worker processes.

The provider is ``tests/support/ratelimited_server.py`` (an OpenAI-compatible HTTP server on
127.0.0.1 answering as the simulated model does, with its own requests-per-minute bucket shared by
every client, answering 429 with ``Retry-After`` past it), reached by litellm as
``openai/limited``. Every run starts from a cold eval cache. First a reference run on an unlimited
provider gives the decisions every run must reproduce; then each worker count runs with the
limiter on (``OPTIFLOW_MODEL_LIMITS`` = the provider's published rpm, shared in Redis) and off.

Measured per run: wall time; the provider's requests, accepted calls and 429s; model calls and
evaluations that ended in an error (retries exhausted); the accepted rate over the whole job and
while *saturated* (the limiter had a backlog: a new call would have waited, sampled every 0.25 s;
without the limiter: an interval in which the provider refused a call); the decisions against
the reference. Writes ``bench/limits_results.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis

from optiflow.core.compress.report import OptimizationReport
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.rate_limits import ModelLimits, RouteLimit
from optiflow.distributed.ratelimit import RedisLimiterBackend
from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job
from optiflow.settings import Settings
from tests.support.ratelimited_server import RateLimitedServer
from tests.support.workers import ROOT, running_workers, worker_env

EXAMPLE = ROOT / "examples" / "support-bot" / "job.yaml"
MODEL = "openai/limited"
ROUTE = "limited"
CONCURRENCY = 32


@dataclass
class Run:
    scenario: str
    eval_workers: int
    limiter: bool
    wall_s: float
    requests: int
    accepted: int
    rejected: int
    model_calls: int
    evaluations: int
    errors: int
    same_decisions: bool
    saturated_s: float = 0.0
    saturated_calls: int = 0
    samples: list[tuple[float, int, int, float]] = field(default_factory=list)

    @property
    def retries(self) -> int:
        """Attempts after a call's first (every 429 or other transient error that was retried)."""
        return max(0, self.requests - self.model_calls)

    @property
    def rejected_pct(self) -> float:
        return 100.0 * self.rejected / max(1, self.requests)

    @property
    def calls_per_s(self) -> float:
        return self.accepted / self.wall_s

    @property
    def saturated_per_s(self) -> float | None:
        return self.saturated_calls / self.saturated_s if self.saturated_s >= 2 else None


def decisions(report: OptimizationReport) -> tuple[object, ...]:
    """What the job decided (regression counts left out: with fail-fast they are lower bounds
    that depend on the order evaluations finish)."""
    return (
        report.baseline_pass_rate,
        tuple((m.section_path, m.token_reduction, m.candidate_pass_rate) for m in report.modifications),
        tuple((r.section_path, r.stage, r.token_reduction) for r in report.rejected),
        report.total_token_reduction,
    )


def job_spec(server: RateLimitedServer) -> CompressSpec:
    model = {"model": MODEL, "api_base": server.api_base, "params": {"api_key": "bench", "stream": False}}
    spec = load_job(EXAMPLE, overrides={"model": model, "strategy": {"type": "llm", "model": model}})
    assert isinstance(spec, CompressSpec)
    return spec


class Sampler:
    """Every 0.25 s: the provider's counters and the route's backlog (limiter on)."""

    def __init__(
        self, server: RateLimitedServer, backend: RedisLimiterBackend | None, route: RouteLimit
    ) -> None:
        self.server, self.backend, self.route = server, backend, route
        self.samples: list[tuple[float, int, int, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            stats = self.server.stats()
            backlog = self.backend.status(self.route).backlog_s if self.backend is not None else 0.0
            self.samples.append((time.monotonic(), stats["accepted"], stats["rejected"], backlog))
            self._stop.wait(0.25)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def saturated(self, limiter: bool) -> tuple[float, int]:
        """(seconds, calls accepted) over the intervals in which the provider was the bottleneck."""
        seconds, calls = 0.0, 0
        for (t0, a0, r0, b0), (t1, a1, r1, _) in zip(self.samples, self.samples[1:], strict=False):
            if (b0 > 0) if limiter else (r1 > r0):
                seconds += t1 - t0
                calls += a1 - a0
        return seconds, calls


def run_job(
    env: dict[str, str],
    home: Path,
    server: RateLimitedServer,
    spec: CompressSpec,
    workers: int,
    limits: ModelLimits | None,
) -> tuple[OptimizationReport, float, Sampler]:
    prefix = f"optiflow-bench-{uuid.uuid4().hex[:8]}"
    extra = {}
    if limits is not None:
        extra["OPTIFLOW_MODEL_LIMITS"] = json.dumps(
            {r.name: r.model_dump(exclude={"name"}, exclude_none=True) for r in limits.routes}
        )
    run_env = {**worker_env(env["OPTIFLOW_REDIS_URL"], prefix, home), **extra}
    settings = Settings(
        redis_url=run_env["OPTIFLOW_REDIS_URL"],
        key_prefix=prefix,
        home=home,
        database_url=run_env["OPTIFLOW_DATABASE_URL"],
    )
    client_redis = redis.Redis.from_url(run_env["OPTIFLOW_REDIS_URL"])
    backend = RedisLimiterBackend(client_redis, prefix) if limits is not None else None
    route = limits.routes[0] if limits is not None else RouteLimit(name=ROUTE, model=MODEL, rpm=1)
    try:
        with (
            running_workers(run_env, home, eval_workers=workers, eval_concurrency=CONCURRENCY),
            Client(settings, embedded=False) as client,
        ):
            server.reset()
            with Sampler(server, backend, route) as sampler:
                started = time.perf_counter()
                report = client.submit(spec).wait(timeout=1800).raise_for_error().report
                wall = time.perf_counter() - started
    finally:
        keys = list(client_redis.scan_iter(match=f"{prefix}*", count=1000))
        for i in range(0, len(keys), 1000):
            client_redis.delete(*keys[i : i + 1000])
        client_redis.close()
    assert isinstance(report, OptimizationReport)
    return report, wall, sampler


def measure(
    env: dict[str, str],
    home: Path,
    server: RateLimitedServer,
    spec: CompressSpec,
    workers: int,
    limits: ModelLimits | None,
    reference: tuple[object, ...] | None,
    scenario: str,
) -> tuple[Run, OptimizationReport]:
    report, wall, sampler = run_job(env, home, server, spec, workers, limits)
    stats = server.stats()
    sat_s, sat_calls = sampler.saturated(limits is not None)
    s = report.stats
    run = Run(
        scenario=scenario,
        eval_workers=workers,
        limiter=limits is not None,
        wall_s=wall,
        requests=stats["requests"],
        accepted=stats["accepted"],
        rejected=stats["rejected"],
        model_calls=s.model_calls + s.proposal_calls,
        evaluations=s.evaluations,
        errors=s.errors,
        same_decisions=reference is None or decisions(report) == reference,
        saturated_s=sat_s,
        saturated_calls=sat_calls,
        samples=sampler.samples,
    )
    print(
        f"  {scenario:<36} wall {wall:6.1f}s  requests {run.requests}  429s {run.rejected} retries {run.retries} "
        f"({run.rejected_pct:.1f}%)  errors {run.errors}  {run.calls_per_s:.1f} calls/s  "
        f"saturated {run.saturated_per_s or 0:.1f}/s over {sat_s:.0f}s  same decisions {run.same_decisions}",
        flush=True,
    )
    return run, report


def verdicts(runs: list[Run], rpm: float) -> list[str]:
    limit = rpm / 60
    out = []
    for r in runs:
        if r.scenario.startswith("reference"):
            continue
        if r.limiter:
            out.append(
                f"{r.scenario}: 429s {r.rejected} of {r.requests} requests = {r.rejected_pct:.2f}% "
                f"(target <= 1%) {'PASS' if r.rejected_pct <= 1 else 'FAIL'}"
            )
            sat = r.saturated_per_s
            if sat is None:
                out.append(f"{r.scenario}: never saturated for 2 s or more: no throughput verdict")
            else:
                out.append(
                    f"{r.scenario}: {sat:.1f} calls/s while saturated ({r.saturated_s:.0f} s) = "
                    f"{sat / limit:.2f}x the provider's {limit:.0f}/s (target >= 0.9x) "
                    f"{'PASS' if sat >= 0.9 * limit else 'FAIL'}"
                )
        out.append(
            f"{r.scenario}: same decisions as the unlimited run: {'PASS' if r.same_decisions else 'FAIL'}"
        )
    return out


def write(runs: list[Run], out: Path, notes: dict[str, Any]) -> None:
    lines = [
        "# optiflow rate-limit benchmark",
        "",
        f"Measured {notes['date']} on {notes['machine']} by `make bench-limits` (`python -m bench.limits`);",
        f"load average {notes['load'][0]:.2f} before, {notes['load'][1]:.2f} after (the 1-minute figure, bench",
        "included).",
        "",
        "Job: `examples/support-bot` compress (44 samples, eval_runs 3, fail-fast on, cold eval cache) with its",
        f"model and compression strategy on `{MODEL}`: `tests/support/ratelimited_server.py`, an OpenAI-compatible",
        f"server on 127.0.0.1 answering as `optiflow/sim` does after {notes['latency_ms']:g} ms, limited to",
        f"{notes['rpm']:g} requests per minute for all its clients together (a GCRA bucket of {notes['server_burst_s']:g} s, as",
        "providers quantize per-minute limits), 429 + `Retry-After` past it. Eval workers: `-P threads -c 32`",
        "each (32 to 128 threads, each able to send 5 calls/s at that latency: every configuration can",
        "exceed the limit), plus one control worker. Model retries: 2 (`ModelConfig.retries`).",
        "",
        f"Limiter on: `OPTIFLOW_MODEL_LIMITS='{notes['limits']}'` (the provider's published rpm; a bucket of",
        f"{notes['limiter_burst_s']:g} s), shared by the eval workers in Redis. Limiter off: each call retries its",
        "429s with jittered exponential backoff, as before this change.",
        "",
        "Requests = what the provider received (every attempt); 429s = what it refused; model calls = the",
        "job's calls (evaluations and proposals); retries = requests - model calls; errors = evaluations",
        "whose call still failed after its retries: they count as failing samples, so a baseline or a",
        "candidate loses samples to the provider, fail-fast rejects candidates on them and the decisions",
        "change (and the job ends sooner, having evaluated less). Saturated = the sampled intervals (0.25 s) in which a new call would have waited for",
        "the limiter (limiter on) or in which the provider refused a call (limiter off); the rate there is",
        "what the fleet got out of the provider while it was the bottleneck. The job's own steps (its",
        "proposals, a step's last few evaluations, the control worker's advance between steps) leave",
        "the provider idle at times, so the whole-job rate is lower.",
        "",
        "| scenario | eval workers | limiter | wall s | requests | 429s | 429 % | model calls | retries | errors |"
        " calls/s (job) | calls/s (saturated) | saturated s | same decisions |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in runs:
        sat = r.saturated_per_s
        lines.append(
            f"| {r.scenario} | {r.eval_workers} | {'on' if r.limiter else 'off'} | {r.wall_s:.1f} | {r.requests} | "
            f"{r.rejected} | {r.rejected_pct:.1f} | {r.model_calls} | {r.retries} | {r.errors} | {r.calls_per_s:.1f} | "
            f"{f'{sat:.1f}' if sat is not None else '-'} | {r.saturated_s:.0f} | "
            f"{'yes' if r.same_decisions else 'NO'} |"
        )
    lines += ["", "## Targets", ""] + [f"- {v}" for v in verdicts(runs, notes["rpm"])] + [""]
    out.write_text("\n".join(lines))
    rows = [
        {k: v for k, v in asdict(r).items() if k != "samples"} | {"saturated_per_s": r.saturated_per_s}
        for r in runs
    ]
    out.with_suffix(".json").write_text(json.dumps({"notes": notes, "runs": rows}, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "limits_results.md")
    parser.add_argument("--rpm", type=float, default=1200)
    parser.add_argument("--latency-ms", type=float, default=200)
    parser.add_argument("--server-burst-s", type=float, default=1.0)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument(
        "--burst-s", type=float, default=None, help="the limiter's bucket (default: optiflow's)"
    )
    parser.add_argument("--only-on", action="store_true", help="skip the runs without the limiter")
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    url = os.environ.get("OPTIFLOW_BENCH_REDIS_URL", "redis://127.0.0.1:6379/12")
    route = {"name": ROUTE, "model": MODEL, "rpm": args.rpm}
    if args.burst_s is not None:
        route["burst_s"] = args.burst_s
    limits = ModelLimits(routes=(RouteLimit.model_validate(route),))
    runs: list[Run] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        RateLimitedServer(latency_ms=args.latency_ms, burst_s=args.server_burst_s) as server,
    ):
        home = Path(tmp)
        env = worker_env(url, "unused", home)
        spec = job_spec(server)
        print("reference: unlimited provider, 2 eval workers", flush=True)
        ref_run, ref_report = measure(
            env, home, server, spec, 2, None, None, "reference (provider unlimited)"
        )
        runs.append(ref_run)
        reference = decisions(ref_report)
        server.configure(rpm=args.rpm)
        for workers in [int(w) for w in args.workers.split(",")]:
            label = f"{workers} eval worker{'s' if workers > 1 else ''}"
            print(f"{label}: limiter on, then off", flush=True)
            runs.append(
                measure(env, home, server, spec, workers, limits, reference, f"{label}, limiter on")[0]
            )
            if not args.only_on:
                off = measure(env, home, server, spec, workers, None, reference, f"{label}, limiter off")
                runs.append(off[0])
    notes = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}, {platform.machine()}",
        "load": [load_before, os.getloadavg()[0]],
        "rpm": args.rpm,
        "latency_ms": args.latency_ms,
        "server_burst_s": args.server_burst_s,
        "limits": json.dumps(
            {r.name: r.model_dump(exclude={"name"}, exclude_defaults=True) for r in limits.routes}
        ),
        "limiter_burst_s": limits.routes[0].burst_s,
    }
    write(runs, args.out, notes)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
