"""Recorded real runs for the gate's studies: ``python -m bench.record_runs``.

The no-op study of ``make bench-real`` needs many runs of the *unchanged* prompt on a real,
sampled model, and "a harmful edit is rejected" needs runs of an edit known to hurt. Paying for
them inside every bench run would cost an hour of model time; this records them once:

- ``baseline``: ``examples/review-sentiment`` as it is (``stable``, no override), ``--runs`` runs
  of every sample of the ``--split`` split (train);
- ``harmful``: the same with the harmful edit (:data:`HARMFUL_BODY` in the ``examples`` section:
  every worked answer says ``neutral``), ``--harmful-runs`` runs of the same samples;
- ``baseline-test``: the unchanged prompt on the held-out test split, ``--test-runs`` runs
  (the example's pass rate with its Wilson interval).

Every evaluation goes the production way: measure jobs submitted to real Celery workers on
Redis, each (sample, run) an ``evaluate`` task that renders the prompt under the job's overrides
and calls SmolLM2-135M-Instruct (llama.cpp server on 127.0.0.1) through litellm, judged by the
example's check. The per-(sample, run) pass/fail is read back from the job's trial items. Runs
are recorded in chunks of ``--chunk`` runs, alternating the arms, so a change in machine load
falls on both arms alike. Each chunk's measure job has drift off and its runs numbered from the
chunk's first run (a measure of a tag would otherwise continue the run indices of the tag's
earlier measures); its results are placed by run index relative to the job's ``first_run``
(:func:`bench.real_heldout.collect`).

Sampling: the server is started with a random ``--seed`` (recorded); requests carry no seed, so
llama-cpp-python draws each request's sampling seed from the previous one, and the server keeps
no prompt cache: every (sample, run) is an independent draw at the example's temperature.

Output: ``bench/real_runs.json`` (``--out``): settings, per arm ``{sample_id: "1101..."}`` (one
character per run: ``1`` passed, ``0`` failed, ``e`` the call errored), each arm's summary, the
harmful edit's effect, and every chunk's job id and wall time. :func:`load` reads it back.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

from bench.real_heldout import bench_drift, collect
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.dataset import Dataset
from optiflow.core.gate import Outcomes, RunRange
from optiflow.core.gate.outcomes import MISSING
from optiflow.core.measure.report import wilson_interval
from optiflow.core.measure.spec import MeasureSpec
from optiflow.core.model import ModelConfig
from optiflow.core.overrides import SectionOverride
from optiflow.core.prompt import Prompt
from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job
from optiflow.llm.local_model import LocalModelServer, find_gguf, free_port, missing_reason
from optiflow.settings import Settings
from tests.support.workers import ROOT, running_workers, worker_env

EXAMPLE = ROOT / "examples" / "review-sentiment" / "job.yaml"
OUT = ROOT / "bench" / "real_runs.json"

HARMFUL_PATH = ("examples",)
"""The section the harmful edit replaces."""
HARMFUL_BODY = "\n".join(
    f'Review: "{review}"\nAnswer: The sentiment of this review is neutral.'
    for review in (
        "Sturdy, comfortable and easy to assemble. We love this bench.",
        "The handle fell off the first time I used it. Very disappointed.",
        "Arrived late, but the pot is excellent and cooks evenly.",
        "Terrible vase, it cracked in the box. A waste of money.",
        "Great scissors, sharp and comfortable. Five stars.",
        "The clock stopped after two days. Awful.",
    )
)
""""Always answer neutral", said the way this model listens: six worked examples, clearly positive
and clearly negative reviews, each answered ``neutral`` (no answer then holds the expected label).
The same instruction written as a rule in the ``output`` section moved the pass rate by only a
few points: this model follows the examples' answer shape, and mostly ignores rules."""

ARMS = ("baseline", "harmful", "baseline-test")


