"""``optiflow.core`` is pure: stdlib, pydantic, ``optiflow.core.*`` and ``optiflow.errors`` only.

Every ``import`` / ``from`` statement of every module is checked, wherever it is (module level,
inside functions, under ``if TYPE_CHECKING``), relative imports resolved against the package.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import optiflow.core

CORE = Path(optiflow.core.__file__).resolve().parent
ALLOWED_THIRD_PARTY = frozenset(
    {"pydantic", "pydantic_core", "typing_extensions", "annotated_types", "scipy"}  # scipy: Mann-Whitney U
)
ALLOWED_OPTIFLOW = ("optiflow.core", "optiflow.errors")


def module_name(path: Path) -> str:
    parts = path.relative_to(CORE.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``source``."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                assert node.module is not None
                found.append((node.lineno, node.module))
                continue
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
            if node.module:
                found.append((node.lineno, ".".join([*base, node.module])))
            else:  # ``from . import x``: each name is a module of the package (or a name in it)
                found.extend((node.lineno, ".".join([*base, alias.name])) for alias in node.names)
    return sorted(found)


def forbidden(name: str) -> bool:
    top = name.partition(".")[0]
    if top == "optiflow":
        return not any(name == allowed or name.startswith(allowed + ".") for allowed in ALLOWED_OPTIFLOW)
    return top not in sys.stdlib_module_names and top not in ALLOWED_THIRD_PARTY and top != "__future__"


def violations(path: Path) -> list[str]:
    module = module_name(path)
    imports = imported_modules(path.read_text(encoding="utf-8"), module, path.name == "__init__.py")
    return [
        f"{path.relative_to(CORE.parent.parent)}:{line}: {name}" for line, name in imports if forbidden(name)
    ]


CORE_FILES = sorted(CORE.rglob("*.py"))


def test_core_has_modules() -> None:
    assert len(CORE_FILES) >= 10, CORE_FILES


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(CORE)))
def test_core_module_imports_only_stdlib_pydantic_and_core(path: Path) -> None:
    assert violations(path) == []


# -- the checker itself can fail ------------------------------------------------------------------
BAD = """\
import json
from typing import TYPE_CHECKING
import pydantic
from optiflow.core.base import Frozen
from optiflow.errors import ValidationError
from . import prompt
from .. import errors
import celery.canvas
from sqlalchemy import select
if TYPE_CHECKING:
    from redis import Redis

def f():
    import litellm
    from optiflow.stores import keys
    from ..llm import tokens
    from .. import settings
"""


def test_checker_flags_every_impure_import() -> None:
    found = imported_modules(BAD, "optiflow.core.example", is_package=False)
    bad = [(line, name) for line, name in found if forbidden(name)]
    assert bad == [
        (8, "celery.canvas"),
        (9, "sqlalchemy"),
        (11, "redis"),
        (14, "litellm"),
        (15, "optiflow.stores"),
        (16, "optiflow.llm"),
        (17, "optiflow.settings"),
    ]
    ok = {name for _, name in found if not forbidden(name)}
    assert ok == {
        "json",
        "typing",
        "pydantic",
        "optiflow.core.base",
        "optiflow.errors",
        "optiflow.core.prompt",
    }


def test_checker_reports_a_real_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_core = tmp_path / "optiflow" / "core"
    fake_core.mkdir(parents=True)
    bad = fake_core / "leaky.py"
    bad.write_text("def f():\n    import redis\n")
    monkeypatch.setattr(sys.modules[__name__], "CORE", fake_core)
    assert violations(bad) == ["optiflow/core/leaky.py:2: redis"]
