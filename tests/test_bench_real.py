"""bench-real's held-out test split without the model (bench/real_heldout.py): the comparison
ends (decided, or ``stalled`` when a round adds no pair, never asking for the same runs again), a
measure job's results are read at their run index, and a job that accepted nothing is reported
as nothing to compare (target 4 N/A) with ``stable`` measured alone for target 5."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import bench.real_heldout as heldout
import bench.real_markdown as md
from bench.real import EXAMPLE, held_out_target
from optiflow.core.evaluation import EvalResult
from optiflow.core.gate import GateSpec, Outcomes, RunRange
from optiflow.core.gate.outcomes import MISSING

GATE = GateSpec(mode="paired", first_runs=3, round_runs=1, max_runs=8)
IDS = [f"s{i:02d}" for i in range(24)]


def recorded(seed: str, p: float = 0.8, runs: int = 8) -> dict[str, str]:
    rng = random.Random(seed)
    return {s: "".join("1" if rng.random() < p else "0" for _ in range(runs)) for s in IDS}


class Recorded:
    """A measure that answers each planned run from a recording, at the run index asked for;
    ``at_zero``: reads every range from run 0 instead (as a job whose run indices continue
    elsewhere was read before the fix), so later rounds land where results already are."""

    def __init__(self, *, at_zero: bool = False, limit: int = 50) -> None:
        self.src = {"stable": recorded("stable"), "candidate": recorded("candidate")}
        self.at_zero = at_zero
        self.limit = limit
        self.calls: list[Mapping[str, Sequence[RunRange]]] = []

    def __call__(self, plans: Mapping[str, Sequence[RunRange]]) -> dict[str, Outcomes]:
        self.calls.append(plans)
        if len(self.calls) > self.limit:
            raise AssertionError("the comparison kept asking for rounds")
        out: dict[str, Outcomes] = {}
        for arm, ranges in plans.items():
            new: dict[str, str] = {}
            for r in ranges:
                for sid in r.sample_ids:
                    seq = self.src[arm][sid]
                    start = 0 if self.at_zero else r.start
                    new[sid] = MISSING * start + seq[start : start + r.stop - r.start]
            out[arm] = Outcomes(runs=new)
        return out


def test_compare_decides_on_runs_at_their_index() -> None:
    measure = Recorded()
    r = heldout.compare(GATE, IDS, measure, say=lambda _: None)
    assert not r.stalled
    assert r.decision is not None and r.decision.decided
    assert r.rounds == len(measure.calls)
    res = heldout.result(GATE, IDS, "bench-candidate", r, [])
    assert res["comparison"] and res["verdict"] == r.decision.verdict
    assert res["stable"]["evaluations"] == res["candidate"]["evaluations"] >= 3 * len(IDS)


def test_compare_stops_when_a_round_adds_no_pair() -> None:
    """The loop that never ended: every later round's results land on runs already made."""
    measure = Recorded(at_zero=True)
    said: list[str] = []
    r = heldout.compare(GATE, IDS, measure, say=said.append)
    assert r.stalled.startswith("round 2 added no new pair")
    assert len(measure.calls) == 2
    assert heldout.pairs(r.arms["stable"], r.arms["candidate"], IDS) == GATE.first_runs * len(IDS)
    res = heldout.result(GATE, IDS, "bench-candidate", r, [])
    assert res["verdict"] == heldout.STALLED and res["reason"] == r.stalled
    t = held_out_target(res)
    assert md.verdict(t) == "FAIL" and "stalled: round 2 added no new pair" in t["measured"]
    assert any("added no new pair" in line for line in said)


def test_compare_stops_when_the_first_round_comes_back_empty() -> None:
    def nothing(plans: Mapping[str, Sequence[RunRange]]) -> dict[str, Outcomes]:
        return {arm: Outcomes() for arm in plans}

    r = heldout.compare(GATE, IDS, nothing, say=lambda _: None)
    assert r.rounds == 1 and r.stalled.startswith("round 1 added no new pair")
    assert heldout.result(GATE, IDS, "bench-candidate", r, [])["verdict"] == heldout.STALLED


