"""A rate-limited OpenAI-compatible provider on 127.0.0.1, for tests and benchmarks.

litellm reaches it as ``openai/<any name>`` with ``api_base=http://127.0.0.1:PORT/v1`` (and any
``api_key``). It answers ``POST /v1/chat/completions`` as the simulated model does
(:class:`optiflow.llm.simulated.SimulatedModel`: the same rules, so a job's decisions are the
same as on ``optiflow/sim``), non-streaming or streaming (SSE).

It enforces its own limits, shared by every client as a real provider's are: requests per minute
and tokens per minute (prompt + completion tokens of the answer), each a GCRA bucket holding
``burst_s`` seconds of its rate (a provider enforcing its per-minute limits per second, as OpenAI
does). A request past either gets ``429`` with ``Retry-After`` (whole seconds, rounded up),
``retry-after-ms`` and the ``x-ratelimit-*`` headers (``limit``, ``remaining``, ``reset`` for
requests and tokens), which every answer carries. The limits are checked when the request
arrives; ``latency_ms`` passes after that, before the answer.

Admin endpoints: ``GET /admin/stats`` (counters: requests, accepted, rejected, tokens, and with
``?times=1`` the arrival time of every accepted request, server clock), ``POST /admin/reset``
(counters and buckets), ``POST /admin/config`` (``{"rpm", "tpm", "burst_s", "latency_ms"}``;
``null`` / 0 for no limit).

Run it with ``python -m tests.support.ratelimited_server --port 0 --rpm 1200``; it prints
``listening on http://127.0.0.1:PORT`` once it accepts connections. :class:`RateLimitedServer`
starts and stops it as a child process.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parents[2]


class Bucket:
    """GCRA: ``rate_per_min`` with a bucket of ``burst_s`` seconds of it. A cost larger than the
    bucket is taken when the bucket is full (then owed)."""

    def __init__(self, rate_per_min: float, burst_s: float) -> None:
        self.rate = rate_per_min / 60.0
        self.capacity = max(1.0, self.rate * burst_s)
        self.tat = 0.0

    def wait(self, cost: float, now: float) -> float:
        """Seconds until ``cost`` can be taken (0: now)."""
        at = self.tat - (self.capacity - min(cost, self.capacity)) / self.rate
        return max(0.0, at - now)

    def take(self, cost: float, now: float) -> None:
        self.tat = max(self.tat, now) + cost / self.rate

    def remaining(self, now: float) -> int:
        return max(0, math.floor(self.capacity - max(0.0, self.tat - now) * self.rate))

    def reset_s(self, now: float) -> float:
        return max(0.0, self.tat - now)


def duration(seconds: float) -> str:
    """OpenAI's reset format: ``20ms``, ``1.5s``, ``6m0s``."""
    if seconds < 1:
        return f"{max(1, round(seconds * 1000))}ms"
    if seconds < 60:
        return f"{seconds:.3g}s"
    return f"{int(seconds // 60)}m{int(seconds % 60)}s"


@dataclass
class Provider:
    rpm: float | None = None
    tpm: float | None = None
    burst_s: float = 1.0
    latency_ms: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: int = 0
    accepted: int = 0
    rejected: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    times: list[float] = field(default_factory=list)
    _rb: Bucket | None = None
    _tb: Bucket | None = None

    def __post_init__(self) -> None:
        self.configure({})

    def configure(self, changes: dict[str, Any]) -> None:
        for name in ("rpm", "tpm", "burst_s", "latency_ms"):
            if name in changes:
                setattr(self, name, changes[name] or (1.0 if name == "burst_s" else None))
        self.latency_ms = self.latency_ms or 0.0
        self._rb = Bucket(self.rpm, self.burst_s) if self.rpm else None
        self._tb = Bucket(self.tpm, self.burst_s) if self.tpm else None

    def reset(self) -> None:
        self.requests = self.accepted = self.rejected = 0
        self.prompt_tokens = self.completion_tokens = 0
        self.times = []
        self.configure({})

    def admit(self, tokens: int) -> tuple[float, dict[str, str]]:
        """(seconds to wait, 0 when admitted; the x-ratelimit headers)."""
        now = time.monotonic()
        with self.lock:
            self.requests += 1
            wait = 0.0
            if self._rb is not None:
                wait = self._rb.wait(1, now)
            if self._tb is not None:
                wait = max(wait, self._tb.wait(tokens, now))
            if wait == 0:
                if self._rb is not None:
                    self._rb.take(1, now)
                if self._tb is not None:
                    self._tb.take(tokens, now)
                self.accepted += 1
                self.times.append(time.time())
            else:
                self.rejected += 1
            headers: dict[str, str] = {}
            for kind, bucket, limit in (("requests", self._rb, self.rpm), ("tokens", self._tb, self.tpm)):
                if bucket is None or limit is None:
                    continue
                headers[f"x-ratelimit-limit-{kind}"] = f"{limit:g}"
                headers[f"x-ratelimit-remaining-{kind}"] = str(bucket.remaining(now))
                headers[f"x-ratelimit-reset-{kind}"] = duration(bucket.reset_s(now))
            return wait, headers

    def served(self, prompt: int, completion: int) -> None:
        with self.lock:
            self.prompt_tokens += prompt
            self.completion_tokens += completion

    def stats(self, times: bool) -> dict[str, Any]:
        with self.lock:
            out: dict[str, Any] = {
                "rpm": self.rpm,
                "tpm": self.tpm,
                "burst_s": self.burst_s,
                "latency_ms": self.latency_ms,
                "requests": self.requests,
                "accepted": self.accepted,
                "rejected": self.rejected,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "now": time.time(),
            }
            if times:
                out["times"] = list(self.times)
            return out


