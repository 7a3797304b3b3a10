"""The compress workflow (seed 000), judged by a gate, as a pure state machine.

Steps (each one chord):

1. ``baseline``: the baseline tag's overrides (snapshotted at submission) evaluated ``eval_runs``
   times over the dataset (``auto`` with ``eval_runs: 1``: twice, to test the model's
   determinism), while every mutable section of at least ``min_section_tokens`` tokens gets a
   compression proposal (largest first) — both in one step. The gate then reads the
   baseline's runs once (:func:`~optiflow.core.gate.evidence.assess`): which gate decides (``auto``:
   ``strict`` for a model its runs show deterministic, else ``paired``) and whether the baseline
   gives it anything to stand on; when it does not, the job fails with the cause.
2. ``candidates``: each edit that saves tokens, under its own temporary tag, on top of the
   baseline's overrides, evaluated on every sample ``eval_runs`` times. Each is then decided by
   the gate: accepted -> :class:`Modification`, rejected -> :class:`RejectedModification`, or
   undecided (``paired``): another round (``candidates-2``, ...) gives only the undecided
   candidates more runs (and extends the baseline's, shared by all of them), until each is
   decided or reaches ``gate.max_runs``.
3. ``combined``: with more than one accepted, all of them together, decided by the same gate.
4. ``greedy-N``: when the combination is rejected, largest token reduction first; each kept only
   if the accumulated set is accepted. Under ``strict`` the sets greedy would evaluate next if
   each one before is kept share a step (a chain); their decisions are read in order.

Under ``strict`` this is seed 000 exactly, with its savings: the combined and greedy sets decide
only by regressions, so they are evaluated only on the samples that passed every baseline run;
a set already decided (the first greedy set is the first candidate alone) is decided from memory;
and fail-fast (``fail_fast``, on by default) stops a candidate at its first regression (its
``regression_count`` is then a lower bound). Under ``paired`` every round of a set covers every
sample the test pairs, and fail-fast watches only the protected samples (which keep the strict
per-sample rule in every mode).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from optiflow.core.actions import Action, Fail, Finish
from optiflow.core.budget import budget_line
from optiflow.core.compress.ablation import ABLATION, PENDING, Ablation, failure_line, mutable_sections
from optiflow.core.compress.report import (
    Modification,
    OptimizationReport,
    UntriedSection,
)
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.compress.state import (
    CompressState,
    GatedSet,
    SetDecision,
    override_of,
    pass_rate,
    path_hash,
    rejection,
    set_key,
    set_suffix,
)
from optiflow.core.evaluation import EvalResult
from optiflow.core.experiment import Experiment, temp_tag_prefix
from optiflow.core.gate.decision import GateDecision, RunPlan, RunRange
from optiflow.core.gate.evidence import assess
from optiflow.core.gate.gate import decide
from optiflow.core.gate.outcomes import Outcomes
from optiflow.core.gate.strict import can_regress
from optiflow.core.records import Rejection, Trial
from optiflow.core.relevance import Relevance, probe_size, removed_sentences
from optiflow.core.sections import SectionPath, path_str
from optiflow.core.step import EvalTarget, SectionEdit, Step, StepResults
from optiflow.core.workflow import (
    StalledStepError,
    TokenCounter,
    Transition,
    advanced,
    bounded,
    failure,
    noted,
    started,
)

BASELINE = "baseline"
FAIL_FAST_SKIP = "regressed"
"""The skip reason of an evaluation fail-fast's mark stopped (``optiflow.distributed.scratch``)."""


