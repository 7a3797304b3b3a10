"""``optiflow model``: models on this machine.

``optiflow model serve-local`` runs llama.cpp's OpenAI-compatible server on 127.0.0.1 with the
SmolLM2-135M-Instruct GGUF that ``make local-model`` installed, prints how a job file names it,
and stops it cleanly on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import signal
from pathlib import Path
from types import FrameType

import click

from optiflow.errors import ConfigError
from optiflow.interfaces.cli._common import echo
from optiflow.llm.local_model import DEFAULT_ALIAS, DEFAULT_PORT, LocalModelServer


class _Stop(Exception):
    """Raised in the main thread by the SIGTERM handler."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Stop


@click.group("model")
def model() -> None:
    """Models on this machine (a real local model for examples, tests and benchmarks)."""


@model.command("serve-local")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=int, help="port on 127.0.0.1")
@click.option("--alias", default=DEFAULT_ALIAS, show_default=True, help="model name the server answers to")
@click.option("--ctx", "n_ctx", default=2048, show_default=True, type=int, help="context size in tokens")
@click.option("--threads", "n_threads", default=None, type=int, help="CPU threads [half the cores]")
@click.option(
    "--log", "log", default=None, type=click.Path(dir_okay=False, path_type=Path), help="server log file"
)
@click.option(
    "--timeout",
    default=120.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="seconds to wait for it to answer",
)
def serve_local(
    port: int, alias: str, n_ctx: int, n_threads: int | None, log: Path | None, timeout: float
) -> None:
    """Serve SmolLM2-135M-Instruct (llama.cpp, OpenAI-compatible) on 127.0.0.1 until Ctrl-C/SIGTERM."""
    server = LocalModelServer(port=port, alias=alias, n_ctx=n_ctx, n_threads=n_threads, log=log)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        server.start(timeout=timeout)
        echo(f"serving {alias} (pid {server.pid}) at {server.api_base}")
        echo("a job file names it as:")
        echo(f"  model: {{model: {server.model}, api_base: {server.api_base},")
        echo("          params: {api_key: local, temperature: 0.7, max_tokens: 6, stream: false}}")
        echo("Ctrl-C or SIGTERM stops it.")
        code = server.wait()
        raise ConfigError(f"the llama.cpp server exited by itself with code {code}", field="local-model")
    except (KeyboardInterrupt, _Stop):
        pass
    finally:
        server.stop()
        signal.signal(signal.SIGTERM, previous)
    echo("stopped")


__all__ = ["model"]
