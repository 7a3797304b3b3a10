"""The floor any Celery + litellm system pays: a chord whose tasks each make one litellm call to
the simulated model and nothing else. Run by ``celery -A bench.bare worker -Q bench.bare``.

As lean as Celery allows, so the floor is not flattered: no task events, and the header tasks store
no result of their own (their return values reach the chord's list only), as optiflow's."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from celery.signals import worker_init

REDIS_URL = os.environ.get("OPTIFLOW_REDIS_URL", "redis://127.0.0.1:6379/13")
PREFIX = os.environ.get("OPTIFLOW_KEY_PREFIX", "optiflow-bench")
QUEUE = "bench.bare"

app = Celery("bench", broker=REDIS_URL, backend=REDIS_URL, set_as_current=False)
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_default_queue=QUEUE,
    broker_transport_options={"global_keyprefix": f"{PREFIX}:"},
    worker_hijack_root_logger=False,
)


@worker_init.connect
def _warm(**_: Any) -> None:
    from optiflow.llm.runtime import get_litellm

    get_litellm()
    messages(0)


_MESSAGES: list[list[dict[str, str]]] = []


def messages(i: int) -> list[dict[str, str]]:
    """The example's prompt rendered for its samples: the same call an optiflow evaluation makes."""
    if not _MESSAGES:
        from optiflow.jobfile import load_job
        from tests.support.workers import ROOT

        spec = load_job(ROOT / "examples" / "support-bot" / "job.yaml")
        _MESSAGES.extend(spec.prompt.render(s.input).messages() for s in spec.dataset.samples)
    return _MESSAGES[i % len(_MESSAGES)]


@app.task(name="bench.call", ignore_result=True)  # like optiflow's header tasks: the chord alone
def call(i: int, latency_ms: int) -> dict[str, Any]:
    from optiflow.llm.runtime import get_litellm

    r = get_litellm().completion(
        model="optiflow/sim", messages=messages(i), sim_latency_ms=latency_ms, timeout=60, num_retries=0
    )
    return {"i": i, "tokens": r.usage.total_tokens}


@app.task(name="bench.done", ignore_result=True)
def done(results: list[dict[str, Any]], key: str) -> None:
    import time

    import redis

    redis.Redis.from_url(REDIS_URL).set(key, f"{time.time()}:{len(results)}", ex=3600)
