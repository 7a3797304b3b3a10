"""Allowlisted ``python`` check functions for the time-bound tests. Stdlib only: a check process
imports this module, and the import must not eat into the check's time bound."""

from __future__ import annotations

import os
import time
from pathlib import Path


def sleep_forever(output: str, expected: object) -> bool:
    """Never returns; first writes its pid into the folder the sample's ``expected`` names, so a
    test can watch its process die."""
    (Path(str(expected)) / str(os.getpid())).touch()
    while True:
        time.sleep(0.05)


def spin_forever(output: str, expected: object) -> bool:
    while True:
        pass


def fine(output: str, expected: object) -> bool:
    return str(expected) in output
