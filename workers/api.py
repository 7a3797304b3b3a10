"""The API server process: ``python -m workers.api`` (the same as ``optiflow serve``).

optiflow's page, its REST API and its event streams, for the deployment configured by the
``OPTIFLOW_*`` variables; it listens on ``OPTIFLOW_HTTP_HOST``:``OPTIFLOW_HTTP_PORT`` (default
127.0.0.1:8765) until SIGINT/SIGTERM.
"""

from __future__ import annotations

import logging
import sys

from optiflow.errors import OptiflowError
from optiflow.interfaces.client import Client
from optiflow.interfaces.http import serve

log = logging.getLogger("workers.api")


def main() -> None:
    """Exit code 2 with one line for a setting that keeps it from serving (as the CLI)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        run()
    except OptiflowError as exc:
        print(f"error[{exc.code}]: {exc}", file=sys.stderr)
        sys.exit(2)


def run() -> None:
    with Client.from_env() as client:
        settings = client.settings
        mode = "embedded worker: jobs run in this process" if client.runtime.embedded else "distributed"
        serve(
            client,
            settings.http_host,
            settings.http_port,
            on_ready=lambda url: log.info("optiflow API serving on %s (%s)", url, mode),
        )
    log.info("stopped")


if __name__ == "__main__":
    main()
