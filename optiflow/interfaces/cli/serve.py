"""``optiflow serve``: optiflow's page and HTTP API (REST + Server-Sent Events).

tornado and the client are imported inside the command: ``optiflow --help`` stays fast.
"""

from __future__ import annotations

import ipaddress
import re

import click

from optiflow.errors import ConfigError, ValidationError
from optiflow.interfaces.cli._common import echo, settings


@click.command()
@click.option("--host", default=None, help="address to listen on [OPTIFLOW_HTTP_HOST, else 127.0.0.1]")
@click.option(
    "--port",
    default=None,
    type=click.IntRange(0, 65535),
    help="port to listen on, 0 for a free one [OPTIFLOW_HTTP_PORT, else 8765]",
)
def serve(host: str | None, port: int | None) -> None:
    """Serve the jobs page and the HTTP API until Ctrl-C/SIGTERM.

    GET / is the page; /api/jobs lists and submits jobs; /api/jobs/ID/events streams a job's
    events. Beyond 127.0.0.1 it needs OPTIFLOW_API_TOKEN (every /api request then carries it);
    see the README's Security section. On the embedded default, jobs submitted here run in this
    process."""
    from optiflow.interfaces.client import Client
    from optiflow.interfaces.http import serve as serve_http

    s = settings()
    address = check_host(host or s.http_host, "--host" if host else "OPTIFLOW_HTTP_HOST")
    listen_port = s.http_port if port is None else port
    with Client(s) as client:
        if client.runtime.embedded:
            echo("embedded: jobs submitted here run in this process (set OPTIFLOW_REDIS_URL for workers)")
        try:
            serve_http(
                client,
                address,
                listen_port,
                on_ready=lambda url: echo(f"serving on {url} (Ctrl-C stops)"),
            )
        except OSError as exc:  # the address is not this machine's, the port is taken, ...
            raise ConfigError(
                f"cannot listen on {address}:{listen_port}: {exc.strerror or exc}", field="--host/--port"
            ) from None
    echo("stopped")


_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)


def check_host(host: str, field: str) -> str:
    """An IP address, or a host name that is not a malformed address (``256.1.1.1`` would be
    looked up as a name); ValidationError naming ``field`` otherwise."""
    try:
        ipaddress.ip_address(host.strip("[]"))
        return host
    except ValueError:
        pass
    if _HOSTNAME.match(host) and not host.replace(".", "").isdigit():
        return host
    raise ValidationError(f"{host!r} is not an IP address or host name", field=field)


COMMANDS = [serve]
