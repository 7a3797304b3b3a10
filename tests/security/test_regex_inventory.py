"""No backtracking pattern reads document text unless it is proven linear and the text-safety test
exercises it (issue 27). Every ``re.compile / search / match / fullmatch / findall / finditer /
sub / subn / split`` in ``optiflow/`` (:mod:`tests.security.regex_inventory`) must be listed in
:data:`tests.security.linear_patterns.LINEAR` with its reason; one that reads document text names
the text-safety reader that runs it, and that reader, run on the corpus, really calls it (traced
with ``sys.setprofile``: every call of a compiled pattern's method is seen, whatever built it).
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from importlib import import_module
from types import FrameType
from typing import Any

import pytest

from tests.security.linear_patterns import LINEAR, TEMPLATE_USES
from tests.security.linearity import families_for
from tests.security.regex_inventory import PACKAGE, ROOT, inventory
from tests.security.text_corpus import GENERIC, _compiled, families_of
from tests.security.text_readers import READERS, Reader

NAMES = {r.name: r for r in READERS}


def _key(module: str, owner: str, pattern: str) -> tuple[str, str, str]:
    return (module.removeprefix("optiflow."), owner, pattern)


def test_every_regex_in_optiflow_is_listed_as_linear() -> None:
    found = {_key(u.module, u.owner, u.pattern): u for u in inventory()}
    missing = [u.where() for k, u in sorted(found.items()) if k not in LINEAR]
    assert not missing, (
        "patterns not in tests/security/linear_patterns.py (say why each runs in linear time and which "
        "text-safety reader exercises it, or run it on RE2):\n" + "\n".join(missing)
    )
    stale = [k for k in LINEAR if k not in found]
    assert not stale, f"entries for patterns the code no longer has: {stale}"


def test_each_listed_reader_is_in_the_registry() -> None:
    named = {reader for _, reader in LINEAR.values() if reader} | set(TEMPLATE_USES.values())
    assert named <= set(NAMES), sorted(named - set(NAMES))
    assert all(reason.strip() for reason, _ in LINEAR.values())


def test_every_string_template_user_is_listed() -> None:
    users = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        if "Template" in names or "Template" in attrs:
            users.add(".".join(path.relative_to(ROOT).with_suffix("").parts))
    assert users == set(TEMPLATE_USES), users ^ set(TEMPLATE_USES)


# -- the named reader really calls its patterns ------------------------------------------------------
@contextmanager
def traced() -> Iterator[set[str]]:
    """The source text of every compiled pattern whose method is called meanwhile."""
    used: set[str] = set()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call":
            owner = getattr(arg, "__self__", None)
            if isinstance(owner, re.Pattern):
                used.add(str(owner.pattern))

    sys.setprofile(profile)
    try:
        yield used
    finally:
        sys.setprofile(None)


def _run(reader: Reader, size: int = 4096) -> set[str]:
    families = families_for(reader, GENERIC, families_of)
    with traced() as used:
        for family in families:
            arg = reader.prepare(family.text(size))
            reader.setup()
            with suppress(reader.raises):
                reader.read(arg)
    return used


DYNAMIC = {
    (
        "core.faithfulness",
        "mentioned",
    ): "built per answer label (a literal): exercised when a label is stated",
    ("core.faithfulness", "_chat"): "the CHAT phrases, checked through the CHAT tuple below",
    ("core.optimize.params", "ParameterBlockSpec"): "built per parameter name: traced through _line('limit')",
}
"""Patterns built at call time from parts that are not document text: their concrete text is not in
the module, so the trace checks them through the object that holds them."""


def _expected(module: str, owner: str, pattern: str) -> set[str]:
    """The concrete pattern texts a listed entry stands for."""
    mod = import_module(f"optiflow.{module}")
    if (module, owner) == ("core.faithfulness", "_chat"):
        return {str(p.pattern) for _, s in mod.CHAT for p in _compiled(s)}
    if (module, owner) == ("core.optimize.params", "ParameterBlockSpec"):
        from tests.security.text_readers import BLOCK

        return {BLOCK._line("limit").pattern}
    held = {str(p.pattern) for p in _compiled(getattr(mod, owner, None))}
    if held:
        return held
    return {pattern}


DOCUMENT_ENTRIES = sorted(
    (k, reader) for k, (_, reader) in LINEAR.items() if reader and k[:2] != ("core.faithfulness", "mentioned")
)
"""Entries that read document text and whose patterns the trace can name (a label's pattern is
built per job from its labels)."""


@pytest.mark.parametrize("reader_name", sorted({reader for _, reader in DOCUMENT_ENTRIES}))
def test_the_named_reader_runs_its_patterns(reader_name: str) -> None:
    used = _run(NAMES[reader_name])
    unused = [
        f"{module}:{owner}"
        for (module, owner, pattern), reader in DOCUMENT_ENTRIES
        if reader == reader_name and not (_expected(module, owner, pattern) & used)
    ]
    assert not unused, f"{reader_name} never calls: {unused}"


def test_no_format_string_comes_from_a_document() -> None:
    """Templates are data: every ``str.format`` / ``format_map`` in ``optiflow/`` formats a string
    literal or an UPPER_CASE module constant, never a value a document sets (a demonstrations
    template was one: ``{input:>400000000}``, issue 27)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in ("format", "format_map"):
                continue
            target = node.func.value
            literal = isinstance(target, ast.Constant) and isinstance(target.value, str)
            constant = isinstance(target, ast.Name) and target.id.isupper()
            if not (literal or constant):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)[:80]}")
    assert not found, "format strings that are not constants:\n" + "\n".join(found)