def harmful_overrides(prompt: Prompt) -> tuple[SectionOverride, ...]:
    """The harmful edit as an override of ``prompt`` (valid while the section is unchanged)."""
    section = prompt.section(HARMFUL_PATH)
    return (SectionOverride(path=HARMFUL_PATH, expected_hash=section.hash, body=HARMFUL_BODY),)


# -- reading a recording --------------------------------------------------------------------------
@dataclass(frozen=True)
class Recording:
    """A ``real_runs.json``: ``arms[arm][sample_id]`` is that sample's runs, in order."""

    settings: dict[str, Any]
    arms: dict[str, dict[str, str]]

    def passes(self, arm: str) -> dict[str, list[bool]]:
        """Per sample, whether each run passed (an errored call counts as not passed)."""
        return {sid: [c == "1" for c in runs] for sid, runs in self.arms[arm].items()}

    def runs(self, arm: str) -> int:
        return min(len(r) for r in self.arms[arm].values())

    def groups(self, arm: str, size: int) -> list[dict[str, list[bool]]]:
        """The arm's runs cut into disjoint groups of ``size`` consecutive runs (the rest dropped):
        two groups are two independent measurements of the same prompt."""
        runs = self.runs(arm)
        return [
            {sid: passed[i : i + size] for sid, passed in self.passes(arm).items()}
            for i in range(0, runs - size + 1, size)
        ]


def load(path: Path = OUT) -> Recording:
    data = json.loads(path.read_text())
    return Recording(settings=data["settings"], arms=data["arms"])


