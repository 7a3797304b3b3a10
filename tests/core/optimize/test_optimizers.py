"""The LLM rewrite mutator (pure side) and grid / random search."""

from __future__ import annotations

from datetime import timedelta

import pytest

from optiflow.core.evaluation import TrialSummary
from optiflow.core.model import ModelConfig
from optiflow.core.optimize.configuration import (
    TreatmentFactor,
    config_hash,
    config_params,
    config_sections,
    make_config,
)
from optiflow.core.optimize.history import IterationRecord, TrialHistory
from optiflow.core.optimize.protocol import ModelAssistedOptimizer, RunContext, StopReason
from optiflow.core.optimize.rewrite import (
    LLMRewriteOptimizer,
    RewriteError,
    RewriteOptimizerSpec,
    validate_rewrite,
)
from optiflow.core.optimize.search import GridSearchSpec, RandomSearchSpec, SearchOptimizer
from optiflow.core.optimize.trial import FailingSample, TrialResult
from optiflow.core.step import RewriteReply

from .harness import T0

SUMMARY = TrialSummary(
    total=4,
    passed=2,
    failed=2,
    pass_rate=0.5,
    total_cost=0.0,
    avg_latency_ms=0.0,
    avg_ttft_ms=None,
    total_tokens=0,
)


def trial(cid: str, config: dict[str, object], *, fails: int = 2, score: float = 0.5) -> TrialResult:
    return TrialResult(
        optimization_id="j", candidate_id=cid, mask_id=cid, experiment_id=cid, step_index=0, iteration=0,
        status="completed", objective_score=score, summary=SUMMARY, configuration=config,
        config_hash=config_hash(config),
        failing=tuple(
            FailingSample(sample_id=f"s{i}", input={"q": f"question {i}"}, expected="X", reason="missing")
            for i in range(fails)
        ),
    )  # fmt: skip


def history(*trials: TrialResult) -> TrialHistory:
    its = tuple(
        IterationRecord(
            number=n,
            new_best=n == 0,
            score=0.5,
            best_candidate_id=t.candidate_id,
            best_candidate_so_far="c0",
            best_so_far=0.5,
            started_at=T0,
            ended_at=T0 + timedelta(seconds=n + 1),
        )
        for n, t in enumerate(trials)
    )
    return TrialHistory(started_at=T0, trials=trials, iterations=its)


REWRITE = RewriteOptimizerSpec(model=ModelConfig(model="optiflow/sim"), max_length=40, recent_iterations=3)
BASE = make_config({("rules",): "be nice", ("style",): "short"})


def context(config: dict[str, object]) -> RunContext:
    return RunContext(
        optimization_id="j", evaluation_suite_id="ds", objective_name="sr", baseline_candidate_id="c0",
        baseline_score=0.5, max_candidates_per_step=2, baseline_configuration=config,
        treatment=TreatmentFactor(sections=(("rules",), ("style",))), prompt_id="t/p",
    )  # fmt: skip


def test_validate_rewrite() -> None:
    assert validate_rewrite("  new text \n", 20) == "new text"
    with pytest.raises(RewriteError, match="cannot be empty"):
        validate_rewrite("   ", 20)
    with pytest.raises(RewriteError, match="exceeds max length 5"):
        validate_rewrite("toolong", 5)
    assert RewriteError("x").code == "invalid_rewrite"


def test_rewrite_requests_carry_the_current_value_recent_scores_and_failing_samples() -> None:
    opt = LLMRewriteOptimizer(REWRITE, (("rules",), ("style",)))
    assert isinstance(opt, ModelAssistedOptimizer)
    state = opt.initialize(context(BASE))
    h = history(*(trial(f"c{i}", BASE) for i in range(5)))
    requests = opt.requests(state, h, 2)
    assert [r.id for r in requests] == ["g0-v0", "g0-v1"]
    r = requests[0]
    assert (r.section, r.current, r.max_length, r.prompt_id) == (("rules",), "be nice", 40, "t/p")
    assert [it.iteration for it in r.iterations] == [2, 3, 4]  # the last 3 iterations
    assert r.iterations[0].score == 0.5 and r.iterations[0].success_rate == 0.5
    assert [f.sample_id for f in r.failing] == ["s0", "s1"]
    assert r.failing[0].input == {"q": "question 0"}
    # the next generation rewrites the next section
    assert opt.requests(state.model_copy(update={"generation": 1}), h, 1)[0].section == ("style",)


