"""A real HTTP server for tests: ``make_app`` served by tornado on a free port in a background
thread (its own event loop), and the job documents and SSE parsing the HTTP tests share."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx
import tornado.netutil
import yaml

from optiflow.interfaces.client import Client
from optiflow.interfaces.http import HttpConfig, make_app, make_server
from tests.support.workers import ROOT

EXAMPLE_DIR = ROOT / "examples" / "support-bot"
SAMPLES = 6


class Server:
    """``make_app(client)`` served from a thread that runs its own event loop."""

    def __init__(self, client: Client, **options: Any) -> None:
        self.client, self.options = client, options
        self.url = ""
        self.port = 0
        self.ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.died: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="http-test", daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # a SystemExit ends a thread silently: keep it for check_alive
            self.died = exc
            raise

    def check_alive(self, request: httpx.Request) -> None:
        """A request to a dead server would wait for its timeout: fail at once, saying why."""
        assert self._thread.is_alive(), f"the HTTP server thread died: {self.died!r}"

    async def _main(self) -> None:
        app = make_app(self.client, **self.options)
        sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
        config = self.options.get("config") or HttpConfig.from_settings(self.client.settings)
        server = make_server(app, config)  # the server `optiflow serve` runs: its timeouts and caps
        self.port = sockets[0].getsockname()[1]
        server.add_sockets(sockets)
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        self.url = f"http://127.0.0.1:{sockets[0].getsockname()[1]}"
        self.ready.set()
        await self._stop.wait()
        server.stop()
        await asyncio.wait_for(server.close_all_connections(), timeout=5)
        app.settings["optiflow_api"].close()

    def __enter__(self) -> Server:
        self._thread.start()
        assert self.ready.wait(10), "the server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        assert not self._thread.is_alive(), "the server did not stop"


def job_document(samples: int = SAMPLES) -> dict[str, Any]:
    """The example as a JSON job document: the prompt file's mapping and the dataset's rows inline
    (one sample per topic first, so the cut still exercises accepted and rejected edits)."""
    job = yaml.safe_load((EXAMPLE_DIR / "job.yaml").read_text())
    prompt = yaml.safe_load((EXAMPLE_DIR / "prompt.yaml").read_text())
    rows = [json.loads(line) for line in (EXAMPLE_DIR / "dataset.jsonl").read_text().splitlines() if line]
    by_topic = {tuple(r.get("tags", ())): r for r in reversed(rows)}
    picked = [*by_topic.values(), *rows][:samples]
    unique = list({r["id"]: r for r in picked}.values())
    return {**job, "name": "support-bot-http", "prompt": prompt, "dataset": unique, "eval_runs": 1}


def read_sse(response: httpx.Response) -> list[dict[str, Any]]:
    """The SSE messages of a response: their fields (``id``, ``event``, ``data``) and comments."""
    messages: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in response.iter_lines():
        if not line:
            if current:
                messages.append(current)
            current = {}
        elif line.startswith(":"):
            current.setdefault("comments", []).append(line[1:].strip())
        else:
            name, _, value = line.partition(":")
            current[name] = value.removeprefix(" ")
    if current:
        messages.append(current)
    return messages


def stored(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The stored events among SSE messages (those with an id), their data parsed."""
    return [{**m, "data": json.loads(m["data"])} for m in messages if "id" in m]