def test_placed_reads_run_indices_relative_to_the_job() -> None:
    """A measure job whose runs start at ``first_run`` (drift continues a reference's indices):
    its run ``first_run + j`` is the range's run ``start + j``."""
    items = [
        EvalResult(experiment_id="m", sample_id="a", run=7, passed=True),
        EvalResult(experiment_id="m", sample_id="a", run=8, passed=False),
        EvalResult(experiment_id="m", sample_id="b", run=7, error="boom"),
        EvalResult(experiment_id="m", sample_id="b", run=8, skipped=True),
    ]
    r = RunRange(start=3, stop=5, sample_ids=("a", "b"))
    assert heldout.placed(items, r, first_run=7).runs == {"a": "...10", "b": "...e."}
    assert heldout.placed(items, r, first_run=0).runs == {"a": ".....", "b": "....."}


def test_nothing_accepted_measures_stable_alone() -> None:
    measure = Recorded()
    said: list[str] = []
    r = heldout.alone(IDS, GATE.max_runs, measure, say=said.append)
    assert len(measure.calls) == 1 and set(measure.calls[0]) == {"stable"}
    res = heldout.result(GATE, IDS, None, r, [{"calls": 8 * len(IDS), "wall_s": 1.0}])
    assert not res["comparison"] and res["candidate"] is None
    assert res["verdict"] == "not applicable" and res["reason"] == heldout.NOTHING_ACCEPTED
    assert res["stable"]["runs"] == GATE.max_runs
    assert res["stable"]["evaluations"] == GATE.max_runs * len(IDS)
    t4 = held_out_target(res)
    assert md.verdict(t4) == "N/A" and t4["ok"] is None
    assert t4["measured"] == heldout.NOTHING_ACCEPTED
    text = "\n".join(md.test_markdown(res))
    assert "`stable` alone" in text and "target 4 is not applicable" in text
    assert "bench-candidate" not in text and not said


def test_verdict_words() -> None:
    assert md.verdict({"ok": True}) == "PASS"
    assert md.verdict({"ok": False}) == "FAIL"
    assert md.verdict({"ok": None}) == "NOT RUN"
    assert md.verdict({"ok": None, "applicable": False}) == "N/A"


def test_measure_jobs_place_later_rounds_after_the_first(tmp_path: Path) -> None:
    """Through real measure jobs (embedded client, simulated model): stable against itself, two
    rounds; the second round's runs land at run indices 2 (not on the first round's), and the
    jobs leave no drift reference behind (a reference would offset a later job's run indices)."""
    from optiflow.core.compress.spec import CompressSpec
    from optiflow.core.model import ModelConfig
    from optiflow.distributed.drift import repository
    from optiflow.interfaces.client import Client
    from optiflow.jobfile import load_job
    from tests.support.workers import embedded_settings

    spec = load_job(EXAMPLE)
    assert isinstance(spec, CompressSpec)
    spec = spec.model_copy(update={"model": ModelConfig(model="optiflow/sim")})
    ids = spec.dataset.split("test").ids()[:4]
    with Client(embedded_settings(tmp_path)) as client:
        jobs = heldout.MeasureJobs(client, spec, spec.dataset, {"stable": "stable", "candidate": "stable"})
        one = jobs({arm: (RunRange(start=0, stop=2, sample_ids=ids),) for arm in ("stable", "candidate")})
        two = jobs({arm: (RunRange(start=2, stop=3, sample_ids=ids),) for arm in ("stable", "candidate")})
        refs = repository(client.runtime).current_for_tag(spec.prompt.ns, spec.prompt.key, "stable")
    for arm in ("stable", "candidate"):
        assert all(len(one[arm].seq(s)) == 2 and MISSING not in one[arm].seq(s) for s in ids)
        assert all(two[arm].seq(s)[:2] == ".." and two[arm].seq(s)[2] != MISSING for s in ids)
    merged = {arm: one[arm].extend(two[arm]) for arm in one}
    assert heldout.pairs(merged["stable"], merged["candidate"], ids) == 3 * len(ids)
    assert [r["calls"] for r in jobs.rounds] == [4 * len(ids), 2 * len(ids)]
    assert not refs


