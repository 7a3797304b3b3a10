"""``optiflow eval`` end to end, in process, on the shipped example and the simulated model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from optiflow.core.overrides import SectionOverride
from optiflow.files import load_prompt
from optiflow.llm.simulated import split_sentences
from tests.cli.conftest import Cli

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support-bot"
PROMPT = str(EXAMPLE / "prompt.yaml")
DATASET = str(EXAMPLE / "dataset.jsonl")
NO_RULE = ["warranty-1", "warranty-2", "giftcard-1", "giftcard-2", "loyalty-1"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("OPTIFLOW_STORE", "OPTIFLOW_REDIS_URL", "OPTIFLOW_DATABASE_URL", "OPTIFLOW_BROKER_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPTIFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPTIFLOW_RETRY_BACKOFF_S", "0.001")
    return tmp_path / "home"


def test_eval_a_prompt_file_without_any_store(cli: Cli, home: Path) -> None:
    code, out, err = cli(
        "eval", "--prompt", PROMPT, "--dataset", DATASET, "--model", "optiflow/sim", "--runs", "2"
    )
    assert code == 0, err
    assert "support/bot" in out and "44 samples x 2 runs" in out
    assert "pass rate            88.6%" in out
    assert "consistently passed  39/44" in out
    assert "evaluations          88 (78 passed, 10 failed" in out
    assert "cost                 $" in out and "avg latency" in out and "ttft" in out
    assert out.strip().splitlines()[-1].endswith(", ".join(NO_RULE))
    assert not home.exists()  # a FILE prompt never opens the store


def test_eval_json_check_and_params(cli: Cli) -> None:
    code, out, err = cli(
        "eval",
        "--prompt",
        PROMPT,
        "--dataset",
        DATASET,
        "--model",
        "optiflow/sim",
        "--check",
        "exact",
        "--param",
        "sim_style=label",
        "--param",
        "sim_latency_ms=0",
        "--json",
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["check"] == "exact" and data["samples"] == 44 and data["runs"] == 1
    assert data["consistently_passed"] == 39 and data["failing"] == NO_RULE and data["errors"] == 0
    assert data["trial"]["total"] == 44 and data["trial"]["total_cost"] > 0
    code, out, _ = cli(
        "eval",
        "--prompt",
        PROMPT,
        "--dataset",
        DATASET,
        "--model",
        "optiflow/sim",
        "--check",
        '{"type": "regex", "pattern": "[A-Z]{3}-\\\\d{3}"}',
        "--json",
    )
    assert code == 0 and json.loads(out)["consistently_passed"] == 39


def test_provider_errors_are_counted(cli: Cli) -> None:
    code, out, _ = cli(
        "eval",
        "--prompt",
        PROMPT,
        "--dataset",
        DATASET,
        "--model",
        "optiflow/sim",
        "--param",
        "sim_error=auth",
        "--param",
        "sim_error_rate=1",
        "--json",
    )
    data = json.loads(out)  # the summary is still printed; nothing was measured: exit 2 (issue 20)
    assert code == 2 and data["errors"] == 44 and data["pass_rate"] == 0.0
    assert "AuthenticationError" in data["first_error"]


def test_eval_ns_key_from_the_store_with_a_tag(cli: Cli, home: Path) -> None:
    from optiflow.stores import FilesystemOverridesStore

    store = FilesystemOverridesStore(home / "store")
    prompt = load_prompt(PROMPT)
    store.put_prompt(prompt)
    billing = prompt.section(("billing",))
    body = "\n".join(s for s in split_sentences(billing.body) if "asks about a refund" not in s)
    store.store(
        prompt.descriptor(),
        [SectionOverride(path=billing.path, expected_hash=billing.hash, body=body)],
        tag="cut",
    )
    store.close()

    code, out, err = cli(
        "eval", "--prompt", "support/bot", "--dataset", DATASET, "--model", "optiflow/sim", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["tag"] == "stable" and json.loads(out)["consistently_passed"] == 39
    code, out, err = cli(
        "eval",
        "--prompt",
        "support/bot",
        "--tag",
        "cut",
        "--dataset",
        DATASET,
        "--model",
        "optiflow/sim",
        "--json",
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["tag"] == "cut" and data["consistently_passed"] == 34
    assert sorted(data["failing"]) == sorted([f"refund-{i}" for i in range(1, 6)] + NO_RULE)
    code, out, err = cli(
        "eval", "--prompt", PROMPT, "--tag", "cut", "--dataset", DATASET, "--model", "optiflow/sim", "--json"
    )
    assert code == 0 and json.loads(out)["consistently_passed"] == 34  # a FILE with --tag reads that tag


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--param", "oops"), "--param: expected key=value"),
        (("--check", "fuzzy"), "--check: unknown check 'fuzzy'"),
        (("--check", '{"type": "llm_judge"}'), "--check"),
        (("--check", "{not json"), "--check: invalid JSON"),
        (("--tag", "bad tag!"), "tag: invalid tag"),
    ],
)
def test_bad_input_is_one_line(cli: Cli, home: Path, args: tuple[str, ...], message: str) -> None:
    code, out, err = cli("eval", "--prompt", PROMPT, "--dataset", DATASET, "--model", "optiflow/sim", *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert not home.exists()


def test_missing_files_and_prompts(cli: Cli, tmp_path: Path) -> None:
    code, _, err = cli(
        "eval", "--prompt", PROMPT, "--dataset", str(tmp_path / "nope.jsonl"), "--model", "optiflow/sim"
    )
    assert code == 2 and "nope.jsonl: file not found" in err
    code, _, err = cli(
        "eval", "--prompt", str(tmp_path / "nope.yaml"), "--dataset", DATASET, "--model", "optiflow/sim"
    )
    assert code == 2 and "nope.yaml: file not found" in err
    code, _, err = cli("eval", "--prompt", "support/missing", "--dataset", DATASET, "--model", "optiflow/sim")
    assert code == 2 and "error[not_found]" in err
    code, _, err = cli("eval", "--prompt", "just-a-word", "--dataset", DATASET, "--model", "optiflow/sim")
    assert code == 2 and "expected NS/KEY" in err


def test_help_is_fast_and_lazy() -> None:
    code = (
        "import sys, time\n"
        "t = time.perf_counter()\n"
        "from optiflow.interfaces.cli import run\n"
        "try:\n"
        "    run(['eval', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(time.perf_counter() - t, 'litellm' in sys.modules, 'optiflow.llm.completion' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "--prompt FILE|NS/KEY" in out.stdout
    elapsed, litellm_loaded, completion_loaded = out.stdout.strip().splitlines()[-1].split()
    assert litellm_loaded == "False" and completion_loaded == "False"
    assert float(elapsed) < 0.5