def make_handler(provider: Provider) -> type[BaseHTTPRequestHandler]:
    from optiflow.llm.simulated import SimulatedModel

    sim = SimulatedModel()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            return json.loads(raw) if raw else {}

        def do_GET(self) -> None:
            if self.path.startswith("/admin/stats"):
                self._send(200, provider.stats("times=1" in self.path))
            elif self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": "ratelimited", "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            try:
                body = self._body()
            except (ValueError, UnicodeDecodeError):
                self._send(400, {"error": {"message": "invalid JSON", "type": "invalid_request_error"}})
                return
            if self.path == "/admin/reset":
                provider.reset()
                self._send(200, {"ok": True})
            elif self.path == "/admin/config":
                with provider.lock:
                    provider.configure(body)
                self._send(200, provider.stats(False))
            elif self.path.rstrip("/").endswith("/chat/completions"):
                self._complete(body)
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def _complete(self, body: dict[str, Any]) -> None:
            messages = body.get("messages") or []
            reply = sim.reply(messages, {}, {}, sleep=False)
            tokens = reply.prompt_tokens + reply.completion_tokens
            wait, headers = provider.admit(tokens)
            if wait > 0:
                headers["retry-after"] = str(max(1, math.ceil(wait)))
                headers["retry-after-ms"] = str(max(1, math.ceil(wait * 1000)))
                message = f"Rate limit reached for requests. Please try again in {duration(wait)}."
                self._send(
                    429,
                    {"error": {"message": message, "type": "requests", "code": "rate_limit_exceeded"}},
                    headers,
                )
                return
            if provider.latency_ms > 0:
                time.sleep(provider.latency_ms / 1000.0)
            provider.served(reply.prompt_tokens, reply.completion_tokens)
            usage = {
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "total_tokens": tokens,
            }
            ident = f"chatcmpl-{uuid.uuid4().hex[:16]}"
            model = str(body.get("model") or "ratelimited")
            if body.get("stream"):
                self._stream(
                    ident,
                    model,
                    reply.text,
                    usage,
                    headers,
                    bool((body.get("stream_options") or {}).get("include_usage")),
                )
                return
            self._send(
                200,
                {
                    "id": ident,
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": reply.text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage,
                },
                headers,
            )

        def _stream(
            self,
            ident: str,
            model: str,
            text: str,
            usage: dict[str, int],
            headers: dict[str, str],
            with_usage: bool,
        ) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()

            def chunk(delta: dict[str, Any], finish: str | None, extra: dict[str, Any] | None = None) -> None:
                payload = {
                    "id": ident,
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                    **(extra or {}),
                }
                self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())

            chunk({"role": "assistant", "content": text}, None)
            chunk({}, "stop")
            if with_usage:
                payload = {
                    "id": ident,
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [],
                    "usage": usage,
                }
                self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler


def serve(port: int, provider: Provider) -> None:
    server = ThreadingHTTPServer((HOST, port), make_handler(provider))
    server.daemon_threads = True
    server.request_queue_size = 1024
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    print(f"listening on http://{HOST}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()


class RateLimitedServer:
    """The server as a child process (its own GIL: the clients' load does not slow it down)."""

    def __init__(
        self,
        *,
        rpm: float | None = None,
        tpm: float | None = None,
        burst_s: float = 1.0,
        latency_ms: float = 0.0,
    ) -> None:
        self.config = {"rpm": rpm, "tpm": tpm, "burst_s": burst_s, "latency_ms": latency_ms}
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    @property
    def api_base(self) -> str:
        return f"{self.url}/v1"

    def start(self, timeout: float = 30) -> RateLimitedServer:
        argv = [sys.executable, "-m", "tests.support.ratelimited_server", "--port", "0"]
        for name, value in self.config.items():
            if value:
                argv += [f"--{name.replace('_', '-')}", str(value)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        line = ""
        while time.monotonic() < deadline and not line.startswith("listening on "):
            line = self.proc.stdout.readline()
            if not line and self.proc.poll() is not None:
                raise RuntimeError("the rate-limited server exited before listening")
        if not line.startswith("listening on "):
            self.stop()
            raise RuntimeError("the rate-limited server did not start")
        self.url = line.split()[-1]
        return self

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def stats(self, times: bool = False) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/admin/stats" + ("?times=1" if times else ""))
        return result

    def reset(self) -> None:
        self._call("POST", "/admin/reset", {})

    def configure(self, **changes: Any) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", "/admin/config", changes)
        return result

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> RateLimitedServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--rpm", type=float, default=None)
    parser.add_argument("--tpm", type=float, default=None)
    parser.add_argument("--burst-s", type=float, default=1.0)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    serve(args.port, Provider(rpm=args.rpm, tpm=args.tpm, burst_s=args.burst_s, latency_ms=args.latency_ms))


if __name__ == "__main__":
    main()
