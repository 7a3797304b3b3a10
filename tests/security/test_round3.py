"""The third round of hardening (issue 27): every number a document sets is bounded where it is
admitted, and templates are data. Each document of the hostile-input run, sent again over HTTP to
the real server: refused with a clear error naming the field, nothing written."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from optiflow.interfaces.client import Client
from tests.security.conftest import Serve, job_ids
from tests.support.http import job_document


def optimize_document(samples: int = 4, **changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(job_document(samples))
    for key in ("strategy", "baseline_tag", "min_section_tokens", "fail_fast", "faithfulness"):
        doc.pop(key, None)
    return {
        **doc,
        "kind": "optimize",
        "optimizer": {"type": "grid", "space": {"temperature": [0.0, 0.5]}},
        "termination": {"max_iterations": 2},
        "acceptance": {"test": "none"},
        **changes,
    }


def demonstrations_document(**optimizer: Any) -> dict[str, Any]:
    doc = optimize_document(8)
    for i, row in enumerate(doc["dataset"]):
        row["split"] = ("train", "val", "test")[i % 3]
    doc["prompt"]["sections"].append({"path": "examples", "body": ""})
    return {
        **doc,
        "splits": True,
        "treatment": {"sections": ["examples"]},
        "optimizer": {"type": "demonstrations", "section": "examples", "k": 2, **optimizer},
    }


def refused(server: Any, client: Client, doc: dict[str, Any], field: str, *words: str) -> dict[str, Any]:
    before = job_ids(client)
    response = httpx.post(f"{server.url}/api/jobs", json=doc, timeout=30)
    assert response.status_code in (400, 403), response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["field"] == field, error
    for word in words:
        assert word in error["message"], error
    assert job_ids(client) == before
    return error


# -- medium 3: templates are data, not code --------------------------------------------------------
@pytest.mark.parametrize(
    "template",
    [
        "{input:>400000000}",
        "{input:>8000000000}",
        "{input:>{expected}}",
        "{input:{expected}}",
        "{0}",
        "{input!r}",
    ],
)
def test_a_format_string_template_is_refused_saying_how_to_write_it(
    serve: Serve, client: Client, template: str
) -> None:
    with serve() as server:
        error = refused(
            server, client, demonstrations_document(template=template), "optimizer.demonstrations.template"
        )
    assert "${input}" in error["message"] and "format" in error["message"]


def test_an_old_plain_template_keeps_its_meaning(serve: Serve, client: Client) -> None:
    from optiflow.core.dataset import Sample
    from optiflow.core.optimize.demonstrations import DemonstrationsSpec, render_demonstrations

    old = DemonstrationsSpec.model_validate({"section": "x", "template": "Q: {input} {{A}}: {expected}"})
    assert old.template == "Q: ${input} {A}: ${expected}"
    shot = render_demonstrations(old, [Sample(id="a", input="cost $5", expected="${x}")])
    assert shot.endswith("Q: cost $$5 {A}: $${x}")  # values are text in a $ template section
    with serve() as server:
        response = httpx.post(f"{server.url}/api/jobs", json=demonstrations_document(), timeout=30)
        assert response.status_code == 201, response.text
        httpx.post(f"{server.url}/api/jobs/{response.json()['id']}/cancel", timeout=30)


def test_a_dataset_cannot_set_a_width_and_values_are_cut(serve: Serve, client: Client) -> None:
    from optiflow.core.dataset import Sample
    from optiflow.core.optimize.demonstrations import DemonstrationsSpec, render_demonstrations

    spec = DemonstrationsSpec.model_validate({"section": "x", "max_value_chars": 10})
    shot = render_demonstrations(spec, [Sample(id="a", input="y" * 50, expected="300000000")])
    assert "y" * 10 + " ..." in shot and "y" * 11 not in shot
    with serve() as server:
        doc = demonstrations_document(max_value_chars=10**9)
        refused(server, client, doc, "optimizer.demonstrations.max_value_chars", "20000")
        doc = demonstrations_document(template="x ${company}")
        refused(server, client, doc, "optimizer.demonstrations.template", "${company}")
        doc = demonstrations_document(template="${input}" * 9, max_value_chars=20_000)  # 9 x 20,000 x k
        refused(server, client, doc, "optimizer.demonstrations.template", "8 times in all")


# -- medium 4, 7; low 15, 16: numbers a document sets ----------------------------------------------
def test_max_section_chars_is_bounded(serve: Serve, client: Client) -> None:
    with serve() as server:
        refused(server, client, optimize_document(max_section_chars=10**12), "max_section_chars", "200,000")


def test_a_grid_is_bounded(serve: Serve, client: Client) -> None:
    space = {"temperature": [i / 1000 for i in range(200)], "top_p": [i / 1000 for i in range(200)]}
    with serve() as server:
        doc = optimize_document(optimizer={"type": "grid", "space": space})
        refused(server, client, doc, "optimizer.space", "40,000 points")


@pytest.mark.parametrize(
    ("optimizer", "field"),
    [
        ({"type": "grid", "space": {"sim_latency_ms": [1e9]}}, "optimizer.space.sim_latency_ms.0"),
        ({"type": "grid", "space": {"sim_ttft_ms": [5, -1]}}, "optimizer.space.sim_ttft_ms.1"),
        (
            {"type": "random", "space": {"sim_latency_ms": {"min": 0, "max": 1e9}}},
            "optimizer.space.sim_latency_ms.max",
        ),
    ],
    ids=["grid 1e9", "grid negative ttft", "random range"],
)
def test_a_simulated_latency_is_bounded_in_a_search_space(
    serve: Serve, client: Client, optimizer: dict[str, Any], field: str
) -> None:
    with serve() as server:
        refused(server, client, optimize_document(optimizer=optimizer), field, "60000 ms")


def test_baseline_latencies_are_bounded(serve: Serve, client: Client) -> None:
    doc = {**job_document(2), "baseline_model_params": {"sim_latency_ms": 1e9}}
    with serve() as server:
        refused(server, client, doc, "baseline_model_params.sim_latency_ms", "60000 ms")


def test_sim_params_are_checked_against_the_effective_model(serve: Serve, client: Client) -> None:
    """Issue 27, low 15: the baseline's model is openai/gpt-4o-mini; sim_latency_ms would go to it."""
    doc = {**job_document(2), "baseline_model_params": {"model": "openai/gpt-4o-mini", "sim_latency_ms": 5}}
    with serve(allowed_models=("openai/*",)) as server:
        refused(
            server,
            client,
            doc,
            "baseline_model_params.sim_latency_ms",
            "sim_latency_ms is an option of the simulated model",
            "'openai/gpt-4o-mini'",
        )
    grid = optimize_document(
        optimizer={"type": "grid", "space": {"model": ["optiflow/sim", "openai/gpt-4o-mini"]}}
    )
    grid["model"] = {"model": "optiflow/sim", "params": {"sim_latency_ms": 5}}
    with serve(allowed_models=("openai/*",)) as server:
        refused(server, client, grid, "model.params.sim_latency_ms", "'openai/gpt-4o-mini'")


