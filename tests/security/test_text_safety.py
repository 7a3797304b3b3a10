"""The text-safety test: every function that reads document text (the registry,
:mod:`tests.security.text_readers`) runs in linear time on the adversarial corpus
(:mod:`tests.security.text_corpus`): its time grows like its text, within a per-megabyte budget
calibrated on this machine (:mod:`tests.security.linearity`). A reader may refuse a text with a
clear error (an ``OptiflowError`` or a pydantic error naming the field); any other exception
fails it.

Each reader runs every family on its own up to 256 KB (a scan that restarts at every occurrence
of a prefix shows within a few kilobytes), then all its families in one text up to a megabyte (a cost
in the length of the whole text, such as building the answer by concatenation, shows only on a
long one). ``make bench-text-safety`` runs every family up to a megabyte and writes
``bench/text_safety.md``.
"""

from __future__ import annotations

import pytest

from tests.security.linearity import DEEP, QUICK, families_for, measure, scan_seconds_per_mb
from tests.security.text_corpus import GENERIC, composite, families_of
from tests.security.text_readers import READERS, Reader


@pytest.fixture(scope="module")
def scan() -> float:
    return scan_seconds_per_mb()


@pytest.mark.parametrize("reader", READERS, ids=[r.name for r in READERS])
def test_every_text_reader_is_linear(reader: Reader, scan: float) -> None:
    families = families_for(reader, GENERIC, families_of)
    results = [measure(reader, family, QUICK, scan) for family in families]
    results.append(measure(reader, composite(families), DEEP, scan))
    failures = [r.line() for r in results if r.failure is not None]
    assert not failures, "\n".join(failures)


def test_the_registry_names_each_reader_once() -> None:
    names = [r.name for r in READERS]
    assert len(names) == len(set(names))
