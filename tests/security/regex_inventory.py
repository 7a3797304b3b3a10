"""Every regular expression optiflow's code runs with Python's ``re`` (a backtracking engine), found
by reading the source: each call ``re.compile / search / match / fullmatch / findall / finditer /
sub / subn / split``, keyed by where it is (module, the enclosing top-level name) and what it
compiles (the literal pattern, or the expression that builds it).

``tests/security/test_regex_inventory.py`` requires each to be in :data:`tests.security.
linear_patterns.LINEAR` with the reason it runs in linear time, and, when it reads document
text, the text-safety reader that exercises it. User patterns (``regex`` checks) run on RE2, whose
calls are not ``re.`` calls.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "optiflow"
RE_FUNCTIONS = frozenset(
    {"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"}
)


@dataclass(frozen=True, order=True)
class Use:
    module: str
    owner: str
    """The top-level function, class or assignment the call is in (``<module>`` at top level)."""
    pattern: str
    """The pattern's literal text, or the source of the expression that builds it."""
    line: int = 0

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.module, self.owner, self.pattern)

    def where(self) -> str:
        return f"{self.module}:{self.line} ({self.owner}): {self.pattern[:80]!r}"


def _owner(node: ast.stmt) -> str:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name
    if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    return "<module>"


def _pattern(call: ast.Call) -> str:
    arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "pattern"), None)
    if arg is None:
        return "<none>"
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    return ast.unparse(arg)


def uses_in(path: Path) -> list[Use]:
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[Use] = []
    for top in tree.body:
        owner = _owner(top)
        for node in ast.walk(top):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "re"
                and node.func.attr in RE_FUNCTIONS
            ):
                out.append(Use(module, owner, _pattern(node), node.lineno))
    return out


def inventory() -> list[Use]:
    """Every ``re.*`` call in ``optiflow/``, in file order."""
    return [use for path in sorted(PACKAGE.rglob("*.py")) for use in uses_in(path)]


__all__ = ["PACKAGE", "RE_FUNCTIONS", "Use", "inventory", "uses_in"]