def test_every_proposal_shows_its_sentence_map() -> None:
    """The report's faithfulness verdict and sentence map under each proposal, side by side with
    the original: kept and dropped original sentences (with the rule a dropped one carried), each
    proposal sentence with its sources and support."""
    from optiflow.core.faithfulness import FaithfulnessContext, check

    original = "Classify the review. Never answer neutral. Ignore the reviewer's name."
    proposal = "Classify the review."
    f = check(original, proposal, FaithfulnessContext(labels=("positive", "negative")))
    assert f.sentences is not None and f.sentences.dropped()
    job = {
        "strategy": "extractive",
        "sections": [
            {"section": "persona", "outcome": "frozen"},
            {
                "section": "task",
                "outcome": "refused after 1 proposal(s), not evaluated",
                "original_body": original,
                "proposed_body": proposal,
                "faithfulness": f.model_dump(mode="json"),
            },
            {"section": "tone", "outcome": "accepted", "original_body": "a", "proposed_body": "b"},
        ],
    }
    text = "\n".join(md.proposals_markdown(job))
    assert "Strategy: `extractive`" in text
    assert f"| {original} | {proposal} |" in text
    assert f"Faithfulness: {f.line()}." in text
    assert "| o1 | Classify the review. | kept as p1 |" in text
    assert "| o2 | Never answer neutral. | dropped (rule: Never) |" in text
    assert "| o3 | Ignore the reviewer's name. | dropped |" in text
    assert "| p1 | Classify the review. | o1 | 100% |" in text
    assert "Faithfulness: not measured (no sentence map)." in text  # tone: none in the report
    assert "persona" not in text


def test_results_name_their_strategy_and_show_the_others(tmp_path: Path) -> None:
    from bench.real import beside

    def results(strategy: str, saved: int) -> dict[str, object]:
        tokens = {"mutable": 200, "total": 250, "saved": saved, "saved_share": saved / 200, "accepted": 1}
        return {
            "notes": {"date": "2026-11-27 10:00 UTC"},
            "job": {"strategy": strategy, "samples": 48, "tokens": tokens},
            "targets": [
                {"number": 3, "ok": saved >= 60, "applicable": True},
                {"number": 4, "ok": None, "applicable": False},
            ],
        }

    llm, extractive = results("llm", 20), results("extractive", 90)
    (tmp_path / "real_results.json").write_text(json.dumps(llm))
    (tmp_path / "real_results_extractive.json").write_text(json.dumps(extractive))
    (tmp_path / "real_results_other.json").write_text("[1, 2]")
    assert md.strategy_of(llm) == "llm" and md.strategy_of({"job": None}) == ""
    rows = beside(tmp_path / "real_results.md", llm)
    assert [r["file"] for r in rows] == ["`real_results_extractive.json`"]
    assert (
        rows[0]["strategy"] == "extractive" and rows[0]["target3"] == "PASS" and rows[0]["target4"] == "N/A"
    )
    assert beside(tmp_path / "real_results_extractive.md", extractive)[0]["strategy"] == "llm"
    table = "\n".join(md.beside_markdown({**llm, "beside": rows}))
    assert (
        "| this run | `llm` | 2026-11-27 10:00 UTC | `-` | 48 | 1 | 20 of 200 (10.0%) | FAIL | N/A |" in table
    )
    assert "| `real_results_extractive.json` | `extractive` |" in table
    assert md.beside_markdown({**llm, "beside": []}) == []
