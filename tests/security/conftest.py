"""The security regression suite runs against the real server: ``make_app`` served by tornado on a
free port (:class:`tests.support.http.Server`) over a real client (an embedded Celery worker, or
Redis and real workers where the item involves them)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from optiflow.interfaces.client import Client
from optiflow.interfaces.http import HttpConfig
from tests.support.http import Server
from tests.support.workers import embedded_settings

TOKEN = "test-token-6f1d2c7a9b"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

Serve = Callable[..., AbstractContextManager[Server]]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("security-home")


@pytest.fixture(scope="module")
def client(home: Path) -> Iterator[Client]:
    with Client(embedded_settings(home)) as c:
        yield c


@pytest.fixture(scope="module")
def serve(client: Client) -> Serve:
    """``serve(**settings)``: a server for ``client`` whose HTTP settings (api_token,
    allowed_hosts, allowed_models, max_body_bytes, max_sample_runs ...) are ``settings``."""

    @contextmanager
    def start(**settings: Any) -> Iterator[Server]:
        if isinstance(settings.get("api_token"), str):
            settings["api_token"] = SecretStr(settings["api_token"])
        config = HttpConfig.from_settings(client.settings.model_copy(update=settings))
        with Server(client, poll_s=0.05, keepalive_s=0.3, config=config) as server:
            yield server

    return start


def job_ids(client: Client) -> set[str]:
    return {rec.id for rec in client.runtime.jobs.list(limit=1000)}
