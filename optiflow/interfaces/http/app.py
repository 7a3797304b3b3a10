"""The application (:func:`make_app`) and the server (:func:`serve`).

What the server enforces comes from settings (:class:`HttpConfig`): the guard (token, Host
allowlist), the model policy job documents are checked against, and the largest body (a job's
size caps are checked by the client's admission, as for every submission). :func:`serve` refuses to
listen beyond loopback without a token.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import tornado.httpserver
import tornado.iostream
import tornado.netutil
import tornado.web

from optiflow.core.policy import ModelPolicy
from optiflow.errors import ConfigError
from optiflow.interfaces.http import handlers as h
from optiflow.interfaces.http.api import Api
from optiflow.interfaces.http.guard import Guard, is_loopback

if TYPE_CHECKING:
    from optiflow.interfaces.client import Client
    from optiflow.settings import Settings

log = logging.getLogger("optiflow.interfaces.http")


@dataclass(frozen=True)
class HttpConfig:
    """What the server enforces (:meth:`from_settings`: the ``OPTIFLOW_*`` settings)."""

    guard: Guard
    policy: ModelPolicy
    max_body_bytes: int
    header_timeout_s: float = 10.0
    """Headers must arrive within this; the connection is closed otherwise (and when idle that long)."""
    body_timeout_s: float = 60.0
    """A body must arrive within this; the connection is closed otherwise."""
    max_bodies: int = 8
    """Job documents read at once: at most ``max_bodies x max_body_bytes`` held by bodies."""
    max_streams: int = 200
    """Event streams open at once."""
    max_connections: int = 1000
    """Connections held at once; one more is closed as it arrives."""

    @classmethod
    def from_settings(cls, settings: Settings) -> HttpConfig:
        token = settings.api_token.get_secret_value() if settings.api_token is not None else None
        return cls(
            guard=Guard.build(token, settings.allowed_hosts),
            policy=load_model_policy(settings),
            max_body_bytes=settings.max_body_bytes,
            header_timeout_s=settings.http_header_timeout_s,
            body_timeout_s=settings.http_body_timeout_s,
            max_bodies=settings.http_max_bodies,
            max_streams=settings.http_max_streams,
            max_connections=settings.http_max_connections,
        )

    def bound_to(self, host: str) -> HttpConfig:
        return replace(self, guard=self.guard.with_host(host))


def load_model_policy(settings: Settings) -> ModelPolicy:
    """``OPTIFLOW_ALLOWED_MODELS`` and the file ``OPTIFLOW_MODEL_POLICY`` (YAML or JSON)::

    models:
      - openai/gpt-4o-mini
      - anthropic/*
      - {model: openai/smollm2, api_base: "http://127.0.0.1:8012/v1"}
    params: [tools, tool_choice]     # beyond the safe generation params
    """
    from pydantic import ValidationError as PydanticError

    from optiflow.files import read_yaml

    models: list[Any] = list(settings.allowed_models)
    params: list[str] = []
    if settings.model_policy is not None:
        where = "OPTIFLOW_MODEL_POLICY"
        try:
            data = read_yaml(settings.model_policy)
        except Exception as exc:
            raise ConfigError(f"{settings.model_policy}: {exc}", field=where) from None
        if not isinstance(data, Mapping) or set(data) - {"models", "params"}:
            raise ConfigError(
                f"{settings.model_policy}: expected a mapping of models and params", field=where
            )
        models += list(data.get("models") or ())
        params += [str(p) for p in data.get("params") or ()]
    try:
        return ModelPolicy.build(models, params, allow_sim=settings.http_allow_sim)
    except PydanticError as exc:
        raise ConfigError(
            f"a model entry is not a name or {{model, api_base}}: {exc}", field="model policy"
        ) from None


def make_app(
    client: Client,
    *,
    poll_s: float = 0.25,
    keepalive_s: float = 15.0,
    threads: int = 16,
    config: HttpConfig | None = None,
) -> tornado.web.Application:
    """The application for ``client`` (``config``: default from ``client.settings``);
    ``app.settings["optiflow_api"].close()`` stops its pool."""
    config = config or HttpConfig.from_settings(client.settings)
    api = Api(
        client,
        policy=config.policy,
        max_body_bytes=config.max_body_bytes,
        poll_s=poll_s,
        keepalive_s=keepalive_s,
        threads=threads,
        max_bodies=config.max_bodies,
        max_streams=config.max_streams,
    )
    args = {"api": api, "guard": config.guard}
    job = r"/api/jobs/([^/]+)"
    return tornado.web.Application(
        [
            (r"/", h.PageHandler, args),
            (r"/jobs/([^/]+)", h.PageJobHandler, args),
            (r"/page/(page\.css|page\.js)", h.PageHandler, args),
            (r"/healthz", h.HealthHandler, args),
            (r"/readyz", h.ReadyHandler, args),
            (r"/api/openapi.json", h.OpenApiHandler, args),
            (r"/api/jobs", h.JobsHandler, args),
            (job, h.JobHandler, args),
            (job + "/cancel", h.CancelHandler, args),
            (job + "/events", h.EventsHandler, args),
            (job + "/prompt", h.JobPromptHandler, args),
            (job + "/trials", h.JobTrialsHandler, args),
            (r"/api/measures", h.MeasuresHandler, args),
            (r"/api/limits", h.LimitsHandler, args),
        ],
        default_handler_class=h.MissingHandler,
        default_handler_args=args,
        optiflow_api=api,
    )


class BoundedHTTPServer(tornado.httpserver.HTTPServer):
    """tornado's server holding at most ``max_connections`` connections: one more is closed as it
    arrives (its headers, even when they never come, would hold a socket and a buffer until the
    header timeout)."""

    max_connections = 1000

    def handle_stream(self, stream: tornado.iostream.IOStream, address: tuple[str, int]) -> None:
        if len(self._connections) >= self.max_connections:
            log.warning(
                "%d connections open (OPTIFLOW_HTTP_MAX_CONNECTIONS): one more closed", self.max_connections
            )
            stream.close()
            return
        super().handle_stream(stream, address)


def make_server(
    app: tornado.web.Application, config: HttpConfig, *, xheaders: bool = False
) -> BoundedHTTPServer:
    """The HTTP server for ``app``, bounding slow clients: headers within ``header_timeout_s`` (also
    how long an idle keep-alive connection stays), a body within ``body_timeout_s``, at most
    ``max_connections`` connections."""
    server = BoundedHTTPServer(
        app,
        xheaders=xheaders,
        max_body_size=config.max_body_bytes + 1024 * 1024,  # /api/jobs answers 413 itself first
        idle_connection_timeout=config.header_timeout_s,
        body_timeout=config.body_timeout_s,
    )
    server.max_connections = config.max_connections
    return server


def check_exposure(host: str, config: HttpConfig) -> None:
    """Beyond loopback the API must have a token: ConfigError (the CLI's one line, exit 2)."""
    if config.guard.token is None and not is_loopback(host):
        raise ConfigError(
            f"listening on {host or 'every interface'!r} (beyond loopback) needs a token: set "
            "OPTIFLOW_API_TOKEN (e.g. openssl rand -hex 32), or listen on 127.0.0.1",
            field="OPTIFLOW_API_TOKEN",
        )


def serve(
    client: Client,
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve until SIGINT or SIGTERM (call from the main thread), then close open streams and
    return; closing ``client`` is the caller's. ``on_ready`` gets the URL once it listens (port 0
    picks a free port). ConfigError, before listening, when ``host`` is beyond loopback and no
    token is set."""
    config = HttpConfig.from_settings(client.settings)
    check_exposure(host, config)
    asyncio.run(_serve(client, host, port, config.bound_to(host), on_ready))


async def _serve(
    client: Client, host: str, port: int, config: HttpConfig, on_ready: Callable[[str], None] | None
) -> None:
    app = make_app(client, config=config)
    sockets = tornado.netutil.bind_sockets(port, address=host or None)
    server = make_server(app, config, xheaders=client.settings.http_proxy_headers)
    server.add_sockets(sockets)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        if on_ready is not None:
            on_ready(_url(sockets[0].getsockname()))
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        server.stop()
        try:  # event streams notice the closed connection at their next poll
            await asyncio.wait_for(server.close_all_connections(), timeout=5)
        except TimeoutError:
            log.warning("some connections did not close within 5 s")
        app.settings["optiflow_api"].close()


def _url(address: Sequence[Any]) -> str:
    host, port = str(address[0]), int(address[1])
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