def test_rewrite_proposals_from_valid_replies_only() -> None:
    opt = LLMRewriteOptimizer(REWRITE, (("rules",),))
    state = opt.initialize(context(BASE))
    h = history(trial("c0", BASE))
    replies = [
        RewriteReply(id="g0-v0", text="be nice and exact"),
        RewriteReply(id="g0-v1", text="x" * 41),
        RewriteReply(id="g0-v2", error="429 rate limited"),
    ]
    state = opt.receive(state, replies)
    proposals = opt.propose(state, h, 3)
    assert len(proposals) == 1
    assert config_sections(proposals[0].configuration) == {
        ("rules",): "be nice and exact",
        ("style",): "short",
    }
    assert proposals[0].parent_candidate_ids == ("c0",)
    assert not opt.should_stop(state, h).should_stop


def test_rewrite_stops_when_every_reply_fails_or_nothing_fails() -> None:
    opt = LLMRewriteOptimizer(REWRITE, (("rules",),))
    state = opt.receive(opt.initialize(context(BASE)), [RewriteReply(id="g0-v0", text="")])
    h = history(trial("c0", BASE))
    assert opt.propose(state, h, 2) == []
    d = opt.should_stop(state, h)
    assert d.should_stop and d.reason is StopReason.ALGORITHM_SPECIFIC
    assert d.message == "mutation failed: Factor value cannot be empty"
    solved = history(trial("c0", BASE, fails=0))
    d = opt.should_stop(opt.initialize(context(BASE)), solved)
    assert d.should_stop and d.reason is StopReason.TARGET_REACHED


PARAMS = make_config({}, {"temperature": 0.7, "model": "a"})


def test_grid_search_walks_the_product_skipping_what_was_seen() -> None:
    spec = GridSearchSpec(space={"temperature": (0.0, 0.7), "model": ("a", "b")})
    assert spec.description() == "Grid search over temperature, model (4 points)"
    opt = SearchOptimizer(spec)
    state = opt.initialize(context(PARAMS))
    h = history(trial("c0", PARAMS))
    first = opt.propose(state, h, 2)
    assert [config_params(p.configuration) for p in first] == [
        {"temperature": 0.0, "model": "a"},
        {"temperature": 0.0, "model": "b"},
    ]
    seen = history(trial("c0", PARAMS), *(trial(f"c{i + 1}", p.configuration) for i, p in enumerate(first)))
    rest = opt.propose(state, seen, 5)
    assert [config_params(p.configuration) for p in rest] == [
        {"temperature": 0.7, "model": "b"}
    ]  # (0.7, a) is c0
    assert spec.default_treatment() is not None


def test_random_search_is_seeded_and_deterministic() -> None:
    spec = RandomSearchSpec.model_validate(
        {
            "space": {"temperature": {"min": 0, "max": 1}, "model": {"choices": ["a", "b"]}},
            "samples": 5,
            "seed": 7,
        }
    )
    assert spec.points() == spec.points()
    other = spec.model_copy(update={"seed": 8})
    assert spec.points() != other.points()
    assert all(0 <= p["temperature"] <= 1 and p["model"] in ("a", "b") for p in spec.points())  # type: ignore[operator]
    opt = SearchOptimizer(spec)
    state = opt.initialize(context(PARAMS))
    props = opt.propose(state, history(trial("c0", PARAMS)), 10)
    assert 1 <= len(props) <= 5
    assert len({config_hash(p.configuration) for p in props}) == len(props)
    integer = RandomSearchSpec.model_validate(
        {"space": {"max_tokens": {"min": 10, "max": 20, "integer": True}}}
    )
    assert all(isinstance(p["max_tokens"], int) for p in integer.points())
