"""deploy/k8s/keda.yaml scales on the right Redis list: the one kombu fills for optiflow.eval.

A step's tasks are published the way the driver publishes them (the project's Celery app and its
routes, one batch of pipelined messages) to the real Redis under a test key prefix, with no worker
to take them; then LLEN of the manifest's ``listName`` (its prefix, config.yaml's
OPTIFLOW_KEY_PREFIX, swapped for the test's) counts exactly the pending eval messages.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
import yaml
from celery import group

from optiflow.distributed.app import QUEUE_CONTROL, QUEUE_EVAL, create_app
from optiflow.distributed.publishing import batched
from optiflow.settings import Settings
from tests.support.workers import ROOT

K8S = ROOT / "deploy" / "k8s"
EVALUATIONS = 37


def doc(path: str, kind: str) -> dict[str, Any]:
    (found,) = [d for d in yaml.safe_load_all((K8S / path).read_text()) if d and d["kind"] == kind]
    return found


@pytest.fixture
def trigger() -> dict[str, str]:
    (redis_trigger,) = [
        t for t in doc("keda.yaml", "ScaledObject")["spec"]["triggers"] if t["type"] == "redis"
    ]
    metadata: dict[str, str] = redis_trigger["metadata"]
    return metadata


def test_the_trigger_reads_the_deployments_redis(trigger: dict[str, str]) -> None:
    """KEDA takes host:port and a database index; they are config.yaml's OPTIFLOW_REDIS_URL."""
    url = urlsplit(doc("config.yaml", "ConfigMap")["data"]["OPTIFLOW_REDIS_URL"])
    assert trigger["address"] == f"{url.hostname}:{url.port or 6379}"
    assert trigger["databaseIndex"] == (url.path.strip("/") or "0")
    assert int(trigger["listLength"]) > 0


@pytest.mark.redis
def test_list_name_counts_the_pending_eval_messages(
    trigger: dict[str, str], redis_url: str, redis_prefix: str
) -> None:
    deployed_prefix = doc("config.yaml", "ConfigMap")["data"]["OPTIFLOW_KEY_PREFIX"]
    list_name = trigger["listName"]
    assert list_name.startswith(f"{deployed_prefix}:"), f"{list_name} is not under {deployed_prefix}:"
    key = redis_prefix + list_name.removeprefix(deployed_prefix)

    app = create_app(Settings(redis_url=redis_url, key_prefix=redis_prefix), embedded=False)
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.llen(key) == 0
        evaluate, propose = app.tasks["optiflow.evaluate"], app.tasks["optiflow.propose"]
        header = [propose.s("job-1", "tone")]
        header += [
            evaluate.s("job-1", "job-1-baseline", "opt-job-1-0", f"s{i}", 0, False)
            for i in range(EVALUATIONS)
        ]
        with batched(app):  # as the driver publishes a step: one batch, pipelined
            group(header).apply_async()
            app.tasks["optiflow.recover"].apply_async(queue=QUEUE_CONTROL)  # a control message
        assert client.llen(key) == EVALUATIONS + 1
        tasks = [json.loads(raw)["headers"]["task"] for raw in client.lrange(key, 0, -1)]
        assert sorted(set(tasks)) == ["optiflow.evaluate", "optiflow.propose"]
        # the control queue is another list, which the eval workers' scaler does not count
        control = redis_prefix + list_name.removeprefix(deployed_prefix).replace(QUEUE_EVAL, QUEUE_CONTROL)
        assert control != key and client.llen(control) == 1
    finally:
        client.close()
        app.close()