# -- statistics for the summary -------------------------------------------------------------------
def summary(arm: dict[str, str]) -> dict[str, Any]:
    """Pass rate with the Wilson interval over every evaluation (what a measure job reports) and,
    since the runs of one sample are not independent of each other, a 95% bootstrap interval over
    samples; the spread of per-sample pass rates."""
    ids = sorted(arm)
    n = sum(len(arm[s]) for s in ids)
    passed = sum(arm[s].count("1") for s in ids)
    per_sample = {s: arm[s].count("1") / len(arm[s]) for s in ids}
    wilson = wilson_interval(passed, n)
    lo, hi = bootstrap([per_sample[s] for s in ids])
    rates = list(per_sample.values())
    return {
        "samples": len(ids),
        "evaluations": n,
        "passed": passed,
        "errors": sum(arm[s].count("e") for s in ids),
        "pass_rate": passed / n,
        "wilson95": [wilson.lower, wilson.upper],
        "bootstrap95_over_samples": [lo, hi],
        "always_passed": sum(1 for p in rates if p == 1),
        "never_passed": sum(1 for p in rates if p == 0),
        "flaky": sum(1 for p in rates if 0 < p < 1),
        "per_sample_pass_rate_deciles": [
            sorted(rates)[min(len(rates) - 1, (len(rates) * k) // 10)] for k in range(11)
        ],
    }


def bootstrap(values: Sequence[float], reps: int = 10_000, seed: int = 11) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of the mean, resampling samples (seeded: reproducible)."""
    rng = random.Random(seed)
    k = len(values)
    means = sorted(sum(rng.choices(values, k=k)) / k for _ in range(reps))
    return means[int(0.025 * reps)], means[int(0.975 * reps) - 1]


def effect(base: dict[str, str], edit: dict[str, str]) -> dict[str, Any]:
    """The edit's effect: mean over samples of (edit's pass rate - baseline's), paired by sample,
    with a 95% bootstrap interval over samples; samples that got worse / better."""
    ids = sorted(set(base) & set(edit))
    diffs = [edit[s].count("1") / len(edit[s]) - base[s].count("1") / len(base[s]) for s in ids]
    lo, hi = bootstrap(diffs)
    return {
        "mean_difference": sum(diffs) / len(diffs),
        "bootstrap95_over_samples": [lo, hi],
        "samples_worse": sum(1 for d in diffs if d < 0),
        "samples_better": sum(1 for d in diffs if d > 0),
        "samples_equal": sum(1 for d in diffs if d == 0),
    }


# -- recording ------------------------------------------------------------------------------------
@contextmanager
def redis_env(home: Path, name: str = "record") -> Iterator[dict[str, str]]:
    """Worker environment under a key prefix of its own (``optiflow-bench-<name>-...``); its keys,
    and the Celery results that appeared meanwhile, are deleted after."""
    import redis

    url = os.environ.get("OPTIFLOW_BENCH_REAL_REDIS_URL", "redis://127.0.0.1:6379/11")
    prefix = f"optiflow-bench-{name}-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(url)
    before = set(client.scan_iter(match="celery-task-meta-*", count=1000))
    try:
        yield worker_env(url, prefix, home)
    finally:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        keys += [k for k in client.scan_iter(match="celery-task-meta-*", count=1000) if k not in before]
        for i in range(0, len(keys), 1000):
            client.delete(*keys[i : i + 1000])
        client.close()


def point_at(config: ModelConfig, server: LocalModelServer) -> ModelConfig:
    return config.model_copy(update={"model": server.model, "api_base": server.api_base})


def chunk_spec(
    base: CompressSpec, model: ModelConfig, dataset: Dataset, arm: str, first: int, runs: int, split: str
) -> MeasureSpec:
    """The measure job of ``arm``'s runs ``first .. first+runs-1``: the harmful arm with the edit on
    its own tag, ``baseline-test`` on the test split; drift off and the runs numbered from
    ``first`` (:func:`bench.real_heldout.bench_drift`: a measure of a tag would otherwise continue
    the run indices of the tag's earlier measures)."""
    harmful = arm == "harmful"
    return MeasureSpec(
        name=f"record-{arm}",
        prompt=base.prompt,
        dataset=dataset,
        check=base.check,
        model=model,
        tag="bench-harmful" if harmful else "stable",
        baseline_overrides=harmful_overrides(base.prompt) if harmful else (),
        runs=runs,
        split="test" if arm == "baseline-test" else split,
        drift=bench_drift(first),
    )


def measure_chunk(client: Client, spec: MeasureSpec, arm: dict[str, str]) -> dict[str, Any]:
    """One measure job on the workers (the runs ``spec.drift.first_run ..`` of every sample, which
    ``arm`` holds the runs before of); its results placed in ``arm`` by run index relative to the
    job's ``first_run``. Raises when a (sample, run) result is missing."""
    if not spec.drift.off:  # with drift on, the job's runs would continue the tag's earlier measures'
        raise ValueError(f"{spec.name}: a recording's measure job has drift off (chunk_spec)")
    first = spec.drift.first_run
    ids = tuple(spec.sample_ids())
    r = RunRange(start=first, stop=first + spec.runs, sample_ids=ids)
    behind = [s for s in ids if len(arm.get(s, "")) != first]
    if behind:
        raise RuntimeError(
            f"runs {first}-{r.stop - 1}: {len(behind)} sample(s) do not have {first} runs yet, e.g. {behind[:3]}"
        )
    started = time.perf_counter()
    job = client.submit(spec)
    got = collect(client, job, r)
    wall = time.perf_counter() - started
    merged = Outcomes(runs={s: arm.get(s, "") for s in ids}).extend(got.outcomes)
    missing = [(s, i) for s in ids for i in range(first, r.stop) if merged.seq(s)[i] == MISSING]
    if missing:
        raise RuntimeError(
            f"job {job.id} (first_run {got.doc.first_run}): {len(missing)} (sample, run) results missing, "
            f"e.g. {missing[:3]}"
        )
    arm.update(merged.runs)
    items = got.items
    latencies = [x.latency_ms for x in items if x.success]
    return {
        "job_id": job.id,
        "runs": [first, r.stop - 1],
        "evaluations": len(items),
        "pass_rate": got.doc.pass_rate,
        "errors": got.doc.errors,
        "wall_s": round(wall, 1),
        "calls_per_s": round(len(items) / wall, 3),
        "latency_p50_ms": round(median(latencies), 1) if latencies else None,
        "prompt_tokens_mean": round(sum(x.prompt_tokens for x in items) / len(items), 1),
        "completion_tokens_mean": round(sum(x.completion_tokens for x in items) / len(items), 2),
    }


def plan(runs: dict[str, int], chunk: int) -> list[tuple[str, int, int]]:
    """``(arm, first run, runs)`` of every measure job: chunks of ``chunk`` runs, the arms
    alternating (``runs``: per arm, its runs in all)."""
    out: list[tuple[str, int, int]] = []
    for first in range(0, max(runs.values(), default=0), chunk):
        out += [(arm, first, min(chunk, total - first)) for arm, total in runs.items() if first < total]
    return out


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--runs", type=int, default=32, help="runs of the baseline on --split")
    parser.add_argument("--harmful-runs", type=int, default=24, help="runs of the harmful edit on --split")
    parser.add_argument("--test-runs", type=int, default=8, help="runs of the baseline on the test split")
    parser.add_argument("--chunk", type=int, default=4, help="runs per measure job")
    parser.add_argument("--split", default="train")
    parser.add_argument("--concurrency", type=int, default=4, help="eval worker threads")
    parser.add_argument("--limit", type=int, default=0, help="first N samples of each split (smoke runs)")
    return parser.parse_args(argv)


def arm_runs(args: argparse.Namespace) -> dict[str, int]:
    return {"baseline": args.runs, "harmful": args.harmful_runs, "baseline-test": args.test_runs}


@dataclass
class Session:
    """What :func:`record` measured: per arm its runs, every chunk, and how the model was served."""

    arms: dict[str, dict[str, str]]
    chunks: list[dict[str, Any]]
    model: ModelConfig
    server_threads: int
    server_seed: int


def record(args: argparse.Namespace, base: CompressSpec, full: Dataset) -> Session:
    """Every chunk of :func:`plan`, measured on real workers against a llama.cpp server."""
    arms: dict[str, dict[str, str]] = {a: {} for a in ARMS}
    chunks: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        server = LocalModelServer(port=free_port(), log=home / "llama-server.log")
        with server, redis_env(home) as env:
            model = point_at(base.model, server)
            settings = Settings(
                redis_url=env["OPTIFLOW_REDIS_URL"],
                key_prefix=env["OPTIFLOW_KEY_PREFIX"],
                home=home,
                database_url=env["OPTIFLOW_DATABASE_URL"],
            )
            jobs = plan(arm_runs(args), args.chunk)
            print(
                f"server {server.api_base} (pid {server.pid}, seed {server.seed}), {len(jobs)} measure jobs",
                flush=True,
            )
            with (
                running_workers(env, home, eval_workers=1, eval_concurrency=args.concurrency),
                Client(settings, embedded=False) as client,
            ):
                for arm, first, runs in jobs:
                    spec = chunk_spec(base, model, full, arm, first, runs, args.split)
                    chunk = {"arm": arm} | measure_chunk(client, spec, arms[arm])
                    chunks.append(chunk)
                    print(
                        f"  {arm:13} runs {first:2}-{first + runs - 1:2}: pass {chunk['pass_rate']:.1%}  "
                        f"errors {chunk['errors']}  {chunk['evaluations']} calls in {chunk['wall_s']:.0f}s "
                        f"({chunk['calls_per_s']:.2f}/s)",
                        flush=True,
                    )
    return Session(arms, chunks, model, server.n_threads, server.seed)


def settings_of(args: argparse.Namespace, base: CompressSpec, s: Session, wall: float) -> dict[str, Any]:
    """The recording's ``settings``: what was recorded, how, and on what."""
    from importlib.metadata import version

    return {
        "recorded_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}, {platform.machine()}",
        "example": "examples/review-sentiment",
        "prompt_sha256": sha256(EXAMPLE.parent / "prompt.yaml"),
        "dataset_sha256": sha256(EXAMPLE.parent / "dataset.jsonl"),
        "split": args.split,
        "runs": arm_runs(args),
        "chunk_runs": args.chunk,
        "model": s.model.model,
        "params": {k: v for k, v in s.model.params.items() if k != "api_key"},
        "check": base.check.model_dump(mode="json"),
        "gguf": find_gguf().name,
        "gguf_sha256": sha256(find_gguf()),
        "llama_cpp_python": version("llama-cpp-python"),
        "litellm": version("litellm"),
        "server_threads": s.server_threads,
        "server_seed": s.server_seed,
        "seed_handling": "server started with server_seed; requests carry no seed, so llama-cpp-python draws each "
        "request's sampling seed from the previous one; no prompt cache: every (sample, run) is an independent draw",
        "path": "measure jobs on real Celery workers (1 eval worker, threads) on Redis; evaluate task -> "
        "litellm -> llama.cpp server; per-(sample, run) results from the jobs' trial items, placed by run index; "
        "drift off (against: none), each job's runs numbered from its chunk's first run",
        "eval_concurrency": args.concurrency,
        "harmful_edit": {"path": list(HARMFUL_PATH), "body": HARMFUL_BODY},
        "model_time_s": round(sum(c["wall_s"] for c in s.chunks), 1),
        "wall_s": round(wall, 1),
        "encoding": "per run one character: 1 passed, 0 failed, e the call errored (counts as not passed)",
    }


def print_summary(summaries: dict[str, dict[str, Any]], harm: dict[str, Any] | None) -> None:
    for a, s in summaries.items():
        print(
            f"{a:13} {s['samples']} samples x {s['evaluations'] // s['samples']} runs: pass {s['pass_rate']:.1%}  "
            f"Wilson95 [{s['wilson95'][0]:.1%}, {s['wilson95'][1]:.1%}]  bootstrap95 over samples "
            f"[{s['bootstrap95_over_samples'][0]:.1%}, {s['bootstrap95_over_samples'][1]:.1%}]  "
            f"flaky {s['flaky']}  always {s['always_passed']}  never {s['never_passed']}  errors {s['errors']}"
        )
    if harm is not None:
        print(
            f"harmful edit: {harm['mean_difference']:+.1%} [{harm['bootstrap95_over_samples'][0]:+.1%}, "
            f"{harm['bootstrap95_over_samples'][1]:+.1%}]  worse {harm['samples_worse']}  better {harm['samples_better']}"
        )


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    reason = missing_reason()
    if reason:
        print(f"record_runs: the local model is not available: {reason}", file=sys.stderr)
        sys.exit(2)
    base = load_job(EXAMPLE)
    assert isinstance(base, CompressSpec)
    full = base.dataset
    if args.limit:
        keep = {*full.split(args.split).ids()[: args.limit], *full.split("test").ids()[: args.limit]}
        full = full.model_copy(update={"samples": tuple(x for x in full if x.id in keep)})
    started = time.perf_counter()
    s = record(args, base, full)
    wall = time.perf_counter() - started
    summaries = {a: summary(s.arms[a]) for a in ARMS if s.arms[a]}
    harm = effect(s.arms["baseline"], s.arms["harmful"]) if s.arms["harmful"] and s.arms["baseline"] else None
    data = {
        "settings": settings_of(args, base, s, wall),
        "summary": summaries,
        "harmful_effect": harm,
        "chunks": s.chunks,
        "arms": {a: dict(sorted(s.arms[a].items())) for a in ARMS if s.arms[a]},
    }
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print_summary(summaries, harm)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes) in {wall / 60:.1f} min")


if __name__ == "__main__":
    main()
