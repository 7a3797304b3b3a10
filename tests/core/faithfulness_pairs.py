"""The labelled suite of the faithfulness check (issue 31), read from ``faithfulness_pairs.jsonl``.

Each line: an original (a section of a shipped example, or ``original`` written inline), a
proposal, ``faithful`` (labelled by reading: does the proposal impose the same instructions?), the
``kind`` of pair, its ``source`` (``real-*``: SmolLM2's own proposals from
``bench/real_proposals.md``; ``derived-real-*``: made from them or from the pieces SmolLM2's
extractive runs chose among; ``written``), and a fixed ``split``: thresholds are chosen on
``tune``, accuracy is reported on ``held-out``. The lines are the data: a one-off script wrote
them, and labels revised since are revised here (their ``note`` says so).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from optiflow.core import faithfulness as F
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.optimize.spec import OptimizeSpec
from optiflow.jobfile import load_job

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@dataclass(frozen=True)
class Pair:
    id: int
    split: str
    example: str
    section: str
    proposal: str
    faithful: bool
    kind: str
    source: str
    note: str = ""
    original: str | None = None


FILES = (
    "faithfulness_pairs.jsonl",
    "faithfulness_pairs_held_out_3.jsonl",
    "faithfulness_pairs_held_out_4.jsonl",
    "faithfulness_pairs_held_out_5.jsonl",
    "faithfulness_pairs_held_out_6.jsonl",
    "faithfulness_pairs_held_out_7.jsonl",
    "faithfulness_pairs_held_out_8.jsonl",
    "faithfulness_pairs_held_out_9.jsonl",
    "faithfulness_pairs_held_out_10.jsonl",
    "faithfulness_pairs_held_out_11.jsonl",
    "faithfulness_pairs_held_out_12.jsonl",
    "faithfulness_pairs_held_out_13.jsonl",
)
"""The suite, and held-out-3 to -13: each written and labelled by a session that had not read the
check (nor, from -4 on, the earlier pairs), committed before the check first ran on it."""


def pairs() -> tuple[Pair, ...]:
    lines = [line for name in FILES for line in (HERE / name).read_text(encoding="utf-8").splitlines()]
    return tuple(Pair(**json.loads(line)) for line in lines if line.strip())


@cache
def job(example: str) -> tuple[CompressSpec | OptimizeSpec, F.FaithfulnessContext]:
    spec = load_job(ROOT / "examples" / example / "job.yaml")
    assert isinstance(spec, CompressSpec | OptimizeSpec)
    ctx = F.context_for(
        [s.body for s in spec.prompt.sections],
        [s.input for s in spec.dataset.samples],
        [s.expected for s in spec.dataset.samples],
    )
    return spec, ctx


def original(p: Pair) -> str:
    return p.original if p.original is not None else job(p.example)[0].prompt.section((p.section,)).body


def verdict(
    p: Pair, threshold: float = F.SUPPORT_THRESHOLD, sentence: float = F.SENTENCE_SUPPORT
) -> F.Faithfulness:
    return F.check(original(p), p.proposal, job(p.example)[1], threshold, sentence)


def confusion(
    ps: tuple[Pair, ...], threshold: float = F.SUPPORT_THRESHOLD, sentence: float = F.SENTENCE_SUPPORT
) -> Counter[str]:
    out: Counter[str] = Counter()
    for p in ps:
        v = verdict(p, threshold, sentence).faithful
        out[("honest" if p.faithful else "changed") + (" accepted" if v else " refused")] += 1
    return out


def table(c: Counter[str]) -> str:
    return (
        "                    accepted  refused\n"
        f"  labelled honest   {c['honest accepted']:8d} {c['honest refused']:8d}\n"
        f"  meaning changed   {c['changed accepted']:8d} {c['changed refused']:8d}"
    )


def accuracy(c: Counter[str]) -> float:
    n = sum(c.values())
    return (c["honest accepted"] + c["changed refused"]) / n if n else 0.0
