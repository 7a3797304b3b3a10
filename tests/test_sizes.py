"""Sizes the code is held to: no module in optiflow/ over 800 lines, no function over 120
(issue 28). A part that grows past them is split by concern, not by line count."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "optiflow"
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 120


def _modules() -> list[Path]:
    found = sorted(ROOT.rglob("*.py"))
    assert len(found) > 50, "the package was not found"
    return found


def test_no_module_over_800_lines() -> None:
    over = {
        str(p.relative_to(ROOT)): n
        for p in _modules()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not over, f"modules over {MAX_MODULE_LINES} lines: {over}"


def test_no_function_over_120_lines() -> None:
    over = {}
    for p in _modules():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                n = (node.end_lineno or node.lineno) - first + 1
                if n > MAX_FUNCTION_LINES:
                    over[f"{p.relative_to(ROOT)}:{node.name}"] = n
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines: {over}"
