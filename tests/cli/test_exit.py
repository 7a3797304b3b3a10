"""The ``optiflow`` command ends without the interpreter's last garbage collections walking
litellm's objects (3 to 5 s of a busy machine's time at every exit, issue 29): the command freezes
the collector at exit; a caller of ``run(argv)`` in its own process (tests) is left alone."""

from __future__ import annotations

import gc
import sys
from unittest import mock

import pytest

from optiflow.interfaces.cli import run


def test_the_command_freezes_the_collector_at_exit_and_a_caller_in_process_is_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with mock.patch("atexit.register") as register:
        run(["--version"])
        assert register.call_count == 0
        monkeypatch.setattr(sys, "argv", ["optiflow", "--version"])
        run()
    register.assert_called_once_with(gc.freeze)
