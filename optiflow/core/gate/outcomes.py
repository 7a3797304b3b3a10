"""Per-sample outcomes of one experiment, in run order: what every gate decides from.

One character per run index: ``1`` passed, ``0`` failed, ``e`` the call errored (after retries),
``.`` no result (not run yet, or skipped by fail-fast). Sequences, not counts, because the paired
test pairs the baseline's k-th run of a sample with the candidate's k-th run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import Field, field_validator

from optiflow.core.base import Frozen
from optiflow.core.evaluation import EvalResult

PASS, FAIL, ERROR, MISSING = "1", "0", "e", "."
_ALPHABET = frozenset(PASS + FAIL + ERROR + MISSING)


class Outcomes(Frozen):
    """``runs[sample_id]`` is the sample's outcome string (see the module docstring)."""

    runs: dict[str, str] = Field(default_factory=dict)

    @field_validator("runs")
    @classmethod
    def _alphabet(cls, value: dict[str, str]) -> dict[str, str]:
        for sid, seq in value.items():
            if not set(seq) <= _ALPHABET:
                raise ValueError(f"outcomes of {sid!r}: only '1', '0', 'e' and '.' are allowed, got {seq!r}")
        return value

    @classmethod
    def from_results(cls, results: Iterable[EvalResult], sample_ids: Iterable[str] = ()) -> Outcomes:
        """From one experiment's results (any order); ``sample_ids`` adds samples with no result."""
        cells: dict[str, dict[int, str]] = {sid: {} for sid in sample_ids}
        for r in results:
            if r.skipped:
                mark = MISSING
            elif r.error is not None:
                mark = ERROR
            else:
                mark = PASS if r.passed else FAIL
            cells.setdefault(r.sample_id, {})[r.run] = mark
        runs = {
            sid: "".join(by_run.get(i, MISSING) for i in range(max(by_run, default=-1) + 1))
            for sid, by_run in cells.items()
        }
        return cls(runs=runs)

    @classmethod
    def of(cls, runs: Mapping[str, str]) -> Outcomes:
        return cls(runs=dict(runs))

    def extend(self, other: Outcomes) -> Outcomes:
        """Merge results of later runs in (a known outcome is never replaced by ``.``)."""
        merged = dict(self.runs)
        for sid, seq in other.runs.items():
            old = merged.get(sid, "")
            width = max(len(old), len(seq))
            old, new = old.ljust(width, MISSING), seq.ljust(width, MISSING)
            merged[sid] = "".join(b if b != MISSING else a for a, b in zip(old, new, strict=True))
        return Outcomes(runs=merged)

    # -- per sample ----------------------------------------------------------------------------
    def seq(self, sample_id: str) -> str:
        return self.runs.get(sample_id, "")

    def next_run(self, sample_id: str) -> int:
        """The first run index not asked for yet."""
        return len(self.seq(sample_id))

    def attempted(self, sample_id: str) -> int:
        return sum(1 for c in self.seq(sample_id) if c != MISSING)

    def passes(self, sample_id: str) -> int:
        return self.seq(sample_id).count(PASS)

    def errors(self, sample_id: str) -> int:
        return self.seq(sample_id).count(ERROR)

    def answered(self, sample_id: str) -> list[bool]:
        """Runs that produced an answer (errors and gaps left out), in order: passed or not."""
        return [c == PASS for c in self.seq(sample_id) if c in (PASS, FAIL)]

    def scored(self, sample_id: str) -> list[bool]:
        """Every run made, in order, an error counting as a failure (seed 000's reading)."""
        return [c == PASS for c in self.seq(sample_id) if c != MISSING]

    def passed_every_run(self, sample_id: str) -> bool:
        """Seed 000's ``consistently_passed``: at least one run made and every run made passed."""
        made = self.scored(sample_id)
        return bool(made) and all(made)

    # -- totals --------------------------------------------------------------------------------
    def totals(self, sample_ids: Iterable[str]) -> tuple[int, int, int]:
        """(runs made, passed, errored) over ``sample_ids``."""
        made = passed = errored = 0
        for sid in sample_ids:
            made += self.attempted(sid)
            passed += self.passes(sid)
            errored += self.errors(sid)
        return made, passed, errored


__all__ = ["ERROR", "FAIL", "MISSING", "PASS", "Outcomes"]
