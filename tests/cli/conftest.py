"""The in-process CLI runner shared by the CLI tests. Each test module defines its own ``home``
fixture (the OPTIFLOW_HOME it runs under); ``cli`` depends on it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from optiflow.interfaces.cli import run

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(home: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    """Run ``optiflow ARGS...`` in process: (exit code, stdout, stderr)."""

    def invoke(*args: str) -> tuple[int, str, str]:
        try:
            run(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return code, out.out, out.err

    return invoke
