"""The in-process CLI runner shared by the CLI tests. Each test module defines its own ``home``
fixture (the OPTIFLOW_HOME it runs under); ``cli`` depends on it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(home: Path, cli_runner: Cli) -> Cli:
    """Run ``optiflow ARGS...`` in process under this module's ``home``."""
    return cli_runner
