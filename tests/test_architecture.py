"""The architecture holds: every layer rule of ``[tool.importlinter]`` in pyproject.toml (the one
place they are written) is kept, and breaking one fails this test.

import-linter reads every ``import`` of every module (module level, inside functions, under
``if TYPE_CHECKING``) of the ``optiflow`` and ``workers`` packages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the checkout at ``root`` (its pyproject.toml, its packages)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports_command; lint_imports_command()",
            "--no-cache",
            "--config",
            str(root / "pyproject.toml"),
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_every_layer_rule_is_kept() -> None:
    run = lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("optiflow/stores/memory.py", "import optiflow.distributed.driver", "Layers import downward only"),
        ("optiflow/llm/tokens.py", "from optiflow.interfaces import client", "Layers import downward only"),
        ("optiflow/core/prompt.py", "import redis", "The core is pure"),
        ("optiflow/persistence/engine.py", "import workers.app", "workers/ are entry points"),
    ],
)
def test_a_forbidden_import_breaks_its_contract(
    tmp_path: Path, module: str, line: str, contract: str
) -> None:
    copy = tmp_path / "checkout"
    copy.mkdir()
    shutil.copy(ROOT / "pyproject.toml", copy)
    for package in ("optiflow", "workers"):
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / module
    target.write_text(target.read_text() + f"\n{line}  # the forbidden import\n")
    run = lint_imports(copy)
    assert run.returncode != 0
    broken = run.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken, run.stdout
