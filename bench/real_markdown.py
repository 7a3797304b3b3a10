"""``bench/real_results.md``: the results of ``make bench-real`` (:mod:`bench.real`) as markdown,
from the results' JSON alone (``python -m bench.real --from-json`` re-renders it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import mean
from typing import Any

from optiflow.core.faithfulness import Faithfulness

STRATEGY_WORDS = {
    "llm": "sections shortened by",
    "extractive": "sections cut to the pieces chosen by",
    "rule": "sections shortened without",
}


def verdict(t: Mapping[str, Any]) -> str:
    """A target's verdict: N/A (nothing to judge), NOT RUN, PASS or FAIL."""
    if not t.get("applicable", True):
        return "N/A"
    return "NOT RUN" if t["ok"] is None else "PASS" if t["ok"] else "FAIL"


def pct(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.1%}" if signed else f"{x:.1%}"


def interval(row: Mapping[str, Any]) -> str:
    return f"{row['drop']:+.1%} [{row['drop_low']:+.1%}, {row['drop_high']:+.1%}]"


def decisions_table(rows: Sequence[Mapping[str, Any]], label: str) -> list[str]:
    lines = [
        f"| {label} | verdict | pairs / sample | calls (baseline + candidate) | baseline pass | "
        "candidate pass | drop [95% bounds] | regressed (seed 000's reading) |",
        "| --- | --- | ---: | --- | ---: | ---: | --- | ---: |",
    ]
    for r in rows:
        v = r["verdict"] + (" (cap)" if r["capped"] else "")
        lines.append(
            f"| {r['label']} | {v} | {r['pairs']} | {r['baseline_runs'] + r['candidate_runs']} "
            f"({r['baseline_runs']} + {r['candidate_runs']}) | {pct(r['baseline_pass_rate'])} | "
            f"{pct(r['candidate_pass_rate'])} | {interval(r)} | {r['regressed']} |"
        )
    return lines


def strategy_of(data: Mapping[str, Any]) -> str:
    """The compress strategy the job ran ("" when no job ran)."""
    job = data.get("job")
    return str(job.get("strategy", "")) if job else ""


def markdown(data: Mapping[str, Any]) -> str:
    n, rec = data["notes"], data["recording"]
    strategy = strategy_of(data)
    lines = [
        "# optiflow's gate on a real model: SmolLM2-135M-Instruct at temperature 0.7"
        + (f", compress strategy `{strategy}`" if strategy else ""),
        "",
        f"Measured {n['date']} on {n['machine']} by `python -m bench.real{' ' + n['args'] if n['args'] else ''}` "
        f"(`make bench-real` runs it with `--out bench/real_results.md` only, `make bench-real-extractive` with "
        f"`--strategy extractive`), {n['bench_s'] / 60:.1f} minutes in all.",
    ]
    if n.get("model"):
        lines += [
            f"Model: `{n['gguf']}` served by llama-cpp-python {n['llama_cpp']} (`LocalModelServer`, "
            f"{n['server_threads']} CPU thread(s), one request at a time, seed {n['server_seed']}), called through "
            f"litellm {n['litellm']} as `{n['model']}` with `api_base`; params {n['params']}; {STRATEGY_WORDS.get(strategy, 'sections shortened by')} "
            f"the same model (strategy `{strategy}`, params {n['strategy_params']}). Tokens: tiktoken "
            f"`{n['encoding']}`.",
        ]
    lines += [
        f"Example `examples/review-sentiment`: check `{n['check']}`, eval_runs {n['eval_runs']}, gate "
        f"{n['gate']}.",
        f"Recorded runs: `{rec['file']}`, recorded {rec['recorded_at']} (`make record-real`, {rec['runs']} runs "
        f"per sample, params {rec['params']}, server seed {rec['server_seed']}); it is a recording of this "
        f"example's prompt: {'yes' if rec['prompt_matches'] else '**NO**'}, dataset: "
        f"{'yes' if rec['dataset_matches'] else '**NO**'}, model params: {'yes' if rec['params_match'] else '**NO**'}.",
        "",
        "## Targets",
        "",
        "| # | target | measured | verdict |",
        "| ---: | --- | --- | --- |",
        *(f"| {t['number']} | {t['target']} | {t['measured']} | **{verdict(t)}** |" for t in data["targets"]),
    ]
    lines += beside_markdown(data)
    lines += noop_markdown(data["noop"])
    lines += harmful_markdown(data["harmful"])
    if data.get("job") is not None:
        lines += job_markdown(data["job"], n)
    else:
        lines += ["", "## 3. The compress job", "", "Not run (`--skip-job`)."]
    if data.get("test") is not None:
        lines += test_markdown(data["test"])
    else:
        lines += ["", "## 4. The held-out test split", "", "Not run (`--skip-job`)."]
    lines += ["", "## What it printed", "", "```", *data["printed"], "```", ""]
    return "\n".join(lines)


