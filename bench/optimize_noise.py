"""``make bench-optimize-noise``: does an optimize job tell improvement from noise?

Every job is the pure optimize workflow (:class:`~optiflow.core.optimize.workflow.OptimizeWorkflow`)
driven step by step in this process, exactly as the Celery driver drives it; only the evaluations
are drawn here, with the same pure functions the simulated provider's noise mode calls
(:mod:`optiflow.llm.noise`), instead of through litellm and Celery (thousands of jobs would take
hours that way; the workflow cannot tell).

A job: 44 samples whose pass probabilities are drawn from ``beta(3.3,3.3)`` (SmolLM2-135M at
temperature 0.7, ``SMOLLM2_LIKE``), fresh for every job; a grid optimizer over 6 variants of a model
param, 3 per iteration (2 iterations, 6 comparisons); each variant is its own prompt to the noise
model, so its runs are drawn independently of the baseline's.

- **No-op study**: every variant's per-sample probabilities are the baseline's, perturbed and
  re-centred so that its true mean is within +-0.5 points of the baseline's.
- **Real-gain study**: one variant (at a random place in the grid) gains 10 points, spread over
  the samples' fail rates (``p + (1 - p) g``); the others are no-ops.

Each study runs under ``acceptance: auto`` (which picks ``paired`` here: the baseline's two runs
disagree) and under today's rule (``acceptance: none``, ``eval_runs: 1``, and ``mann_whitney``
when scipy is installed). The fixed design with the same error rates runs, for the k-th comparison,
the normal-theory runs per side that tell a gain of ``effect`` from none at ``alpha_k`` / ``beta``
(the gate's yardstick, :func:`optiflow.core.gate.fixed_runs`), and the baseline as many as the
largest of them.

It also runs the shipped optimize examples on the deterministic simulated model under ``auto`` and
under ``none``, and replays ``examples/weak-helpdesk``'s history.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from statistics import mean
from typing import Any

from optiflow.core.actions import Finish
from optiflow.core.dataset import Dataset, Sample
from optiflow.core.evaluation import EvalResult
from optiflow.core.gate import GateSpec, fixed_runs
from optiflow.core.optimize.report import OptimizationHistory
from optiflow.core.optimize.selection import alpha_at
from optiflow.core.optimize.spec import OptimizeSpec
from optiflow.core.optimize.workflow import OptimizeWorkflow
from optiflow.core.prompt import Prompt, Section
from optiflow.core.step import Step, StepResults
from optiflow.llm.noise import SMOLLM2_LIKE, pass_probability, passes

N = 44
VARIANTS = 6
PER_STEP = 3
GAIN = 0.10
PROMPT = Prompt(
    ns="bench",
    key="noise",
    sections=(Section(path=("task",), body="Answer the question."),),
    user="${question}",
)
SAMPLES = tuple(Sample(id=f"s{i:02d}", input={"question": f"q{i}"}, expected="x") for i in range(N))
IDS = tuple(s.id for s in SAMPLES)
Probs = dict[int, list[float]]


def base_spec(acceptance: dict[str, Any], eval_runs: int = 1) -> OptimizeSpec:
    return OptimizeSpec.model_validate(
        {
            "name": "noise",
            "prompt": PROMPT,
            "dataset": Dataset(name="noise", samples=SAMPLES),
            "check": {"type": "contains"},
            "model": {"model": "optiflow/sim", "params": {"variant": 0}},
            "treatment": {"model_params": ["variant"]},
            "optimizer": {"type": "grid", "space": {"variant": list(range(1, VARIANTS + 1))}},
            "max_candidates_per_step": PER_STEP,
            "termination": {"max_iterations": 10},
            "acceptance": acceptance,
            "eval_runs": eval_runs,
        }
    )


def make_job(rng: random.Random, job: int, study: str) -> tuple[Probs, int | None]:
    """Per-variant per-sample pass probabilities (0 = the baseline) and the gaining variant."""
    base = [pass_probability(SMOLLM2_LIKE, f"job{job}", sid) for sid in IDS]
    target = mean(base)
    probs: Probs = {0: base}
    gainer = rng.randrange(1, VARIANTS + 1) if study == "gain" else None
    for v in range(1, VARIANTS + 1):
        if v == gainer:
            room = sum(1 - p for p in base) / N
            g = GAIN / room
            probs[v] = [p + (1 - p) * g for p in base]
            continue
        # a no-op: the same samples, perturbed, re-centred within +-0.5 points of the baseline
        noisy = [min(0.98, max(0.02, p + rng.gauss(0, 0.05))) for p in base]
        shift = target + rng.uniform(-0.004, 0.004) - mean(noisy)
        probs[v] = [min(1.0, max(0.0, p + shift)) for p in noisy]
    return probs, gainer


def evaluator(probs: Probs, job: int) -> Callable[[Step], list[EvalResult]]:
    def evaluate(step: Step) -> list[EvalResult]:
        out = []
        for t in step.targets:
            v = int(t.model_params.get("variant", 0))  # type: ignore[arg-type]
            p = probs[v]
            for run in t.run_indices:
                for sid in t.sample_ids:
                    ok = passes(p[int(sid[1:])], f"job{job}", f"v{v}", sid, run)
                    out.append(
                        EvalResult.model_construct(
                            experiment_id=t.experiment.id,
                            sample_id=sid,
                            run=run,
                            passed=ok,
                            score=float(ok),
                            output=None,
                            reason="",
                            prompt_tokens=100,
                            completion_tokens=10,
                            cost=0.0,
                            latency_ms=1.0,
                            ttft_ms=None,
                            error=None,
                            cached=False,
                            skipped=False,
                        )
                    )
        return out

    return evaluate


def drive(
    spec: OptimizeSpec, evaluate: Callable[[Step], list[EvalResult]], job_id: str
) -> tuple[OptimizationHistory, int]:
    wf = OptimizeWorkflow(spec, job_id)
    tr = wf.start()
    state, action = tr.state, tr.action
    calls = 0
    while isinstance(action, Step):
        evals = evaluate(action)
        calls += len(evals)
        tr = wf.advance(state, StepResults(step=action, evals=tuple(evals)))
        state, action = tr.state, tr.action
    assert isinstance(action, Finish), action
    assert isinstance(action.report, OptimizationHistory)
    return action.report, calls


def variant_of(h: OptimizationHistory) -> int | None:
    if h.best_candidate_id == h.baseline_candidate_id:
        return None
    return int(h.best_model_params["variant"])  # type: ignore[arg-type]


def study(name: str, rule: str, jobs: int, seed: int) -> dict[str, Any]:
    acceptance: dict[str, Any] = {"test": "auto"} if rule == "paired" else {"test": rule}
    spec = base_spec(acceptance)
    rng = random.Random(f"{seed}-{name}")
    crowned = gainer_crowned = wrong_crowned = 0
    calls: list[int] = []
    gaps: list[float] = []
    rules: set[str] = set()
    started = time.monotonic()
    for job in range(jobs):
        probs, gainer = make_job(rng, seed * 100_000 + job, name)
        base_mean = mean(probs[0])
        gaps += [mean(p) - base_mean for v, p in probs.items() if v not in (0, gainer)]
        h, n = drive(spec, evaluator(probs, seed * 100_000 + job), f"j{job}")
        rules.add(str(h.acceptance_rule))
        calls.append(n)
        v = variant_of(h)
        if v is not None:
            crowned += 1
            if v == gainer:
                gainer_crowned += 1
            else:
                wrong_crowned += 1
    return {
        "study": name,
        "rule": rule,
        "rules_used": sorted(rules),
        "jobs": jobs,
        "crowned": crowned / jobs,
        "gainer_crowned": gainer_crowned / jobs if name == "gain" else None,
        "no_gain_crowned": wrong_crowned / jobs,
        "mean_calls": mean(calls),
        "no_op_true_gap_points": [round(100 * min(gaps), 3), round(100 * max(gaps), 3)],
        "seconds": round(time.monotonic() - started, 1),
    }


def var_pp() -> float:
    """E[p(1-p)] for p ~ beta(3.3, 3.3): a b / ((a+b)(a+b+1))."""
    a = b = 3.3
    return a * b / ((a + b) * (a + b + 1))


def fixed_design_calls(spec: OptimizeSpec) -> float:
    """Calls per job of the fixed design with the same error rates (see the module docstring)."""
    a = spec.acceptance
    spread = math.sqrt(0.25 - var_pp())  # rates 0.5 +- spread: mean p(1-p) as the noise model's
    rates = [0.5 + (spread if i % 2 else -spread) for i in range(N)]
    per_k = [
        fixed_runs(
            GateSpec(mode="paired", alpha=min(0.49, alpha_at(a.alpha, k)), beta=a.beta, margin=a.effect),
            rates,
        )
        for k in range(1, VARIANTS + 1)
    ]
    return float(N * (max(per_k) + sum(per_k)))


def deterministic_examples() -> list[dict[str, Any]]:
    """The shipped optimize examples on the deterministic simulated model: auto vs none."""
    from optiflow.core.checks import run_check
    from optiflow.core.optimize.document import history_document
    from optiflow.core.optimize.replay import replay
    from optiflow.core.overrides import PromptOverrides
    from optiflow.core.step import RewriteReply, RewriteRequest
    from optiflow.files import load_dataset, load_prompt, read_yaml
    from optiflow.llm.compress import clean_output
    from optiflow.llm.rewrite import rewrite_messages
    from optiflow.llm.simulated import SimulatedModel

    sim = SimulatedModel()
    root = Path(__file__).resolve().parents[1] / "examples"
    rows = []
    for name in ("weak-helpdesk", "agent-policy"):
        folder = root / name
        data = dict(read_yaml(folder / "job.yaml"))
        data["prompt"] = load_prompt(folder / data["prompt"])
        data["dataset"] = load_dataset(folder / data["dataset"])
        outcome: dict[str, Any] = {"example": name}
        for rule in ("auto", "none"):
            spec = OptimizeSpec.model_validate(
                {**data, "acceptance": {**(data.get("acceptance") or {}), "test": rule}}
            )

            def evaluate(step: Step, spec: OptimizeSpec = spec) -> list[EvalResult]:
                out = []
                for target in step.targets:
                    ov = PromptOverrides(
                        ns=spec.prompt.ns,
                        key=spec.prompt.key,
                        tag=target.experiment.overrides_tag,
                        sections=target.overrides,
                        model_params=target.model_params,
                    )
                    model = spec.model.with_params(target.model_params)
                    for run in target.run_indices:
                        for sid in target.sample_ids:
                            sample = spec.dataset.by_id(sid)
                            rendered = spec.prompt.render(sample.input, overrides=ov)
                            reply = sim.reply(
                                rendered.messages(),
                                dict(model.params),
                                {"sample_id": sid, "run": run},
                                sleep=False,
                            )
                            score = run_check(spec.check, reply.text, sample.expected, input=sample.input)
                            out.append(
                                EvalResult(
                                    experiment_id=target.experiment.id,
                                    sample_id=sid,
                                    run=run,
                                    passed=score.passed,
                                    score=score.value,
                                    prompt_tokens=reply.prompt_tokens,
                                    completion_tokens=reply.completion_tokens,
                                )
                            )
                return out

            def answer(step: Step) -> tuple[RewriteReply, ...]:
                replies = []
                for req in step.rewrites:
                    assert isinstance(req, RewriteRequest)
                    reply = sim.reply(rewrite_messages(req), dict(req.model.params), {}, sleep=False)
                    replies.append(RewriteReply(id=req.id, text=clean_output(reply.text)))
                return tuple(replies)

            wf = OptimizeWorkflow(spec, f"det-{name}-{rule}")
            tr = wf.start()
            state, action = tr.state, tr.action
            calls = 0
            while isinstance(action, Step):
                evals = evaluate(action)
                calls += len(evals)
                tr = wf.advance(state, StepResults(step=action, evals=tuple(evals), rewrites=answer(action)))
                state, action = tr.state, tr.action
            assert isinstance(action, Finish) and isinstance(action.report, OptimizationHistory)
            h = action.report
            outcome[rule] = {
                "rule_used": h.acceptance_rule,
                "best": h.best_candidate_id,
                "new_best": [it.new_best for it in h.iterations],
                "score": [h.baseline_score, h.best_score],
                "calls": calls,
            }
            if rule == "auto":
                outcome["replay"] = replay(history_document(h)).lines()[0]
        outcome["same_decisions"] = (
            outcome["auto"]["best"] == outcome["none"]["best"]
            and outcome["auto"]["new_best"] == outcome["none"]["new_best"]
        )
        rows.append(outcome)
    return rows


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def write(
    out: Path, rows: list[dict[str, Any]], fixed: float, det: list[dict[str, Any]], args: Any, png: str | None
) -> None:
    paired = {r["study"]: r for r in rows if r["rule"] == "paired"}
    lines = [
        "# Optimize under noise: paired sequential selection vs today's rule",
        "",
        f"Generated by `make bench-optimize-noise` ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
        f"python {platform.python_version()}, {args.jobs} jobs per row, seed {args.seed}). "
        f"{N} samples per job, pass probabilities from `{SMOLLM2_LIKE}` (SmolLM2-like at temperature 0.7), "
        f"a grid of {VARIANTS} variants, {PER_STEP} per iteration ({VARIANTS} comparisons per job). "
        "The pure optimize workflow is driven in process; outcomes come from `optiflow.llm.noise` "
        "(the simulated provider's noise mode).",
        "",
        "Paired selection settings: `acceptance: auto` (it chose `paired` in every job: the baseline's two "
        "runs disagree), alpha 0.05 job-wide (alpha_k = alpha*6/(pi^2 k^2)), beta 0.05, effect 0.10, "
        "min_gain 0, first_runs 2, round_runs 2, max_runs 32.",
        "",
        "| study | rule | jobs | crowned a new best | crowned the +10-point variant | crowned a no-op variant (true gain within +-0.5 points) | mean model calls per job | s |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['study']} | {r['rule']} | {r['jobs']} | {pct(r['crowned'])} | {pct(r['gainer_crowned'])} | "
            f"{pct(r['no_gain_crowned'])} | {r['mean_calls']:.0f} | {r['seconds']} |"
        )
    noop = paired.get("no-op")
    gap = noop["no_op_true_gap_points"] if noop else None
    lines += [
        "",
        f"No-op variants' true mean minus the baseline's true mean: {gap[0]:+.3f} .. {gap[1]:+.3f} points "
        "(constructed within +-0.5)."
        if gap
        else "",
        "",
        "## Model calls against a fixed design",
        "",
        f"A fixed design with the same error rates (normal theory: for the k-th comparison the runs per side "
        f"that tell +{GAIN:.0%} from no gain at alpha_k and beta 0.05 on these samples' variance, the baseline as many "
        f"as the largest): **{fixed:.0f} calls per job**.",
        "",
    ]
    for name, r in paired.items():
        lines.append(
            f"- {name}: {r['mean_calls']:.0f} calls per job = **{r['mean_calls'] / fixed:.2f}x** the fixed design"
        )
    lines += ["", "## Deterministic model: decides as today", ""]
    lines += [
        "| example | rule used under auto | best (auto / none) | same decisions | calls (auto / none) | replay |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for d in det:
        lines.append(
            f"| {d['example']} | {d['auto']['rule_used']} | {d['auto']['best']} / {d['none']['best']} | "
            f"{'yes' if d['same_decisions'] else 'NO'} | {d['auto']['calls']} / {d['none']['calls']} | {d.get('replay', '')} |"
        )
    lines += [
        "",
        "Under `auto` the baseline gets a second run on the selection samples (that is how it sees the model "
        "is deterministic), which is the only difference in calls.",
    ]
    if png:
        lines += ["", f"![crowning rates]({png})"]
    out.write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(
        json.dumps({"rows": rows, "fixed_calls": fixed, "deterministic": det}, indent=2) + "\n"
    )


def plot(rows: list[dict[str, Any]], out: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax, name in zip(axes, ("no-op", "gain"), strict=True):
        rs = [r for r in rows if r["study"] == name]
        labels = [r["rule"] for r in rs]
        wrong = [100 * r["no_gain_crowned"] for r in rs]
        right = [100 * (r["gainer_crowned"] or 0) for r in rs]
        ax.bar(labels, wrong, color="#c0392b", label="crowned a no-op variant")
        ax.bar(labels, right, bottom=wrong, color="#27ae60", label="crowned the +10-point variant")
        ax.axhline(5, ls="--", c="k", lw=0.8)
        if name == "gain":
            ax.axhline(90, ls=":", c="g", lw=0.8)
        ax.set_ylim(0, 100)
        ax.set_title(f"{name} study")
        ax.set_ylabel("% of jobs")
    axes[0].legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return out.name


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("bench/optimize_noise.md"))
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-examples", action="store_true")
    ap.add_argument("--render", action="store_true", help="only re-render the .md/.png from the .json")
    ap.add_argument("--rules", default="paired,none,mann_whitney", help="comma-separated rules to run")
    args = ap.parse_args(argv)
    if args.render:
        saved = json.loads(args.out.with_suffix(".json").read_text())
        args.jobs = saved["rows"][0]["jobs"]
        png = plot(saved["rows"], args.out.with_suffix(".png"))
        write(args.out, saved["rows"], saved["fixed_calls"], saved["deterministic"], args, png)
        return 0
    rules = [r for r in args.rules.split(",") if r]
    try:
        import scipy  # type: ignore[import-untyped,unused-ignore]  # noqa: F401
    except ImportError:
        rules = [r for r in rules if r != "mann_whitney"]
    rows = []
    for name in ("no-op", "gain"):
        for rule in rules:
            r = study(name, rule, args.jobs, args.seed)
            print(json.dumps(r), file=sys.stderr, flush=True)
            rows.append(r)
    fixed = fixed_design_calls(base_spec({"test": "auto"}))
    det = [] if args.no_examples else deterministic_examples()
    png = plot(rows, args.out.with_suffix(".png"))
    write(args.out, rows, fixed, det, args, png)
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
