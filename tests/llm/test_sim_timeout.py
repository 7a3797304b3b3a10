"""The simulated model honours ``model.timeout`` as a real provider does: an answer slower than
the timeout is a timeout error (transient: retried, then reported), not a late answer."""

from __future__ import annotations

import pytest

from optiflow.core.model import ModelConfig
from optiflow.llm.completion import complete

MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.mark.parametrize("stream", [False, True])
def test_latency_over_the_timeout_is_a_transient_timeout_error(stream: bool) -> None:
    slow = ModelConfig(
        model="optiflow/sim", params={"sim_latency_ms": 5000, "stream": stream}, timeout=0.2, retries=1
    )
    result = complete(slow, MESSAGES, backoff_base_s=0)
    assert result.error is not None and "timeout" in result.error.lower(), result.error
    assert result.transient and result.attempts == 2  # retried once, like a provider's timeout
    assert result.latency_ms < 4000  # waited the timeouts, not the simulated latency


@pytest.mark.parametrize("stream", [False, True])
def test_latency_under_the_timeout_answers(stream: bool) -> None:
    quick = ModelConfig(model="optiflow/sim", params={"sim_latency_ms": 20, "stream": stream}, timeout=5)
    result = complete(quick, MESSAGES, backoff_base_s=0)
    assert result.ok and result.output, result.error
