"""The http task end to end: a real worker calling a real local endpoint."""

from __future__ import annotations

from typing import Any

import pytest
from chaoslib.waits import eventually

from tests.conftest import TestBroker, plan
from tests.helpers import envelope, publish
from tests.webhook import Endpoint, serve

pytestmark = pytest.mark.broker


async def test_a_404_goes_to_the_failed_queue_after_one_attempt(
    broker: TestBroker, run_worker: Any
) -> None:
    """A 4xx is terminal: one request, then a record with the status and body excerpt."""
    with serve(Endpoint(statuses=[404])) as endpoint:
        await run_worker()
        await publish(broker, envelope("http", {"url": f"{endpoint.url}/hook"}), plan(50, 50))
        await broker.wait_depth(broker.names.failed_queue, 1)
    [record] = await broker.get_all(broker.names.failed_queue)
    assert len(endpoint.requests) == 1
    assert record.headers["cron-reason"] == "permanent-error"
    assert (
        "HTTP 404" in record.headers["cron-error"] and "not here!" in record.headers["cron-error"]
    )


async def test_a_503_is_retried_and_the_attempt_header_counts_up(
    broker: TestBroker, run_worker: Any
) -> None:
    """5xx answers are retried; the endpoint sees X-Cron-Attempt 1, 2, 3 and the same run id."""
    with serve(Endpoint(statuses=[503, 503, 200])) as endpoint:
        await run_worker()
        env = envelope("http", {"url": f"{endpoint.url}/hook", "json": {"a": 1}})
        await publish(broker, env, plan(50, 50, 50))
        await eventually(lambda: len(endpoint.requests) >= 3)
    attempts = [headers["X-Cron-Attempt"] for _, headers, _ in endpoint.requests]
    assert attempts == ["1", "2", "3"]
    assert {headers["X-Cron-Run-Id"] for _, headers, _ in endpoint.requests} == {env.run_id}
    assert await broker.depth(broker.names.failed_queue) == 0
