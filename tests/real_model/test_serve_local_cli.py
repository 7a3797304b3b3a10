"""``optiflow model serve-local``: refusals name the field (always run); serving and stopping on
SIGTERM (needs the local model)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from optiflow.llm.local_model import free_port, port_in_use
from tests.support.workers import ROOT


def optiflow(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "optiflow.interfaces.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--port", "0"], "--port"),
        (["--port", "70000"], "--port"),
        (["--alias", "a/b"], "--alias"),
        (["--ctx", "16"], "--ctx"),
        (["--threads", "0"], "--threads"),
    ],
)
def test_bad_arguments_name_the_field(args: list[str], field: str) -> None:
    out = optiflow("model", "serve-local", *args)
    assert out.returncode == 2
    assert out.stderr.startswith(f"error[validation_error]: {field}: "), out.stderr


def test_missing_model_file_is_a_clear_error(tmp_path: Path) -> None:
    env = {**os.environ, "OPTIFLOW_LOCAL_MODEL_GGUF": str(tmp_path / "nope.gguf")}
    out = optiflow("model", "serve-local", "--port", str(free_port()), env=env)
    assert out.returncode == 2
    if "llama-cpp-python[server] is not installed" in out.stderr:
        assert out.stderr.startswith("error[config_error]: local-model: ")
    else:
        assert out.stderr.startswith("error[config_error]: OPTIFLOW_LOCAL_MODEL_GGUF: no such file")


@pytest.mark.real_model
def test_serve_local_answers_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "optiflow.interfaces.cli", "model", "serve-local", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # printed once the server answers
        assert first.startswith("serving smollm2 (pid "), first + proc.stderr.read() if proc.stderr else ""
        assert f"http://127.0.0.1:{port}/v1" in first
        assert port_in_use(port)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, err
    assert out.rstrip().endswith("stopped")
    deadline = time.monotonic() + 5
    while port_in_use(port) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not port_in_use(port)