class CompressWorkflow:
    """Seed 000's loop as ``start`` / ``advance``. Holds only the immutable spec."""

    def __init__(self, spec: CompressSpec, job_id: str) -> None:
        self.spec = spec
        self.job_id = job_id
        self.gate = spec.gate_spec
        self.ids = spec.dataset.ids()
        self.protected = self.gate.protected_ids(spec.dataset.samples)
        self.relevance = Relevance(spec.dataset.samples)
        self.mutable = sum(1 for s in spec.prompt.sections if not s.frozen)

    @staticmethod
    def load_state(data: Mapping[str, object]) -> CompressState:
        return CompressState.model_validate(data)

    # -- naming ---------------------------------------------------------------------------
    def _experiment_id(self, suffix: str) -> str:
        return f"{self.job_id}-{suffix}"

    def _target(
        self,
        suffix: str,
        name: str,
        mods: Iterable[Modification],
        sample_ids: Iterable[str],
        *,
        runs: int,
        first_run: int = 0,
        guard: frozenset[str] | None = None,
    ) -> EvalTarget:
        mods = tuple(mods)
        sample_ids = tuple(sample_ids)
        by_path = {o.path: o for o in self.spec.baseline_overrides}
        for m in mods:
            by_path[m.section_path] = override_of(m)
        guard = guard if self.spec.fail_fast and guard else None
        return EvalTarget(
            experiment=Experiment(
                id=self._experiment_id(suffix),
                name=name,
                overrides_tag=f"{temp_tag_prefix(self.job_id)}{suffix}",
                parent_tag=self.spec.baseline_tag,
                flags=self.spec.flags,
            ),
            overrides=tuple(sorted(by_path.values(), key=lambda o: o.path)),
            model_params=dict(self.spec.baseline_model_params),
            sample_ids=sample_ids,
            runs=runs,
            first_run=first_run,
            guard=guard,
            probe=self._probe(mods, sample_ids, guard) if guard else (),
        )

    def _probe(
        self, mods: Sequence[Modification], sample_ids: Sequence[str], guard: frozenset[str]
    ) -> tuple[str, ...]:
        """The watched samples the set's removed sentences concern most (evaluated first)."""
        watched = [sid for sid in sample_ids if sid in guard]
        removed = removed_sentences((self.spec.effective_body(m.section_path), m.proposed_body) for m in mods)
        return self.relevance.probe(removed, watched, probe_size(len(watched)))

    def _ranges(
        self, s: GatedSet | None, ranges: Sequence[RunRange], guard: frozenset[str]
    ) -> list[EvalTarget]:
        """The targets of a plan's run ranges: the baseline's (``s`` None) or a set's."""
        if s is None:
            return [
                self._target(BASELINE, BASELINE, (), r.sample_ids, runs=r.stop - r.start, first_run=r.start)
                for r in ranges
            ]
        return [
            self._target(
                s.suffix, s.name, s.mods, r.sample_ids, runs=r.stop - r.start, first_run=r.start, guard=guard
            )
            for r in ranges
        ]

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
        if self.spec.require_sensitivity:
            sections = mutable_sections(
                [(s.path, s.frozen) for s in self.spec.prompt.sections], self.spec.effective_body
            )
            tokens = sum(count_tokens(self.spec.effective_body(p)) for p in sections)
            state = state.model_copy(
                update={"ablation": Ablation(sections=sections, tokens=tokens, noticed=False, reason=PENDING)}
            )
        step = Step(
            index=0,
            name=BASELINE,
            targets=(self._target(BASELINE, BASELINE, (), self.ids, runs=self.baseline_runs),),
            propose=self.proposable_sections(count_tokens),
        )
        return started(state, step)

    @property
    def baseline_runs(self) -> int:
        """The baseline's first round: ``eval_runs`` runs, and under ``auto`` with one run, one
        more: one run cannot show the model deterministic (``auto`` would pick ``paired``, several
        times seed 000's calls even on a deterministic model); two that agree on every sample pick
        ``strict``, which then costs seed 000's calls plus that one baseline run."""
        if self.gate.mode == "auto" and self.spec.eval_runs < 2:
            return 2
        return self.spec.eval_runs

    @property
    def max_steps(self) -> int:
        """The most steps a job of this spec takes: the baseline, then at most ``rounds`` rounds
        for the ablation (when it runs), the candidates, the combination and each greedy set (at
        most one per mutable section but the first, decided from memory: ``sections + 1`` phases
        of rounds in all, one more with the ablation)."""
        return 1 + self.max_rounds * (self.mutable + 1 + self._ablation_phases)

    @property
    def _ablation_phases(self) -> int:
        return 1 if self.spec.require_sensitivity else 0

    @property
    def max_rounds(self) -> int:
        """The most rounds the gate takes to decide a set: one under ``strict`` (every run in the
        first); ``paired`` / ``auto``: the first round, one per ``round_runs`` up to ``max_runs``
        and as many for baseline runs that errored (each such round adds a baseline run)."""
        gate = self.gate
        if gate.mode == "strict":
            return 1
        later = -(-(gate.max_runs - gate.first_runs) // gate.round_runs)
        return 1 + later + gate.max_runs

    def advance(self, state: CompressState, results: StepResults) -> Transition[CompressState]:
        before = state
        new, action = self._advance(state, results)
        if isinstance(action, Step) and all(
            t.guard is not None and t.experiment.id in new.regressed for t in action.targets
        ):
            names = ", ".join(sorted({t.experiment.name for t in action.targets}))
            action = failure(
                StalledStepError(
                    f"step {action.index + 1} ({action.name}) would evaluate only experiments that "
                    f"already regressed ({names}): fail-fast would skip every evaluation"
                )
            )
        action = bounded(action, self.max_steps, self.max_steps_why)
        trials = self._trials(before, new, results)
        refused = [  # in the job's history: proposals refused before evaluation
            Rejection(
                step_index=results.step.index,
                reason_code="unfaithful",
                message=e.error,
                proposed_index=i,
                candidate_id=path_str(e.path),
                rationale=e.proposed_body,
            )
            for i, e in enumerate(results.proposal_errors)
            if e.refused
        ]
        return advanced(new, results, action, rejected=len(new.rejected), trials=trials, rejections=refused)

    @property
    def max_steps_why(self) -> str:
        sections = self.mutable
        ablation = " + the ablation" if self._ablation_phases else ""
        return f"1 + {self.max_rounds} round(s) x ({sections} mutable section(s) + 1{ablation})"

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
                "regressed": state.regressed | _regressed(results),
                "baseline": state.baseline.extend(
                    Outcomes.from_results(by_exp.get(self._experiment_id(BASELINE), ()))
                ),
                "pending": tuple(
                    s.model_copy(
                        update={
                            "outcomes": s.outcomes.extend(
                                Outcomes.from_results(by_exp.get(self._experiment_id(s.suffix), ()))
                            ),
                            "rounds": s.rounds + 1,
                        }
                    )
                    for s in state.pending
                ),
            }
        )
        if results.budget_exhausted and state.phase != "done":
            return self._out_of_budget(state, results)
        if state.phase == "baseline":
            return self._after_baseline(state, results, by_exp.get(self._experiment_id(BASELINE), []))
        if state.phase in ("ablation", "candidates", "combined", "greedy"):
            return self._round(state)
        return state, Fail(error=f"advance called on a finished job (phase {state.phase})")

    def _after_baseline(
        self, state: CompressState, results: StepResults, base: Sequence[EvalResult]
    ) -> tuple[CompressState, Action]:
        assessment = assess(self.gate, state.baseline, self.ids, self.protected)
        if assessment.failure is not None:
            first_error = next((r.error for r in base if r.error), None)
            cause = f"; first error: {first_error}" if first_error else ""
            return state, Fail(
                error=f"the baseline gives the gate nothing to stand on: {assessment.failure}{cause}"
            )
        failed = [e for e in results.proposal_errors if not e.refused]  # a refusal is a verdict
        if failed and not results.edits:
            first = failed[0]
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
                "baseline_pass_rate": pass_rate(state.baseline, self.ids),
                "assessment": assessment,
                "edits": tuple(edits),
                "proposal_errors": results.proposal_errors,
                "untried": self._untried(results),
            }
        )
        if not edits:
            return self._finish(state, ())
        if state.ablation is not None:
            return self._evaluate_sets(
                state.model_copy(update={"phase": ABLATION}), [self._ablation_set(state)]
            )
        return self._candidates(state)

    def _candidates(self, state: CompressState) -> tuple[CompressState, Action]:
        """Every edit under its own tag, first round."""
        edits = state.edits
        pending = tuple(
            GatedSet(suffix=path_hash(e.path), name=f"candidate-{e.path[-1]}", mods=(self._modification(e),))
            for e in edits
        )
        # Seed 000 evaluates each candidate on every sample (its pass rate is reported), guarded
        # by the samples that can regress.
        guard = self._guard(state)
        targets = [
            self._target(s.suffix, s.name, s.mods, self.ids, runs=self.spec.eval_runs, guard=guard)
            for s in pending
        ]
        state = state.model_copy(update={"phase": "candidates", "pending": pending})
        return state, Step(index=state.step_index, name="candidates", targets=tuple(targets))

    def _ablation_set(self, state: CompressState) -> GatedSet:
        assert state.ablation is not None
        mods = tuple(
            Modification(
                section_path=p,
                original_hash=self.spec.prompt.section(p).hash,
                proposed_body="",
                token_reduction=0,
                baseline_pass_rate=0.0,
                candidate_pass_rate=0.0,
            )
            for p in state.ablation.sections
        )
        return GatedSet(suffix=ABLATION, name=ABLATION, mods=mods)

    def _after_ablation(
        self, state: CompressState, decisions: Mapping[str, GateDecision]
    ) -> tuple[CompressState, Action]:
        """The dataset notices the mutable sections (the gate rejected them emptied): candidates;
        otherwise the job fails with one line."""
        assert state.ablation is not None
        (s,) = state.pending
        d = decisions[s.suffix]
        ablation = state.ablation.model_copy(
            update={"noticed": not d.accepted, "reason": d.reason, "stats": d.stats}
        )
        known = {**state.known_sets, set_key(s.mods): self._remember(state, s, d)}
        state = state.model_copy(update={"pending": (), "ablation": ablation, "known_sets": known})
        if not ablation.noticed:
            return state, Fail(error=failure_line(ablation))
        return self._candidates(state)

    # -- rounds -------------------------------------------------------------------------------
    def _round(self, state: CompressState) -> tuple[CompressState, Action]:
        """Decide every pending set; launch another round for the undecided, or close the phase."""
        assert state.assessment is not None
        decisions = {s.suffix: self._decide(state, s) for s in state.pending}
        undecided = [s for s in state.pending if not decisions[s.suffix].decided]
        if undecided:
            return self._next_round(state, undecided, decisions)
        return self._close(state, decisions)

    def _decide(self, state: CompressState, s: GatedSet) -> GateDecision:
        """The gate's decision on a set, except that a set fail-fast marked (a watched sample
        failed) is rejected: its further evaluations would all be skipped. (Under ``paired`` a
        protected sample may fail a candidate run, then fail a baseline run added later, so the
        gate no longer counts it as a regression; the candidate's runs stopped all the same.)"""
        assert state.assessment is not None
        decision = decide(self.gate, state.assessment, state.baseline, s.outcomes)
        if decision.decided or self._experiment_id(s.suffix) not in state.regressed:
            return decision
        return decision.model_copy(
            update={
                "verdict": "reject",
                "reason": "fail-fast: a protected sample failed a run, so its remaining runs were skipped",
                "plan": RunPlan(),
            }
        )

    def _next_round(
        self, state: CompressState, undecided: Sequence[GatedSet], decisions: Mapping[str, GateDecision]
    ) -> tuple[CompressState, Action]:
        """Record the sets decided this round, and give the undecided ones their next runs (and
        the baseline the runs their pairs need: one set of baseline runs shared by all)."""
        open_ = {s.suffix for s in undecided}
        state = self._record(state, [s for s in state.pending if s.suffix not in open_], decisions)
        state = state.model_copy(update={"pending": tuple(s for s in state.pending if s.suffix in open_)})
        plans = [decisions[s.suffix].plan for s in undecided]
        guard = self._guard(state)
        targets = [
            *self._ranges(None, RunPlan.merge_baseline(plans), frozenset()),
            *(t for s in undecided for t in self._ranges(s, decisions[s.suffix].plan.candidate, guard)),
        ]
        name = self._phase_name(state, max(s.rounds for s in undecided) + 1)
        return state, Step(index=state.step_index, name=name, targets=tuple(targets))

    def _phase_name(self, state: CompressState, round_: int) -> str:
        base = state.phase if state.phase != "greedy" else state.pending[0].name
        return base if round_ == 1 else f"{base}-{round_}"

    def _close(
        self, state: CompressState, decisions: Mapping[str, GateDecision]
    ) -> tuple[CompressState, Action]:
        """Every pending set decided: record them and move to the next phase."""
        if state.phase == ABLATION:
            return self._after_ablation(state, decisions)
        if state.phase == "candidates":
            state = self._record(state, state.pending, decisions)
            state = state.model_copy(update={"pending": ()})
            if len(state.accepted) <= 1:
                return self._finish(state, state.accepted)
            combined = GatedSet(suffix="combined", name="combined", mods=state.accepted)
            state = state.model_copy(update={"phase": "combined"})
            return self._evaluate_sets(state, [combined])
        remembered = {set_key(s.mods): self._remember(state, s, decisions[s.suffix]) for s in state.pending}
        state = state.model_copy(update={"pending": (), "known_sets": {**state.known_sets, **remembered}})
        if state.phase == "combined":
            (known,) = remembered.values()
            state = state.model_copy(update={"combined": known.stats})
            if known.accepted:
                return self._finish(state, state.accepted)
            return self._next_greedy(self._start_greedy(state))
        return self._next_greedy(state)  # the chain's decisions are read from memory, in order

    def _record(
        self, state: CompressState, sets: Sequence[GatedSet], decisions: Mapping[str, GateDecision]
    ) -> CompressState:
        """Candidates decided this round: accepted ones kept, rejected ones reported."""
        if state.phase != "candidates" or not sets:
            return state
        accepted, rejected, known = list(state.accepted), list(state.rejected), dict(state.known_sets)
        for s in sets:
            decision = self._remember(state, s, decisions[s.suffix])
            known[set_key(s.mods)] = decision
            (mod,) = s.mods
            if decision.accepted:
                accepted.append(
                    mod.model_copy(update={"candidate_pass_rate": decision.pass_rate, "gate": decision.stats})
                )
            else:
                rejected.append(rejection(mod, decision, "candidate"))
        order = {e.path: i for i, e in enumerate(state.edits)}
        accepted.sort(key=lambda m: order[m.section_path])
        return state.model_copy(
            update={"accepted": tuple(accepted), "rejected": tuple(rejected), "known_sets": known}
        )

    def _remember(self, state: CompressState, s: GatedSet, decision: GateDecision) -> SetDecision:
        """A decision as the report tells it: under ``strict`` its regression count (a lower bound
        when fail-fast left a sample that could regress short of its runs)."""
        stats = decision.stats
        lower = (
            not decision.accepted
            and stats.gate == "strict"
            and any(
                s.outcomes.attempted(sid) < self.gate.first_runs
                for sid in can_regress(state.baseline, self.ids)
            )
        )
        return SetDecision(
            accepted=decision.accepted,
            reason=decision.reason,
            regressions=max(len(stats.regressed), 1) if lower else len(stats.regressed),
            lower_bound=lower,
            pass_rate=pass_rate(s.outcomes, self.ids),
            stats=stats,
        )

    # -- combined and greedy --------------------------------------------------------------------
    def _evaluate_sets(self, state: CompressState, sets: Sequence[GatedSet]) -> tuple[CompressState, Action]:
        """Sets' first round, in one step: under ``strict`` only the samples that passed every
        baseline run (the only ones that can regress), under ``paired`` what the test pairs."""
        assert state.assessment is not None
        decisions = {s.suffix: decide(self.gate, state.assessment, state.baseline, s.outcomes) for s in sets}
        state = state.model_copy(update={"pending": tuple(sets)})
        if all(d.decided for d in decisions.values()):  # nothing can regress: decided without evaluating
            return self._close(state, decisions)
        return self._next_round(state, sets, decisions)

    def _next_greedy(self, state: CompressState) -> tuple[CompressState, Action]:
        """Decide greedy sets from memory while possible; put the first unknown one (and the
        chain behind it, :meth:`_greedy_chain`) to the gate."""
        while state.greedy_queue:
            known = state.known_sets.get(set_key((*state.greedy_kept, state.greedy_queue[0])))
            if known is None:
                return self._evaluate_sets(state, self._greedy_chain(state))
            state = self._greedy_record(state, known)
        return self._finish(state, state.greedy_kept)

    def _greedy_chain(self, state: CompressState) -> list[GatedSet]:
        """The next greedy set to evaluate and, under ``strict`` (one round decides a set), the
        sets greedy evaluates after it if each one before is kept, up to the first already
        known to be rejected. They share one step: every set kept saves a step's round trip,
        and greedy reads the decisions from memory in order, so the decisions are seed 000's.
        A rejection makes the sets after it moot; they were mostly supersets of the rejected
        one, which its regression usually rejects after a probe's few calls."""
        assert state.assessment is not None
        n = len(state.greedy_kept) + sum(1 for r in state.rejected if r.stage == "greedy")
        kept, chain = state.greedy_kept, []
        for i, mod in enumerate(state.greedy_queue):
            trial = (*kept, mod)
            known = state.known_sets.get(set_key(trial))
            if known is not None and not known.accepted:
                break
            if known is None:
                chain.append(GatedSet(suffix=set_suffix(trial), name=f"greedy-{n + i}", mods=trial))
                if state.assessment.gate != "strict":
                    break
            kept = trial
        return chain

    @staticmethod
    def _greedy_record(state: CompressState, known: SetDecision) -> CompressState:
        """Keep the head of the greedy queue when its set was accepted, reject it otherwise."""
        mod, rest = state.greedy_queue[0], state.greedy_queue[1:]
        if known.accepted:
            return state.model_copy(update={"greedy_kept": (*state.greedy_kept, mod), "greedy_queue": rest})
        rejected = rejection(mod, known, "greedy")
        return state.model_copy(update={"rejected": (*state.rejected, rejected), "greedy_queue": rest})

    # -- the budget ran out -----------------------------------------------------------------
    def _out_of_budget(self, state: CompressState, results: StepResults) -> tuple[CompressState, Action]:
        """Finish with what was decided when the step ran out of the job's hard budget: a set the
        gate can decide from the runs it got (a regression shown, or enough runs) is decided as
        usual; one cut before its decision is *undecided*, never accepted. Greedy selection then
        goes on from the sets already decided and stops at the first it would have to evaluate,
        so accepted edits whose combination was never verified keep the largest alone."""
        assert state.budget is not None
        reason = f"undecided: {budget_line(state.budget)}"
        if state.phase == "baseline":
            edits = [e for e in results.edits if e.token_reduction > 0]
            undecided = tuple(
                rejection(self._modification(e), SetDecision(accepted=False, reason=reason), "candidate")
                for e in edits
            )
            made, passed, _ = state.baseline.totals(self.ids)
            state = state.model_copy(
                update={
                    "baseline_pass_rate": passed / made if made else 0.0,  # over what was evaluated
                    "proposal_errors": results.proposal_errors,
                    "untried": self._untried(results),
                    "rejected": undecided,
                }
            )
            return self._finish(state, ())
        if state.phase == ABLATION:  # never got to the candidates: every edit is undecided
            undecided = tuple(
                rejection(self._modification(e), SetDecision(accepted=False, reason=reason), "candidate")
                for e in state.edits
            )
            return self._finish(state.model_copy(update={"pending": (), "rejected": undecided}), ())
        assert state.assessment is not None
        decisions = {s.suffix: self._decide(state, s) for s in state.pending}
        cut = [s for s in state.pending if not decisions[s.suffix].decided]
        if state.phase == "candidates":
            state = self._record(state, [s for s in state.pending if decisions[s.suffix].decided], decisions)
            undecided_ = [
                rejection(s.mods[0], SetDecision(accepted=False, reason=reason), "candidate") for s in cut
            ]
            state = state.model_copy(update={"pending": (), "rejected": (*state.rejected, *undecided_)})
            if len(state.accepted) <= 1:
                return self._finish(state, state.accepted)
            return self._greedy_from_memory(self._start_greedy(state), reason)
        decided = {
            set_key(s.mods): self._remember(state, s, decisions[s.suffix])
            for s in state.pending
            if s not in cut
        }
        state = state.model_copy(update={"pending": (), "known_sets": {**state.known_sets, **decided}})
        if state.phase == "combined":
            if decided:
                (known,) = decided.values()
                state = state.model_copy(update={"combined": known.stats})
                if known.accepted:
                    return self._finish(state, state.accepted)
            state = self._start_greedy(state)
        return self._greedy_from_memory(state, reason)

    def _untried(self, results: StepResults) -> tuple[UntriedSection, ...]:
        """The mutable sections no edit of is evaluated, in prompt order, with the reason."""
        edits = {e.path: e for e in results.edits}
        failed = {e.path for e in results.proposal_errors}
        out = []
        for s in self.spec.prompt.sections:
            if s.frozen or s.path in failed:
                continue
            edit = edits.get(s.path)
            if edit is None:
                why = f"not proposed: under min_section_tokens ({self.spec.min_section_tokens})"
            elif edit.token_reduction <= 0:
                saved = f"{edit.original_tokens} → {edit.proposed_tokens}"
                why = f"not evaluated: the proposal saved no tokens ({saved})"
            else:
                continue
            out.append(UntriedSection(path=s.path, reason=why))
        return tuple(out)

    def _start_greedy(self, state: CompressState) -> CompressState:
        queue = tuple(sorted(state.accepted, key=lambda m: -m.token_reduction))
        return state.model_copy(update={"phase": "greedy", "greedy_kept": (), "greedy_queue": queue})

    def _greedy_from_memory(self, state: CompressState, reason: str) -> tuple[CompressState, Action]:
        """Greedy on the sets already decided; the first set it would evaluate ends it, and every
        edit left is undecided."""
        while state.greedy_queue:
            known = state.known_sets.get(set_key((*state.greedy_kept, state.greedy_queue[0])))
            if known is None:
                undecided = tuple(
                    rejection(m, SetDecision(accepted=False, reason=reason), "greedy")
                    for m in state.greedy_queue
                )
                state = state.model_copy(
                    update={"rejected": (*state.rejected, *undecided), "greedy_queue": ()}
                )
                break
            state = self._greedy_record(state, known)
        return self._finish(state, state.greedy_kept)

    # -- helpers --------------------------------------------------------------------------
    def _guard(self, state: CompressState) -> frozenset[str]:
        """Fail-fast's watch list: the samples whose failure rejects a set at once (``strict``:
        every sample that passed every baseline run; ``paired``: the protected ones among them)."""
        watched = frozenset(can_regress(state.baseline, self.ids))
        assert state.assessment is not None
        return watched if state.assessment.gate == "strict" else watched & self.protected

    def _modification(self, edit: SectionEdit) -> Modification:
        return Modification(
            section_path=edit.path,
            original_hash=edit.original_hash,
            proposed_body=edit.proposed_body,
            token_reduction=edit.token_reduction,
            baseline_pass_rate=0.0,
            candidate_pass_rate=0.0,
            original_tokens=edit.original_tokens,
            proposed_tokens=edit.proposed_tokens,
            original_body=self.spec.effective_body(edit.path),
            faithfulness=edit.faithfulness,
        )

    def _trials(self, before: CompressState, after: CompressState, results: StepResults) -> list[Trial]:
        """One trial per experiment this step evaluated: the baseline, and each set with the
        gate's reading so far: its pass rate over every run made on the samples it was evaluated on
        (``evaluated_samples`` of ``samples``: under ``strict`` a combined or greedy set runs only
        on the samples that can regress), and once decided its verdict, reason and drop. A set
        still undecided is ``running``."""
        from optiflow.core import progress

        sets = {self._experiment_id(s.suffix): s for s in before.pending}
        out = []
        for t in progress.step_trials(results.step, results):
            s = sets.get(t.candidate_id)
            if s is None:
                out.append(t)
                continue
            runs = Outcomes.from_results(r for r in results.evals if r.experiment_id == t.candidate_id)
            outcomes = s.outcomes.extend(runs)
            evaluated = [sid for sid in self.ids if outcomes.attempted(sid)]
            extra = {
                **t.extra,
                "round": s.rounds + 1,
                "evaluated_samples": len(evaluated),
                "samples": len(self.ids),
            }
            known = after.known_sets.get(set_key(s.mods))
            status = t.status
            if known is not None and set_key(s.mods) not in before.known_sets:
                extra.update(verdict="accept" if known.accepted else "reject", reason=known.reason)
                if known.stats is not None:
                    extra.update(
                        gate=known.stats.gate, drop=known.stats.drop, drop_high=known.stats.drop_high
                    )
            elif status == "completed":
                status = "running"
            score = pass_rate(outcomes, evaluated) if evaluated else None
            out.append(t.model_copy(update={"status": status, "objective_score": score, "extra": extra}))
        return out

    def _finish(
        self, state: CompressState, modifications: tuple[Modification, ...]
    ) -> tuple[CompressState, Action]:
        base = state.baseline_pass_rate
        report = OptimizationReport(
            experiment_id=self.job_id,
            prompt_ns=self.spec.prompt.ns,
            prompt_key=self.spec.prompt.key,
            baseline_pass_rate=base,
            modifications=tuple(m.model_copy(update={"baseline_pass_rate": base}) for m in modifications),
            rejected=state.rejected,
            proposal_errors=state.proposal_errors,
            untried=state.untried,
            stats=state.stats,
            gate=state.assessment.gate if state.assessment else None,
            assessment=state.assessment,
            combined=state.combined,
            budget=state.budget,
            # only an ablation that ran: its placeholder (no edit to try, the budget ran out first)
            # would read as "not noticed", the failure verdict
            ablation=state.ablation if state.ablation and state.ablation.reason != PENDING else None,
            sensitivity_unchecked=not self.spec.require_sensitivity,
        )
        return state.model_copy(update={"phase": "done"}), Finish(report=report)


def _regressed(results: StepResults) -> frozenset[str]:
    """The experiments of a step that fail-fast marked: a watched sample failed or errored, or an
    evaluation was skipped for the mark, which only such a failure writes: its witness when the
    failing answer is not among the results (a step launched again after a crash gets back cached
    answers, never an error); without it the gate would ask for runs the mark skips again."""
    guards = {t.experiment.id: t.guard for t in results.step.targets if t.guard}
    out = set()
    for r in results.evals:
        guard = guards.get(r.experiment_id)
        if not guard:
            continue
        witness = r.skipped and r.reason == FAIL_FAST_SKIP
        failed = r.sample_id in guard and not r.skipped and not (r.success and r.passed)
        if witness or failed:
            out.add(r.experiment_id)
    return frozenset(out)


__all__ = ["CompressState", "CompressWorkflow", "GatedSet", "SetDecision", "path_hash", "set_suffix"]
