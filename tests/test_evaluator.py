"""One-process evaluation on the shipped example: summaries, and regressions of overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from optiflow.core.checks import ContainsCheck, ExactCheck
from optiflow.core.dataset import Dataset, Sample
from optiflow.core.evaluation import EvalResult, regressions
from optiflow.core.model import ModelConfig
from optiflow.core.overrides import PromptOverrides, SectionOverride
from optiflow.core.prompt import Prompt
from optiflow.evaluator import evaluate, evaluate_dataset, summaries
from optiflow.files import load_dataset, load_prompt
from optiflow.llm.simulated import split_sentences

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "support-bot"
SIM = ModelConfig(model="optiflow/sim")
CONTAINS = ContainsCheck()
NO_RULE = {"warranty-1", "warranty-2", "giftcard-1", "giftcard-2", "loyalty-1"}


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPTIFLOW_RETRY_BACKOFF_S", "0.001")


@pytest.fixture(scope="module")
def prompt() -> Prompt:
    return load_prompt(EXAMPLE / "prompt.yaml")


@pytest.fixture(scope="module")
def dataset() -> Dataset:
    return load_dataset(EXAMPLE / "dataset.jsonl")


def override(
    prompt: Prompt, section: str, drop: tuple[str, ...] = (), keep_only_rules: bool = False
) -> SectionOverride:
    base = prompt.section((section,))
    sentences = split_sentences(base.body)
    if keep_only_rules:
        sentences = [s for s in sentences if "reply with code" in s or "${" in s]
    kept = [s for s in sentences if not s.startswith(drop)] if drop else sentences
    return SectionOverride(path=base.path, expected_hash=base.hash, body="\n".join(kept))


def tag(
    prompt: Prompt, *sections: SectionOverride, params: dict[str, object] | None = None
) -> PromptOverrides:
    return PromptOverrides(
        ns=prompt.ns, key=prompt.key, tag="t", sections=sections, model_params=params or {}
    )


def run(
    prompt: Prompt, dataset: Dataset, overrides: PromptOverrides | None, runs: int = 2
) -> list[EvalResult]:
    return evaluate_dataset(
        prompt=prompt,
        overrides=overrides,
        dataset=dataset,
        check=CONTAINS,
        model=SIM,
        runs=runs,
        experiment_id="x",
    )


def test_summary_of_the_example(prompt: Prompt, dataset: Dataset) -> None:
    results = run(prompt, dataset, None, runs=3)
    assert len(results) == 3 * len(dataset)
    assert [(r.run, r.sample_id) for r in results[:2]] == [(0, dataset.ids()[0]), (0, dataset.ids()[1])]
    summary, trial = summaries(results, dataset)
    assert summary.runs == 3
    assert summary.consistently_passed == frozenset(dataset.ids()) - NO_RULE
    assert summary.pass_rate == pytest.approx(39 / 44)
    assert trial.total == 132 and trial.passed == 117 and trial.failed == 15
    assert trial.total_cost > 0 and trial.total_tokens > 132 * 1400
    assert trial.avg_latency_ms > 0 and trial.avg_ttft_ms is not None
    r = results[0]
    assert r.output and r.error is None and r.prompt_tokens > 1400 and r.experiment_id == "x"


def test_removing_a_needed_instruction_fails_exactly_its_samples(prompt: Prompt, dataset: Dataset) -> None:
    baseline, _ = summaries(run(prompt, dataset, None), dataset)
    cut = tag(prompt, override(prompt, "billing", drop=("When a customer asks about a refund",)))
    candidate, _ = summaries(run(prompt, dataset, cut), dataset)
    assert regressions(baseline.consistently_passed, candidate) == {f"refund-{i}" for i in range(1, 6)}
    two = tag(
        prompt,
        override(prompt, "shipping", drop=("When a customer asks about a delayed delivery",)),
        override(prompt, "security", drop=("When a customer asks about two-factor",)),
    )
    candidate, _ = summaries(run(prompt, dataset, two), dataset)
    expected = {f"delayed-{i}" for i in range(1, 5)} | {f"2fa-{i}" for i in range(1, 4)}
    assert regressions(baseline.consistently_passed, candidate) == expected


def test_removing_only_filler_regresses_nothing(prompt: Prompt, dataset: Dataset) -> None:
    baseline_results = run(prompt, dataset, None)
    baseline, base_trial = summaries(baseline_results, dataset)
    mutable = [s.path[0] for s in prompt.sections if not s.frozen]
    filler_only = tag(prompt, *(override(prompt, name, keep_only_rules=True) for name in mutable))
    results = run(prompt, dataset, filler_only)
    candidate, trial = summaries(results, dataset)
    assert regressions(baseline.consistently_passed, candidate) == frozenset()
    assert candidate.pass_rate == baseline.pass_rate
    assert trial.total_tokens < base_trial.total_tokens * 0.6  # the filler was most of the prompt


def test_tag_model_params_are_layered(prompt: Prompt, dataset: Dataset) -> None:
    small = Dataset(samples=dataset.samples[:3])
    results = run(prompt, small, tag(prompt, params={"sim_style": "label"}), runs=1)
    assert [r.output for r in results] == [str(s.expected) for s in small]
    exact = evaluate_dataset(
        prompt=prompt,
        overrides=tag(prompt, params={"sim_style": "label"}),
        dataset=small,
        check=ExactCheck(),
        model=SIM,
        runs=1,
        experiment_id="x",
        concurrency=1,
    )
    assert all(r.passed for r in exact)


def test_provider_errors_become_failed_results(prompt: Prompt, dataset: Dataset) -> None:
    broken = SIM.model_copy(update={"params": {"sim_error": "auth", "sim_error_rate": 1.0}})
    r = evaluate(
        prompt=prompt,
        overrides=None,
        sample=dataset.samples[0],
        check=CONTAINS,
        model=broken,
        run=0,
        experiment_id="e",
    )
    assert not r.passed and not r.success and r.error is not None and "AuthenticationError" in r.error
    flaky = SIM.model_copy(
        update={"params": {"sim_fail_attempts": 1, "sim_error": "rate_limit"}, "retries": 1}
    )
    ok = evaluate(
        prompt=prompt,
        overrides=None,
        sample=dataset.samples[0],
        check=CONTAINS,
        model=flaky,
        run=0,
        experiment_id="e",
    )
    assert ok.passed and ok.error is None


def test_render_error_is_a_failed_result(prompt: Prompt) -> None:
    sample = Sample(id="bad", input={"question": "refund?"}, expected="RFD-201")  # no company
    r = evaluate(
        prompt=prompt, overrides=None, sample=sample, check=CONTAINS, model=SIM, run=0, experiment_id="e"
    )
    assert not r.passed and r.error is not None and "company" in r.error


def test_runs_must_be_positive(prompt: Prompt, dataset: Dataset) -> None:
    from optiflow.errors import ValidationError

    with pytest.raises(ValidationError):
        run(prompt, dataset, None, runs=0)
