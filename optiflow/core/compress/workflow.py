"""The compress workflow (seed 000) as a pure state machine.

Steps:

1. ``baseline``: the baseline tag's overrides (snapshotted at submission) evaluated ``eval_runs``
   times over the dataset, while every mutable section of at least ``min_section_tokens`` tokens
   gets a compression proposal (largest first) — both in one step.
2. ``candidates``: each edit that saves tokens, under its own temporary tag, on top of the
   baseline's overrides. Zero regressions -> :class:`Modification`, else
   :class:`RejectedModification`.
3. ``combined``: with more than one accepted, all of them together.
4. ``greedy-N``: when the combination regresses, largest token reduction first; each kept only if
   the accumulated set does not regress.

Two savings keep the report identical to seed 000's: the combined and greedy steps decide only by
regressions, so they evaluate only the samples that passed every baseline run (the only ones
that can regress); and a set already evaluated (the first greedy step is the first candidate
alone) is decided from memory. Fail-fast (``fail_fast``, on by default) additionally stops a
candidate at its first regression; its ``regression_count`` is then a lower bound.

A step that ran out of the job's hard budget ends the job with what it had decided
(:meth:`CompressWorkflow._out_of_budget`): an edit is accepted only when its set was evaluated in
full without a regression; the undecided ones are listed as rejected with the reason.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import Field

from optiflow.core.actions import Action, Fail, Finish
from optiflow.core.budget import budget_line
from optiflow.core.checkpoint import JobState
from optiflow.core.compress.report import Modification, OptimizationReport, RejectedModification
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.evaluation import (
    EvalResult,
    EvalSummary,
    regressed_ids,
    regressions,
    summarize,
)
from optiflow.core.experiment import Experiment, temp_tag_prefix
from optiflow.core.overrides import SectionOverride
from optiflow.core.sections import SectionPath, path_str
from optiflow.core.step import EvalTarget, ProposalError, SectionEdit, Step, StepResults
from optiflow.core.workflow import TokenCounter, Transition, advanced, noted, started


def path_hash(path: SectionPath) -> str:
    return hashlib.sha256(path_str(path).encode()).hexdigest()[:8]


Phase = Literal["baseline", "candidates", "combined", "greedy", "done"]


class CompressState(JobState):
    """The checkpoint: enough to continue from any step boundary."""

    phase: Phase = "baseline"
    baseline_pass_rate: float = 0.0
    baseline_passed: frozenset[str] = frozenset()
    edits: tuple[SectionEdit, ...] = ()
    proposal_errors: tuple[ProposalError, ...] = ()
    accepted: tuple[Modification, ...] = ()
    rejected: tuple[RejectedModification, ...] = ()
    greedy_kept: tuple[Modification, ...] = ()
    greedy_queue: tuple[Modification, ...] = ()
    # regressions of every override set already evaluated, keyed by the set's canonical key
    known_sets: dict[str, tuple[int, bool]] = Field(default_factory=dict)


class CompressWorkflow:
    """Seed 000's loop as ``start`` / ``advance``. Holds only the immutable spec."""

    def __init__(self, spec: CompressSpec, job_id: str) -> None:
        self.spec = spec
        self.job_id = job_id

    # -- naming ---------------------------------------------------------------------------
    @staticmethod
    def load_state(data: Mapping[str, Any]) -> CompressState:
        return CompressState.model_validate(data)

    def _tag(self, suffix: str) -> str:
        return f"{temp_tag_prefix(self.job_id)}{suffix}"

    def _experiment(self, suffix: str, name: str) -> Experiment:
        return Experiment(
            id=f"{self.job_id}-{suffix}",
            name=name,
            overrides_tag=self._tag(suffix),
            parent_tag=self.spec.baseline_tag,
            flags=self.spec.flags,
        )

    def _target(
        self,
        suffix: str,
        name: str,
        mods: Iterable[SectionOverride],
        sample_ids: Iterable[str],
        guard: frozenset[str] | None,
    ) -> EvalTarget:
        by_path = {o.path: o for o in self.spec.baseline_overrides}
        for o in mods:
            by_path[o.path] = o
        ids = tuple(sample_ids)
        return EvalTarget(
            experiment=self._experiment(suffix, name),
            overrides=tuple(sorted(by_path.values(), key=lambda o: o.path)),
            model_params=dict(self.spec.baseline_model_params),
            sample_ids=ids,
            runs=self.spec.eval_runs,
            guard=guard if self.spec.fail_fast else None,
        )

    # -- transitions ----------------------------------------------------------------------
    def proposable_sections(self, count_tokens: TokenCounter) -> tuple[SectionPath, ...]:
        """Mutable sections of at least ``min_section_tokens`` tokens, largest first."""
        sized = [
            (count_tokens(self.spec.effective_body(s.path)), i, s.path)
            for i, s in enumerate(self.spec.prompt.sections)
            if not s.frozen
        ]
        sized = [x for x in sized if x[0] >= self.spec.min_section_tokens]
        sized.sort(key=lambda x: (-x[0], x[1]))
        return tuple(path for _, _, path in sized)

    def start(self, count_tokens: TokenCounter) -> Transition[CompressState]:
        state = CompressState(job_id=self.job_id)
        step = Step(
            index=0,
            name="baseline",
            targets=(self._target("baseline", "baseline", (), self.spec.dataset.ids(), guard=None),),
            propose=self.proposable_sections(count_tokens),
        )
        return started(state, step)

    def advance(self, state: CompressState, results: StepResults) -> Transition[CompressState]:
        new, action = self._advance(state, results)
        return advanced(new, results, action, rejected=len(new.rejected))

    def _advance(self, state: CompressState, results: StepResults) -> tuple[CompressState, Action]:
        by_exp: dict[str, list[EvalResult]] = defaultdict(list)
        for r in results.evals:
            by_exp[r.experiment_id].append(r)
        state = noted(state, results).model_copy(
            update={
                "stats": state.stats.add(
                    results.evals, proposals=len(results.edits) + len(results.proposal_errors)
                ),
                "step_index": state.step_index + 1,
            }
        )
        if results.budget_exhausted and state.phase != "done":
            return self._out_of_budget(state, results, by_exp)
        if state.phase == "baseline":
            return self._after_baseline(state, results, by_exp)
        if state.phase == "candidates":
            return self._after_candidates(state, by_exp)
        if state.phase == "combined":
            return self._after_combined(state, by_exp)
        if state.phase == "greedy":
            return self._after_greedy(state, by_exp)
        return state, Fail(error=f"advance called on a finished job (phase {state.phase})")

    def _after_baseline(
        self, state: CompressState, results: StepResults, by_exp: Mapping[str, list[EvalResult]]
    ) -> tuple[CompressState, Action]:
        base = by_exp.get(f"{self.job_id}-baseline", [])
        if base and all(r.error is not None for r in base):
            return state, Fail(error=f"baseline evaluation failed: {base[0].error}")
        summary = summarize(base, self.spec.dataset.ids())
        if results.proposal_errors and not results.edits:
            first = results.proposal_errors[0]
            return state, Fail(error=f"compression of {path_str(first.path)} failed: {first.error}")
        position = {s.path: i for i, s in enumerate(self.spec.prompt.sections)}
        # An edit that saves nothing is not a modification: it is not evaluated.
        edits = sorted(
            (e for e in results.edits if e.token_reduction > 0),
            key=lambda e: (-e.original_tokens, position[e.path]),
        )
        state = state.model_copy(
            update={
                "phase": "candidates",
                "baseline_pass_rate": summary.pass_rate,
                "baseline_passed": summary.consistently_passed,
                "edits": tuple(edits),
                "proposal_errors": results.proposal_errors,
            }
        )
        if not edits:
            return self._finish(state, ())
        targets = tuple(
            self._target(
                path_hash(e.path),
                f"candidate-{e.path[-1]}",
                (SectionOverride(path=e.path, expected_hash=e.original_hash, body=e.proposed_body),),
                self.spec.dataset.ids(),
                guard=summary.consistently_passed,
            )
            for e in edits
        )
        return state, Step(index=state.step_index, name="candidates", targets=targets)

    def _after_candidates(
        self, state: CompressState, by_exp: Mapping[str, list[EvalResult]]
    ) -> tuple[CompressState, Action]:
        accepted: list[Modification] = []
        rejected: list[RejectedModification] = list(state.rejected)
        known = dict(state.known_sets)
        for edit in state.edits:
            rs = by_exp.get(f"{self.job_id}-{path_hash(edit.path)}", [])
            summary = summarize(rs, self.spec.dataset.ids())
            count, lower = self._regressions(state.baseline_passed, rs, summary)
            mod = Modification(
                section_path=edit.path,
                original_hash=edit.original_hash,
                proposed_body=edit.proposed_body,
                token_reduction=edit.token_reduction,
                baseline_pass_rate=state.baseline_pass_rate,
                candidate_pass_rate=summary.pass_rate,
            )
            known[_set_key((mod,))] = (count, lower)
            if count == 0:
                accepted.append(mod)
            else:
                rejected.append(
                    RejectedModification(
                        section_path=edit.path,
                        token_reduction=edit.token_reduction,
                        regression_count=count,
                        regression_count_is_lower_bound=lower,
                    )
                )
        state = state.model_copy(
            update={"accepted": tuple(accepted), "rejected": tuple(rejected), "known_sets": known}
        )
        if len(accepted) <= 1:
            return self._finish(state, tuple(accepted))
        state = state.model_copy(update={"phase": "combined"})
        return self._evaluate_set(state, "combined", "combined", accepted)

    def _after_combined(
        self, state: CompressState, by_exp: Mapping[str, list[EvalResult]]
    ) -> tuple[CompressState, Action]:
        rs = by_exp.get(f"{self.job_id}-combined", [])
        count, lower = self._regressions(state.baseline_passed, rs, summarize(rs))
        known = {**state.known_sets, _set_key(state.accepted): (count, lower)}
        state = state.model_copy(update={"known_sets": known})
        if count == 0:
            return self._finish(state, state.accepted)
        queue = tuple(sorted(state.accepted, key=lambda m: -m.token_reduction))
        state = state.model_copy(update={"phase": "greedy", "greedy_kept": (), "greedy_queue": queue})
        return self._next_greedy(state)

    def _after_greedy(
        self, state: CompressState, by_exp: Mapping[str, list[EvalResult]]
    ) -> tuple[CompressState, Action]:
        trial = (*state.greedy_kept, state.greedy_queue[0])
        rs = by_exp.get(self._greedy_experiment_id(state), [])
        count, lower = self._regressions(state.baseline_passed, rs, summarize(rs))
        state = state.model_copy(update={"known_sets": {**state.known_sets, _set_key(trial): (count, lower)}})
        return self._next_greedy(self._greedy_record(state, count, lower))

    def _next_greedy(self, state: CompressState) -> tuple[CompressState, Action]:
        """Decide greedy steps from memory while possible; evaluate the first unknown set."""
        while state.greedy_queue:
            trial = (*state.greedy_kept, state.greedy_queue[0])
            known = state.known_sets.get(_set_key(trial))
            if known is None:
                name = self._greedy_experiment_id(state).removeprefix(f"{self.job_id}-")
                return self._evaluate_set(state, name, name, trial)
            state = self._greedy_record(state, *known)
        return self._finish(state, state.greedy_kept)

    @staticmethod
    def _greedy_record(state: CompressState, count: int, lower: bool) -> CompressState:
        """Keep the head of the greedy queue when it did not regress, reject it otherwise."""
        mod, rest = state.greedy_queue[0], state.greedy_queue[1:]
        if count == 0:
            return state.model_copy(update={"greedy_kept": (*state.greedy_kept, mod), "greedy_queue": rest})
        rejected = RejectedModification(
            section_path=mod.section_path,
            token_reduction=mod.token_reduction,
            regression_count=count,
            regression_count_is_lower_bound=lower,
            stage="greedy",
        )
        return state.model_copy(update={"rejected": (*state.rejected, rejected), "greedy_queue": rest})

    def _greedy_rejected(self, state: CompressState) -> list[RejectedModification]:
        return [r for r in state.rejected if r.stage == "greedy"]

    def _greedy_experiment_id(self, state: CompressState) -> str:
        return f"{self.job_id}-greedy-{len(state.greedy_kept) + len(self._greedy_rejected(state))}"

    # -- the budget ran out -----------------------------------------------------------------
    def _out_of_budget(
        self, state: CompressState, results: StepResults, by_exp: Mapping[str, list[EvalResult]]
    ) -> tuple[CompressState, Action]:
        """Finish with what was decided when the step ran out of the job's budget. A set
        evaluated in full (or cut after a regression showed) is decided as usual; one cut before
        a decision is undecided, never accepted. Greedy selection then goes on from the sets
        already evaluated and stops at the first it would have to evaluate: more than one
        accepted edit whose combination was not verified keeps the largest alone."""
        assert state.budget is not None
        undecided = f"undecided: {budget_line(state.budget)}"

        def cut(rs: list[EvalResult]) -> bool:  # cut short before its decision
            return any(r.budget_skipped for r in rs) and not regressed_ids(state.baseline_passed, rs)

        def not_decided(
            path: SectionPath, reduction: int, stage: Literal["candidate", "greedy"]
        ) -> RejectedModification:
            return RejectedModification(
                section_path=path,
                token_reduction=reduction,
                regression_count=0,
                stage=stage,
                reason=undecided,
            )

        if state.phase == "baseline":
            done = [r for r in by_exp.get(f"{self.job_id}-baseline", []) if not r.skipped]
            edits = [e for e in results.edits if e.token_reduction > 0]
            rejected = tuple(not_decided(e.path, e.token_reduction, "candidate") for e in edits)
            state = state.model_copy(
                update={
                    "baseline_pass_rate": summarize(done).pass_rate,
                    "proposal_errors": results.proposal_errors,
                    "rejected": rejected,
                }
            )
            return self._finish(state, ())
        if state.phase == "candidates":
            accepted: list[Modification] = []
            rejected_: list[RejectedModification] = list(state.rejected)
            known = dict(state.known_sets)
            for edit in state.edits:
                rs = by_exp.get(f"{self.job_id}-{path_hash(edit.path)}", [])
                if cut(rs):
                    rejected_.append(not_decided(edit.path, edit.token_reduction, "candidate"))
                    continue
                summary = summarize(rs, self.spec.dataset.ids())
                count, lower = self._regressions(state.baseline_passed, rs, summary)
                mod = Modification(
                    section_path=edit.path,
                    original_hash=edit.original_hash,
                    proposed_body=edit.proposed_body,
                    token_reduction=edit.token_reduction,
                    baseline_pass_rate=state.baseline_pass_rate,
                    candidate_pass_rate=summary.pass_rate,
                )
                known[_set_key((mod,))] = (count, lower)
                if count == 0:
                    accepted.append(mod)
                else:
                    rejected_.append(
                        RejectedModification(
                            section_path=edit.path,
                            token_reduction=edit.token_reduction,
                            regression_count=count,
                            regression_count_is_lower_bound=lower,
                        )
                    )
            state = state.model_copy(
                update={"accepted": tuple(accepted), "rejected": tuple(rejected_), "known_sets": known}
            )
            if len(accepted) <= 1:
                return self._finish(state, tuple(accepted))
        elif state.phase == "combined":
            rs = by_exp.get(f"{self.job_id}-combined", [])
            if not cut(rs):
                count, lower = self._regressions(state.baseline_passed, rs, summarize(rs))
                state = state.model_copy(
                    update={"known_sets": {**state.known_sets, _set_key(state.accepted): (count, lower)}}
                )
                if count == 0:
                    return self._finish(state, state.accepted)
        elif state.phase == "greedy":
            rs = by_exp.get(self._greedy_experiment_id(state), [])
            if cut(rs):
                head = state.greedy_queue[0]
                state = state.model_copy(
                    update={
                        "rejected": (
                            *state.rejected,
                            not_decided(head.section_path, head.token_reduction, "greedy"),
                        ),
                        "greedy_queue": state.greedy_queue[1:],
                    }
                )
            else:
                count, lower = self._regressions(state.baseline_passed, rs, summarize(rs))
                state = self._greedy_record(state, count, lower)
        if state.phase != "greedy":
            queue = tuple(sorted(state.accepted, key=lambda m: -m.token_reduction))
            state = state.model_copy(update={"phase": "greedy", "greedy_kept": (), "greedy_queue": queue})
        while state.greedy_queue:  # greedy from memory only: no set is evaluated any more
            known_set = state.known_sets.get(_set_key((*state.greedy_kept, state.greedy_queue[0])))
            if known_set is None:
                rest = tuple(
                    not_decided(m.section_path, m.token_reduction, "greedy") for m in state.greedy_queue
                )
                state = state.model_copy(update={"rejected": state.rejected + rest, "greedy_queue": ()})
                break
            state = self._greedy_record(state, *known_set)
        return self._finish(state, state.greedy_kept)

    # -- helpers --------------------------------------------------------------------------
    def _evaluate_set(
        self, state: CompressState, suffix: str, name: str, mods: Iterable[Modification]
    ) -> tuple[CompressState, Action]:
        """Evaluate a set of modifications for regressions only: just the samples that passed
        every baseline run can regress, so only those are evaluated."""
        overrides = [
            SectionOverride(path=m.section_path, expected_hash=m.original_hash, body=m.proposed_body)
            for m in mods
        ]
        ids = [i for i in self.spec.dataset.ids() if i in state.baseline_passed]
        if not ids:  # nothing can regress: decide without evaluating
            after = self._after_combined if state.phase == "combined" else self._after_greedy
            return after(state, {})
        target = self._target(suffix, name, overrides, ids, guard=frozenset(ids))
        return state, Step(index=state.step_index, name=name, targets=(target,))

    def _regressions(
        self, baseline_passed: frozenset[str], results: list[EvalResult], summary: EvalSummary
    ) -> tuple[int, bool]:
        """(count, is_lower_bound). Exact unless fail-fast skipped some evaluations."""
        if any(r.skipped for r in results):
            return max(len(regressed_ids(baseline_passed, results)), 1), True
        return len(regressions(baseline_passed, summary)), False

    def _finish(
        self, state: CompressState, modifications: tuple[Modification, ...]
    ) -> tuple[CompressState, Action]:
        report = OptimizationReport(
            experiment_id=self.job_id,
            prompt_ns=self.spec.prompt.ns,
            prompt_key=self.spec.prompt.key,
            baseline_pass_rate=state.baseline_pass_rate,
            modifications=modifications,
            rejected=state.rejected,
            proposal_errors=state.proposal_errors,
            stats=state.stats,
            budget=state.budget,
        )
        return state.model_copy(update={"phase": "done"}), Finish(report=report)


def _set_key(mods: Iterable[Modification]) -> str:
    parts = sorted(
        f"{path_str(m.section_path)}:{hashlib.sha256(m.proposed_body.encode()).hexdigest()[:16]}"
        for m in mods
    )
    return "|".join(parts)