def test_20000_samples_x_max_runs_200_is_refused_naming_the_product(serve: Serve, client: Client) -> None:
    """Issue 27, medium 7: the limits counted eval_runs only."""
    rows = [{"id": f"s{i}", "input": "refund please", "expected": "RFD"} for i in range(20_000)]
    paired = {"eval_runs": 1, "gate": {"mode": "paired", "first_runs": 1, "round_runs": 50, "max_runs": 200}}
    auto = {"eval_runs": 2, "gate": {"mode": "auto", "first_runs": 2, "max_runs": 200}}
    with serve() as server:
        refused(
            server,
            client,
            {**job_document(2), "dataset": rows, **paired},
            "gate.max_runs",
            "= 4,000,000 evaluations",
        )
        doc = {**job_document(2), "dataset": rows[:10_000], **auto}
        refused(server, client, doc, "gate.max_runs", "10000 samples x 200 runs (gate.max_runs) = 2,000,000")
        optimize = optimize_document(
            dataset=rows, acceptance={"test": "paired", "max_runs": 200, "first_runs": 2}
        )
        refused(server, client, optimize, "acceptance.max_runs", "= 4,000,000 evaluations")


def test_the_limits_multiply_candidates() -> None:
    from optiflow.admission import admit
    from optiflow.core.limits import LimitError
    from optiflow.jobfile import load_job_data
    from optiflow.settings import Settings

    spec = load_job_data(optimize_document(4), source="body")
    admit(spec, Settings(max_job_evaluations=4 * 8))
    with pytest.raises(LimitError) as info:
        admit(spec, Settings(max_job_evaluations=4 * 8 - 1))
    assert info.value.field == "eval_runs"
    assert (
        "4 samples x 1 runs (eval_runs) x 8 candidates (2 + 2 iterations x 3 per step) = 32"
        in info.value.message
    )


# -- high 2, low 11: the control worker's arithmetic is bounded, and says what ran out ------------
def test_the_power_figure_is_bounded_whatever_the_samples() -> None:
    """Issue 27, high 2: one prediction at 20,000 samples took 62 s and detectable_drop makes 13."""
    import random

    from optiflow.core.gate.power import _predict, step_bound
    from optiflow.core.gate.spec import GateSpec

    rng = random.Random(27)
    spec = GateSpec(mode="paired", first_runs=1, round_runs=50, max_runs=200, margin=0.002)
    rates = [rng.betavariate(3.3, 3.3) for _ in range(20_000)]
    point, steps = _predict(spec, rates, rates)  # a tiny margin keeps paths running every block
    assert steps <= step_bound(spec) and 0 < point.accept < 1


def test_the_power_figure_is_unchanged_on_the_benches_sizes() -> None:
    """48 samples, max_runs 24 (bench/gate.py): the exact computation, as before the bound."""
    import random

    from optiflow.core.gate.power import detectable_drop, predict
    from optiflow.core.gate.spec import GateSpec

    rng = random.Random(3)
    spec = GateSpec(
        mode="paired", margin=0.10, alpha=0.05, beta=0.05, first_runs=3, round_runs=1, max_runs=24
    )
    rates = [rng.betavariate(3.3, 3.3) for _ in range(48)]
    assert detectable_drop(spec, rates) == 0.0831298828125  # main before issue 27, bit for bit
    assert predict(spec, rates, rates).accept == 0.9700162872306535


def test_a_control_task_out_of_time_or_memory_says_what_ran_out() -> None:
    from celery.exceptions import SoftTimeLimitExceeded

    from optiflow.distributed.tasks import control_failure

    timed_out = control_failure(SoftTimeLimitExceeded(), "advance", 300)
    assert "'advance' ran over its time limit (300 s)" in timed_out and "gate.max_runs" in timed_out
    assert "SoftTimeLimitExceeded()" not in timed_out
    assert "ran out of memory" in control_failure(MemoryError(), "advance", 300)
    assert control_failure(ValueError("x"), "start", 300) == "ValueError: x"