def beside_markdown(data: Mapping[str, Any]) -> list[str]:
    """This run's compress job beside the runs of the other strategies found next to its results
    (``data["beside"]``, read when the file is written): issue 31 asks to see the ``extractive``
    strategy's result when SmolLM2's ``llm`` proposals save little."""
    others = data.get("beside") or []
    if not others or data.get("job") is None:
        return []
    this = {"file": "this run", **strategy_row(data)}
    lines = [
        "",
        "## Strategies side by side",
        "",
        "This run beside the results of the other compress strategies found next to its file: each row is its "
        "own run, with its own date and options (its file says the rest).",
        "",
        "| results | strategy | measured | options | train samples | accepted | saved of the mutable tokens | "
        "3. saved >= 30% | 4. test split |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for r in [this, *others]:
        lines.append(
            f"| {r['file']} | `{r['strategy']}` | {r['date']} | `{r['args'] or '-'}` | {r['samples']} | "
            f"{r['accepted']} | {r['saved']} of {r['mutable']} ({r['saved_share']:.1%}) | {r['target3']} | "
            f"{r['target4']} |"
        )
    return lines


def strategy_row(data: Mapping[str, Any]) -> dict[str, Any]:
    """One run's compress job in a few numbers, for :func:`beside_markdown`."""
    job, t = data["job"], data["job"]["tokens"]
    verdicts = {x["number"]: verdict(x) for x in data.get("targets", [])}
    return {
        "strategy": job.get("strategy", "-"),
        "date": data["notes"]["date"],
        "args": data["notes"].get("args", ""),
        "samples": job["samples"],
        "accepted": t["accepted"],
        "saved": t["saved"],
        "mutable": t["mutable"],
        "saved_share": t["saved_share"],
        "target3": verdicts.get(3, "-"),
        "target4": verdicts.get(4, "-"),
    }


def noop_markdown(z: Mapping[str, Any]) -> list[str]:
    g, d, p, rs = z["gate"], z["decisions"], z["predicted"], z["resampled"]
    pairs = [r["pairs"] for r in d]
    calls = [r["baseline_runs"] + r["candidate_runs"] for r in d]
    pw = z["power"]
    return [
        "",
        "## 1. No-op edits: the gate replayed over recorded runs of the unchanged prompt",
        "",
        f"The recording holds {z['recorded_runs']} runs of each of the {z['samples']} train samples under the "
        f"unchanged prompt. Each of {z['partitions']} partitions shuffles every sample's runs (seeded "
        f"`{z['seed']}-<k>`) into two disjoint groups of {z['group_runs']}, A and B. Decision `A->B` reads group A "
        "as the baseline and group B as the candidate, each in its shuffled order; decision `B'->A'` reads both "
        "groups backwards with the roles swapped. The gate is the example's (`auto`, margin "
        f"{g['margin']:.2f}, alpha {g['alpha']:.2f}, beta {g['beta']:.2f}, first round {g['first_runs']} runs, "
        f"+{g['round_runs']} per round) driven as the workflow drives it (`first_round`, `assess`, `decide` "
        f"after every round); its cap is {g['max_runs']} runs a side instead of the example's "
        f"{z['example_max_runs']}, because a group holds {z['group_runs']}: a decision still open there counts "
        "as a rejection, which can only add rejections. `auto` chose "
        f"{', '.join(z['gates_chosen'])} every time (first decision: {z['gate_reason']}).",
        "",
        f"- **paired: {z['rejections']} of {len(d)} no-op decisions rejected** ({z['early_rejections']} "
        f"early, {z['capped']} undecided at the cap); **strict (seed 000, {g['first_runs']} runs a side): "
        f"{z['strict_rejections']} of {len(z['strict'])}**, {z['strict_mean_regressions']:.1f} regressions "
        "per decision on average",
        f"- runs per decision: {mean(pairs):.1f} pairs per sample on average (from {min(pairs)} to {max(pairs)}), "
        f"{mean(calls):.0f} calls (from {min(calls)} to {max(calls)}), both sides counted, the baseline paid "
        "by each decision (a job shares it between its candidates)",
        f"- independence: each decision alone is an exact replay of a live no-op decision (its two sides read "
        "disjoint runs, assigned without looking at them), but the decisions are not independent of each other. "
        "Decisions of different partitions resample the same recorded runs. The two decisions of a partition "
        f"read its groups from opposite ends: they used no run in common in {z['disjoint_partitions']} of "
        f"{z['partitions']} partitions. So **at most 2 of the {len(d)} decisions are independent** (the two of "
        "one such partition); by construction, with up to "
        f"{z['group_runs']} runs a side allowed per decision, only 1 is.",
        f"- the rejection rate this recording gives, over {rs['decisions']} decisions of more partitions (seeded "
        f"`{rs['seed']}-<k>`; not a target): paired {rs['rejections'] / rs['decisions']:.1%} "
        f"({rs['rejections']}), {rs['mean_pairs']:.1f} pairs per sample on average; strict "
        f"{rs['strict_rejections'] / rs['decisions']:.1%}",
        f"- the gate's own prediction from the per-sample rates of all {z['recorded_runs']} runs: a no-op is "
        f"rejected with probability {p['rejection_at_group_cap']:.1%} at this cap "
        f"({p['runs_at_group_cap']:.1f} runs a side), {p['rejection_at_example_cap']:.1%} at the example's "
        f"({p['runs_at_example_cap']:.1f} runs a side)",
        f"- what the gate states after the first decision's first round (`assess`): smallest drop told from no drop "
        f"at 5% / 5% {pct(pw['detectable_drop'])}; no-op accepted with probability {pct(pw['no_op_accept'])}; a "
        f"fixed design would need {pw['fixed_runs']} runs a side; {pw['flaky_in_first_round']} of "
        f"{z['samples']} samples flaky in {g['first_runs']} runs",
        "",
        *decisions_table(d, "decision (paired)"),
        "",
        "| decision (strict) | verdict | regressions | calls (baseline + candidate) |",
        "| --- | --- | ---: | --- |",
        *(
            f"| {r['label']} | {r['verdict']} | {r['regressed']} | {r['baseline_runs'] + r['candidate_runs']} "
            f"({r['baseline_runs']} + {r['candidate_runs']}) |"
            for r in z["strict"]
        ),
    ]


def harmful_markdown(h: Mapping[str, Any]) -> list[str]:
    g, w = h["gate"], h["all_runs"]
    boot = w["bootstrap"]
    edit = h["edit"]
    pairs = [r["pairs"] for r in h["replays"]]
    return [
        "",
        "## 2. A harmful edit: the gate replayed over recorded runs of the edit",
        "",
        f"The harmful edit replaces the `{'.'.join(edit.get('path', []))}` section with six worked examples, "
        "clearly positive and clearly negative reviews, each answered `neutral`: no answer then holds the expected "
        f"label. Recorded: {h['baseline_runs']} runs of the unchanged prompt and {h['harmful_runs']} of the edit "
        f"on each of the {h['samples']} train samples. Each replay shuffles every sample's runs of both (seeded "
        f"`{h['seed']}-<k>`) and reads them in that order; the gate is the example's, max_runs {g['max_runs']}. The "
        "replays share the recorded runs, so they are not independent of each other.",
        "",
        f"- **rejected in {h['rejected']} of {len(h['replays'])} replays** ({h['early_rejected']} early: the "
        f"reject e-process crossed 1/beta), after {mean(pairs):.1f} pairs per sample on average (from "
        f"{min(pairs)} to {max(pairs)})",
        f"- the drop (baseline - edit) over the first {w['pairs']} recorded runs of both: baseline "
        f"{pct(w['baseline_pass_rate'])}, edit {pct(w['harmful_pass_rate'])}: **{w['drop']:+.1%}**, anytime-valid "
        f"95% bounds [{w['drop_low']:+.1%}, {w['drop_high']:+.1%}] (the gate's e-processes over all {w['pairs']} "
        f"pairs); over every recorded run, the edit's effect (edit - baseline, paired by sample) "
        f"{boot['mean_difference']:+.1%}, bootstrap 95% over samples [{boot['bootstrap95_over_samples'][0]:+.1%}, "
        f"{boot['bootstrap95_over_samples'][1]:+.1%}], {boot['samples_worse']} samples worse, "
        f"{boot['samples_better']} better",
        "",
        *decisions_table(h["replays"], "replay"),
    ]


def job_markdown(job: Mapping[str, Any], n: Mapping[str, Any]) -> list[str]:
    if job.get("failed"):
        return [
            "",
            "## 3. The compress job (train split, real Celery workers on Redis)",
            "",
            f"`examples/review-sentiment`'s job on {job['samples']} train samples, its own gate ({n['gate']}), "
            f"strategy `{job.get('strategy', '-')}`: **the job {job['failed']}** ({job['wall_s']:.0f} s). "
            f"Nothing was accepted: 0 of {job['tokens']['mutable']} mutable tokens saved.",
        ]
    rep, s, t = job["report"], job["report"]["stats"], job["tokens"]
    a = rep.get("assessment") or {}
    lines = [
        "",
        "## 3. The compress job (train split, real Celery workers on Redis)",
        "",
        f"`examples/review-sentiment`'s job on {job['samples']} train samples, its own gate ({n['gate']}), "
        f"1 eval worker x {job['concurrency']} threads, 1 control worker. Evaluations count every evaluate task; "
        "the server answers one request at a time, so calls/s is the server's.",
        "",
        f"- gate used: **{rep.get('gate')}** ({a.get('reason', '-')}); baseline pass rate "
        f"{pct(rep['baseline_pass_rate'])}, {a.get('flaky', '-')} of {job['samples']} samples flaky in the first "
        f"round; smallest drop the run budget can detect {pct(a.get('detectable_drop'))}; a no-op accepted "
        f"with probability {pct(a.get('no_op_accept'))}",
        f"- wall {job['wall_s']:.0f} s; evaluations {s['evaluations']}; model calls {s['model_calls']} + "
        f"{s['proposal_calls']} proposals ({job['calls_per_s']:.2f}/s); cache hits {s['cache_hits']}; fail-fast "
        f"skips {s['fail_fast_skipped']}; errors {s['errors']}; steps {s['steps']}",
        f"- **saved {t['saved']} of the {t['mutable']} tokens of the mutable sections ({t['saved_share']:.1%})**; "
        f"the report's total_token_reduction {rep['total_token_reduction']}; the whole prompt "
        f"{t['total']} section tokens",
    ]
    if rep.get("combined"):
        c = rep["combined"]
        lines.append(
            f"- all accepted edits together: drop {c['drop']:+.1%} [{c['drop_low']:+.1%}, {c['drop_high']:+.1%}], "
            f"{c['pairs']} pairs per sample"
        )
    lines += [
        "",
        "| section | tokens | proposed | outcome | drop [95% bounds] | pairs / sample | candidate pass | saved |",
        "| --- | ---: | ---: | --- | --- | ---: | ---: | ---: |",
    ]
    for row in job["sections"]:
        st = row.get("stats") or {}
        lines.append(
            f"| `{row['section']}` | {row['tokens']} | {row.get('proposed_tokens', '-')} | {row['outcome']} | "
            f"{interval(st) if st else '-'} | {st.get('pairs', '-')} | {pct(st.get('candidate_pass_rate'))} | "
            f"{row['saved']} |"
        )
    lines.append(f"| **mutable** | {t['mutable']} | | | | | | **{t['saved']}** ({t['saved_share']:.1%}) |")
    reasons = [(row["section"], row["reason"]) for row in job["sections"] if row.get("reason")]
    if reasons:
        lines += ["", *(f"- `{sec}`: {why}" for sec, why in reasons)]
    ab = rep.get("ablation")
    if ab:
        st = ab.get("stats") or {}
        lines += [
            "",
            f"- **ablation** (every mutable section emptied, -{ab['tokens']} tokens): "
            f"{'noticed (rejected)' if ab['noticed'] else 'NOT noticed (non-inferior)'}; "
            f"drop {interval(st) if st else '-'}, {st.get('pairs', '-')} pairs per sample; {ab['reason']}",
        ]
    return lines + proposals_markdown(job)


def proposals_markdown(job: Mapping[str, Any]) -> list[str]:
    """Every proposal (accepted, rejected, refused), original and proposal side by side, with the
    faithfulness check's verdict and sentence map as the report carries them."""
    lines = [
        "",
        "### Every proposal, original and proposal side by side",
        "",
        f"Strategy: `{job.get('strategy', '-')}`. Outcome as in the table above. Under each proposal, the "
        "faithfulness check's verdict and its sentence map (`optiflow/core/provenance.py`): each original "
        "sentence (o) kept, merged or dropped, each proposal sentence (p) with the original sentences it comes "
        "from and the share of its content words found there.",
    ]
    for row in job["sections"]:
        if row.get("proposed_body") is None:
            continue
        lines += [
            "",
            f"**`{row['section']}`** — {row['outcome']}",
            "",
            "| original | proposal |",
            "| --- | --- |",
            f"| {cell(row.get('original_body', ''))} | {cell(row['proposed_body'])} |",
            "",
            *sentence_map(row.get("faithfulness")),
        ]
    return lines


def sentence_map(measured: Mapping[str, Any] | None) -> list[str]:
    """The faithfulness verdict and the sentence map of one proposal, as markdown."""
    if not measured:
        return ["Faithfulness: not measured (no sentence map)."]
    f = Faithfulness.model_validate(measured)
    lines = [f"Faithfulness: {f.line()}."]
    m = f.sentences
    if m is None:
        return [*lines, "", "No sentence map in the report."]
    if m.original:
        lines += ["", "| o | original sentence | became |", "| ---: | --- | --- |"]
        for i, o in enumerate(m.original):
            into = ", ".join(f"p{j + 1}" for j in o.into)
            became = f"{o.status} {'as' if o.status == 'kept' else 'into'} {into}" if into else o.status
            became += f" (rule: {o.rule})" if o.rule and o.status == "dropped" else ""
            lines.append(f"| o{i + 1} | {cell(o.text)} | {cell(became)} |")
    if m.proposal:
        lines += ["", "| p | proposal sentence | from | support |", "| ---: | --- | --- | ---: |"]
        for j, ps in enumerate(m.proposal):
            src = ", ".join(f"o{i + 1}" for i in ps.sources) or "no source"
            lines.append(f"| p{j + 1} | {cell(ps.text)} | {src} | {ps.support:.0%} |")
    if m.original_count > len(m.original) or m.proposal_count > len(m.proposal):
        lines += [
            "",
            f"The map lists the first {len(m.original)} of {m.original_count} original and "
            f"{len(m.proposal)} of {m.proposal_count} proposal sentences.",
        ]
    notes = [f"- not verified by the dataset (a rule the job allowed to drop): {r}" for r in f.dropped_rules]
    if f.judge is not None:
        notes.append(f"- judge `{f.judge.model}`: {'same' if f.judge.same else 'differs'}; {f.judge.reason}")
    return lines + (["", *notes] if notes else [])


def cell(text: str) -> str:
    """A body as one markdown table cell (line breaks kept as <br>)."""
    return "<br>".join(" ".join(line.split()) for line in text.splitlines()).replace("|", "\\|")


def arm_row(label: str, x: Mapping[str, Any]) -> str:
    return (
        f"| {label} | {x['runs']} | {x['evaluations']} | {pct(x['pass_rate'])} | {pct(x['wilson'][0])} to "
        f"{pct(x['wilson'][1])} | {x['errors']} |"
    )


ARMS_HEADER = [
    "| measured | runs / sample | evaluations | pass rate | Wilson 95% | errors |",
    "| --- | ---: | ---: | ---: | --- | ---: |",
]


def rounds_line(t: Mapping[str, Any]) -> str:
    return f"- rounds: {len(t['rounds'])}, " + ", ".join(
        f"{r['calls']} calls in {r['wall_s']:.0f} s" for r in t["rounds"]
    )


def test_markdown(t: Mapping[str, Any]) -> list[str]:
    if not t.get("comparison", True):
        return stable_alone_markdown(t)
    g, s = t["gate"], t["stats"]
    lines = [
        "",
        "## 4. The held-out test split, before and after",
        "",
        f"`stable` (no overrides) and `{t['candidate_tag']}` (the job's accepted edits, applied) on the "
        f"{t['samples']} test samples, by measure jobs on the workers, round by round as the paired gate asks "
        f"(first round {g['first_runs']} runs each, then +{g['round_runs']}, at most {g['max_runs']}): the same "
        "runs each, paired per sample, decided by `decide` (margin "
        f"{g['margin']:.2f}, alpha {g['alpha']:.2f}). Wilson intervals are over evaluations.",
        "",
        *ARMS_HEADER,
        arm_row("`stable`", t["stable"]),
        arm_row(f"`{t['candidate_tag']}`", t["candidate"]),
        "",
        f"- **{t['verdict']}**{' (undecided at the cap)' if t['capped'] else ''}: {t['reason']}",
    ]
    if s:
        last = " (the last decision, still open)" if t.get("stalled") else ""
        lines.append(
            f"- paired difference (stable - candidate){last}: {s['drop']:+.1%}, anytime-valid 95% bounds "
            f"[{s['drop_low']:+.1%}, {s['drop_high']:+.1%}] over {s['pairs']} pairs per sample; non-inferior "
            f"when the upper bound is under {g['margin']:.0%}"
        )
    lines.append(
        f"- regressed (passed every stable run, not every candidate run): {len(t['regressed'])} {t['regressed']}; "
        f"fixed: {len(t['fixed'])} {t['fixed']}"
    )
    lines.append(rounds_line(t))
    return lines


def stable_alone_markdown(t: Mapping[str, Any]) -> list[str]:
    """Section 4 when the job accepted nothing: no comparison, ``stable`` alone for target 5."""
    g = t["gate"]
    lines = [
        "",
        "## 4. The held-out test split: `stable` alone",
        "",
        f"**{t['reason'][:1].upper() + t['reason'][1:]}** (target 4 is not applicable). For target 5, `stable` "
        f"(no overrides) alone on the {t['samples']} test samples by a measure job on the workers, "
        f"{g['max_runs']} runs of each (the most a comparison's arm could have made). Wilson intervals are over "
        "evaluations.",
        "",
        *ARMS_HEADER,
        arm_row("`stable`", t["stable"]),
        "",
    ]
    if t.get("stalled"):
        lines.append(f"- **{t['stalled']}**")
    lines.append(rounds_line(t))
    return lines
