"""``make bench-real-optimize``: the optimize selection on a real sampled model's recorded runs.

**No-op study on real recorded runs** (no model call; done). ``bench/real_runs.json`` (``make
record-real``) holds 32 runs of every one of 48 train samples of ``examples/review-sentiment`` on
SmolLM2-135M-Instruct at temperature 0.7, the prompt unchanged (46 of 48 samples flaky). Each
replayed job shuffles every sample's 32 runs (seeded, without looking at them) into 4 disjoint groups
of 8: group 0 is the baseline, groups 1-3 are pseudo-candidates, grid points of a dummy param, all of
them the *same* prompt. The pure optimize workflow runs exactly as the Celery driver runs it
(``acceptance: auto``, which picks ``paired`` from the baseline's two runs; ``max_runs`` 8, the
groups' depth), each evaluation's outcome read from its group's recorded run instead of calling
the model. Runs of one sample are independent draws (the server kept no prompt cache), so this
decides as live no-op jobs would. Target: a pseudo-candidate crowned in at most 1 of at least 20
jobs. Today's rule (``acceptance: none``, one run) on the same recordings for contrast.

**The live optimize job on SmolLM2** (``--history FILE``): ``bench/real_optimize_job/job.yaml``, a
param search over temperature under ``acceptance: auto`` with ``splits: true`` (examples/review-sentiment,
its train split halved into train / val), run on real Celery workers on Redis by
``make bench-real-optimize-live`` (``bench/real_optimize_live.py``); this bench reads the history file
the job left and reports its selection and its held-out confirmation (target: lower bound > 0 and a
point estimate of at least +8 points). It is not launched by this bench.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.optimize_noise import drive
from optiflow.core.dataset import Dataset, Sample
from optiflow.core.evaluation import EvalResult
from optiflow.core.optimize.spec import OptimizeSpec
from optiflow.core.prompt import Prompt, Section
from optiflow.core.step import Step

RUNS_FILE = Path(__file__).resolve().parent / "real_runs.json"
GROUPS = 4


def spec_for(ids: Sequence[str], acceptance: Mapping[str, Any]) -> OptimizeSpec:
    return OptimizeSpec.model_validate(
        {
            "name": "review-sentiment-noop",
            "prompt": Prompt(
                ns="bench", key="real", sections=(Section(path=("task",), body="same"),), user="${q}"
            ),
            "dataset": Dataset(
                name="recorded", samples=tuple(Sample(id=s, input={"q": s}, expected="x") for s in ids)
            ),
            "check": {"type": "contains"},
            "model": {"model": "openai/smollm2", "params": {"group": 0}},
            "treatment": {"model_params": ["group"]},
            "optimizer": {"type": "grid", "space": {"group": list(range(1, GROUPS))}},
            "max_candidates_per_step": GROUPS - 1,
            "termination": {"max_iterations": 5},
            "acceptance": dict(acceptance),
        }
    )


def split(runs: Mapping[str, str], rng: random.Random) -> list[dict[str, str]]:
    groups: list[dict[str, str]] = [{} for _ in range(GROUPS)]
    for sid, seq in runs.items():
        chars = list(seq)
        rng.shuffle(chars)
        size = len(chars) // GROUPS
        for g in range(GROUPS):
            groups[g][sid] = "".join(chars[g * size : (g + 1) * size])
    return groups


def recorded(groups: Sequence[Mapping[str, str]]) -> Callable[[Step], list[EvalResult]]:
    def evaluate(step: Step) -> list[EvalResult]:
        out = []
        for t in step.targets:
            g = int(t.model_params.get("group", 0))  # type: ignore[arg-type]
            for run in t.run_indices:
                for sid in t.sample_ids:
                    ok = groups[g][sid][run] == "1"  # IndexError: the workflow asked past the recording
                    out.append(
                        EvalResult(
                            experiment_id=t.experiment.id,
                            sample_id=sid,
                            run=run,
                            passed=ok,
                            score=float(ok),
                            prompt_tokens=100,
                            completion_tokens=5,
                        )
                    )
        return out

    return evaluate


def study(runs: Mapping[str, str], jobs: int, seed: int, acceptance: Mapping[str, Any]) -> dict[str, Any]:
    ids = sorted(runs)
    spec = spec_for(ids, acceptance)
    crowned: list[int] = []
    calls: list[int] = []
    details = []
    for j in range(jobs):
        groups = split(runs, random.Random(f"{seed}:{j}"))
        h, n = drive(spec, recorded(groups), f"real{j}")
        calls.append(n)
        won = h.best_candidate_id != h.baseline_candidate_id
        crowned.append(int(won))
        details.append(
            {
                "job": j,
                "rule": h.acceptance_rule,
                "crowned": h.best_candidate_id if won else None,
                "verdicts": {
                    t.candidate_id: (t.selection.verdict, t.selection.pairs, round(t.selection.gain, 4))
                    for t in h.trials
                    if t.selection is not None
                },
            }
        )
    return {
        "acceptance": dict(acceptance),
        "jobs": jobs,
        "crowned_jobs": sum(crowned),
        "mean_calls": sum(calls) / len(calls),
        "rules_used": sorted({str(d["rule"]) for d in details}),
        "details": details,
    }


def live_lines(path: Path) -> list[str]:
    """The live job's selection and held-out confirmation, from its history file."""
    import yaml

    doc = yaml.safe_load(path.read_text())
    lines = [
        f"History file `{path.name}` (job {doc.get('jobId')}): `bench/real_optimize_job/job.yaml` on SmolLM2-135M "
        "(llama.cpp, one request at a time), run by `make bench-real-optimize-live`: `optiflow submit --wait` on "
        "real Celery workers on Redis (a control worker, an eval worker x 4 threads).",
        "",
        f"- acceptance: {doc.get('acceptanceDescription')}",
        f"- rule used: **{doc.get('acceptanceRule')}** ({doc.get('acceptanceRuleReason')})",
        "",
        "| iteration | candidate | configuration | verdict | gain on val | interval | pairs/sample | alpha_k |",
        "| ---: | --- | --- | --- | ---: | --- | ---: | ---: |",
    ]
    for it in doc.get("iterations") or []:
        for c in it.get("candidates") or []:
            sel = c.get("selection")
            if not sel:
                continue
            params = {k: v for k, v in (c.get("factorSuit") or {}).items() if k == "temperature"}
            lines.append(
                f"| {it['iterationNumber']} | {c['candidateId']} | {c.get('rationale') or params} | {sel['verdict']} | "
                f"{sel['gain']:+.1%} | [{sel['gain_low']:+.1%}, {sel['gain_high']:+.1%}] | {sel['pairs']} | {sel['alpha']:.3g} |"
            )
    test = doc.get("test") or {}
    conf = test.get("confirmation")
    lines += ["", f"Best: {doc.get('bestIteration', {}).get('candidateId')}; {doc.get('gain')}", ""]
    if conf:
        ok = conf["gain_low"] > 0 and conf["gain"] >= 0.08
        lines += [
            f"Held-out test split ({test.get('sampleCount')} samples): baseline {test['baseline']['score']:.3f}, "
            f"best {test['best']['score']:.3f}; paired gain **{conf['gain']:+.1%}** "
            f"[{conf['gain_low']:+.1%}, {conf['gain_high']:+.1%}] ({1 - conf['alpha']:.0%} anytime-valid) after "
            f"{conf['pairs']} pair(s) per sample: verdict {conf['verdict']}.",
            "",
            f"Target: lower bound > 0 and point estimate >= +8 points: **{'PASS' if ok else 'FAIL'}**.",
        ]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("bench/real_optimize.md"))
    ap.add_argument("--jobs", type=int, default=40)
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--history", type=Path, help="the live job's history file (YAML)")
    args = ap.parse_args(argv)
    data = json.loads(RUNS_FILE.read_text())
    runs: dict[str, str] = data["arms"]["baseline"]
    flaky = sum(1 for s in runs.values() if 0 < s.count("1") < len(s))
    paired = study(
        runs, args.jobs, args.seed, {"test": "auto", "first_runs": 2, "round_runs": 2, "max_runs": 8}
    )
    today = study(runs, args.jobs, args.seed, {"test": "none"})
    ok = paired["crowned_jobs"] <= 1 and paired["jobs"] >= 20
    live = live_lines(args.history) if args.history else None
    lines = [
        "# Optimize selection on a real sampled model (SmolLM2-135M, recorded runs)",
        "",
        f"Generated by `make bench-real-optimize` ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC). Recording: "
        f"`bench/real_runs.json` ({data['settings'].get('recorded_at')}), {len(runs)} train samples of "
        f"examples/review-sentiment x {len(next(iter(runs.values())))} runs of the unchanged prompt at "
        f"temperature 0.7; {flaky} of {len(runs)} samples flaky; pass rate {data['summary']['baseline']['pass_rate']:.1%}.",
        "",
        "## No-op study on real recorded runs (no model call)",
        "",
        f"{args.jobs} replayed optimize jobs (seed {args.seed}). Each splits every sample's 32 runs, shuffled, into "
        f"{GROUPS} disjoint groups of 8: the baseline and {GROUPS - 1} pseudo-candidates of the *same* prompt, "
        "run by the pure optimize workflow as the Celery driver runs it, outcomes read from the recording.",
        "",
        "| acceptance | rule used | jobs | jobs that crowned a pseudo-candidate | mean evaluations per job |",
        "| --- | --- | ---: | ---: | ---: |",
        f"| auto (first_runs 2, round_runs 2, max_runs 8) | {', '.join(paired['rules_used'])} | {paired['jobs']} | "
        f"**{paired['crowned_jobs']}** | {paired['mean_calls']:.0f} |",
        f"| none (today's rule, 1 run) | {', '.join(today['rules_used'])} | {today['jobs']} | {today['crowned_jobs']} | "
        f"{today['mean_calls']:.0f} |",
        "",
        f"Target: at most 1 of at least 20 replayed jobs crowns a pseudo-candidate: **{'PASS' if ok else 'FAIL'}**.",
        "",
        "## Live optimize job on SmolLM2",
        "",
        *(
            live
            or [
                "Not run: give `--history` the history file of `bench/real_optimize_job/job.yaml` run on the local "
                "server (see the module docstring)."
            ]
        ),
    ]
    args.out.write_text("\n".join(lines) + "\n")
    args.out.with_suffix(".json").write_text(json.dumps({"paired": paired, "today": today}, indent=1) + "\n")
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
