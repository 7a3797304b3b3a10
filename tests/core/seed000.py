"""An independent reference of seed 000's compress algorithm (``seeds/000``: ``OptimizeLoop._optimize``,
``_validate_combined``, ``_greedy_select``, ``EvalSummary.from_reports``), written from the seed's
text and nothing in ``optiflow``: plain data in, plain data out, one model call per evaluation.

The model is ``answer(bodies, sample_id, run) -> True | False | None`` (None: the call failed;
seed 000 counts it as not passed, ``r.success and r.score.passed``).

The one departure, documented in the README (Gates): a proposal that saves no tokens is not an
edit (optiflow does not evaluate it; seed 000's strategy would hand it over and the loop would
evaluate it and could even "accept" it). It is dropped here, before the loop, as a strategy may.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

Path = tuple[str, ...]
Bodies = Mapping[Path, str]
Answer = Callable[[Bodies, str, int], bool | None]


@dataclass(frozen=True)
class RefSection:
    path: Path
    body: str
    frozen: bool = False


@dataclass(frozen=True)
class RefModification:
    section_path: Path
    original_hash: str
    proposed_body: str
    token_reduction: int
    baseline_pass_rate: float
    candidate_pass_rate: float


@dataclass(frozen=True)
class RefRejected:
    section_path: Path
    token_reduction: int
    regression_count: int


@dataclass(frozen=True)
class RefSummary:
    pass_rate: float
    consistently_passed: frozenset[str]


@dataclass
class RefReport:
    baseline_pass_rate: float
    modifications: tuple[RefModification, ...]
    rejected: tuple[RefRejected, ...]
    baseline: list[list[bool | None]] = field(default_factory=list)
    """The baseline's answers, run by run (to judge a baseline with no evidence)."""
    calls: int = 0


def summary(reports: Sequence[Sequence[tuple[str, bool | None]]]) -> RefSummary:
    """``EvalSummary.from_reports``: the mean of the runs' pass rates, the samples passed in all."""
    if not reports:
        return RefSummary(0.0, frozenset())
    rates = [sum(1 for _, ok in rep if ok is True) / len(rep) for rep in reports]
    passed = [{sid for sid, ok in rep if ok is True} for rep in reports]
    return RefSummary(sum(rates) / len(rates), frozenset.intersection(*map(frozenset, passed)))


def optimize(
    sections: Sequence[RefSection],
    proposals: Mapping[Path, str],
    sample_ids: Sequence[str],
    answer: Answer,
    *,
    eval_runs: int,
    min_section_tokens: int,
    count_tokens: Callable[[str], int],
) -> RefReport:
    calls = 0
    base: dict[Path, str] = {s.path: s.body for s in sections}
    baseline_runs: list[list[bool | None]] = []

    def run_eval_multi(bodies: Bodies, *, keep: bool = False) -> RefSummary:
        nonlocal calls
        reports = []
        for run in range(eval_runs):
            rep = []
            for sid in sample_ids:  # each sample sent to EvalLoop, one reply each
                calls += 1
                rep.append((sid, answer(bodies, sid, run)))
            reports.append(rep)
            if keep:
                baseline_runs.append([ok for _, ok in rep])
        return summary(reports)

    # 1. baseline, eval_runs times
    baseline = run_eval_multi(base, keep=True)
    baseline_passed = baseline.consistently_passed

    # 2. proposals: mutable sections of at least min_section_tokens, by original tokens descending
    sized = [(count_tokens(s.body), i, s) for i, s in enumerate(sections) if not s.frozen]
    sized = [x for x in sized if x[0] >= min_section_tokens]
    sized.sort(key=lambda x: (-x[0], x[1]))
    edits = []
    for tokens, _, s in sized:
        body = proposals.get(s.path, s.body)
        if tokens - count_tokens(body) > 0:  # README: an edit that saves nothing is not one
            edits.append((s, body, tokens, count_tokens(body)))

    # 3. each edit alone
    modifications: list[RefModification] = []
    rejected: list[RefRejected] = []
    for s, body, original_tokens, proposed_tokens in edits:
        cand = run_eval_multi({**base, s.path: body})
        regression_count = len(baseline_passed - cand.consistently_passed)
        if regression_count == 0:
            modifications.append(
                RefModification(
                    section_path=s.path,
                    original_hash=hashlib.sha256(s.body.encode()).hexdigest(),
                    proposed_body=body,
                    token_reduction=original_tokens - proposed_tokens,
                    baseline_pass_rate=baseline.pass_rate,
                    candidate_pass_rate=cand.pass_rate,
                )
            )
        else:
            rejected.append(RefRejected(s.path, original_tokens - proposed_tokens, regression_count))

    # 4. combined, then greedy when the combination regresses
    if len(modifications) > 1:
        combined = run_eval_multi({**base, **{m.section_path: m.proposed_body for m in modifications}})
        if len(baseline_passed - combined.consistently_passed) != 0:
            accepted: list[RefModification] = []
            for mod in sorted(modifications, key=lambda m: -m.token_reduction):  # stable sort
                trial = [*accepted, mod]
                greedy = run_eval_multi({**base, **{m.section_path: m.proposed_body for m in trial}})
                regression_count = len(baseline_passed - greedy.consistently_passed)
                if regression_count == 0:
                    accepted.append(mod)
                else:
                    rejected.append(RefRejected(mod.section_path, mod.token_reduction, regression_count))
            modifications = accepted

    return RefReport(
        baseline_pass_rate=baseline.pass_rate,
        modifications=tuple(modifications),
        rejected=tuple(rejected),
        baseline=baseline_runs,
        calls=calls,
    )
