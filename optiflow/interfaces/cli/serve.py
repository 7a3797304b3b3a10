"""``optiflow serve``: optiflow's page and HTTP API (REST + Server-Sent Events).

tornado and the client are imported inside the command: ``optiflow --help`` stays fast.
"""

from __future__ import annotations

import click

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
    with Client(s) as client:
        if client.runtime.embedded:
            echo("embedded: jobs submitted here run in this process (set OPTIFLOW_REDIS_URL for workers)")
        serve_http(
            client,
            host or s.http_host,
            s.http_port if port is None else port,
            on_ready=lambda url: echo(f"serving on {url} (Ctrl-C stops)"),
        )
    echo("stopped")


COMMANDS = [serve]
