"""The local real model (``make local-model``) for the ``real_model`` tests.

``local_model`` starts llama.cpp's server with SmolLM2-135M-Instruct on a free 127.0.0.1 port for
the module and stops it afterwards (no process outlives the tests). Without the optional extra
the tests are skipped, with the reason, also under CI=true: the extra is optional.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from optiflow.llm.local_model import LocalModelServer, free_port, missing_reason


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    reason = missing_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"local model not installed ({reason})")
    for item in items:
        if item.get_closest_marker("real_model") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def local_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModelServer]:
    log: Path = tmp_path_factory.mktemp("llama") / "server.log"
    server = LocalModelServer(port=free_port(), log=log)
    server.start(timeout=120)
    pid = server.pid
    try:
        yield server
    finally:
        server.stop()
    assert pid is not None
    assert not _alive(pid), f"llama.cpp server {pid} still running after stop()"


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still "exists": read its state
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False
