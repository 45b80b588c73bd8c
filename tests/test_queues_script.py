"""warren queues against a real broker: every queue of the namespace, over AMQP only."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import plan
from tests.failed_records import json_out, put_failed, run_warren
from tests.helpers import Recorder, envelope, publish
from tests.namespace import TestBroker
from warren_cron.client import Client
from warren_cron.worker.registry import Registry

pytestmark = pytest.mark.broker


async def test_every_queue_is_shown_with_depth_consumers_and_age(broker: TestBroker) -> None:
    """Main, each retry queue of the default plan, failed and monitor, with their numbers."""
    await publish(broker, envelope("job"), plan(60_000, 120_000))
    await broker.reject_head()
    await broker.wait_depth(broker.names.retry_queue("1m-2m"), 1)
    await put_failed(broker, 2)
    rows = json_out(
        run_warren(broker, "queues", "--json", CRON_MAX_RETRIES="2", CRON_RETRY_DELAY_MS="60000")
    )
    by_queue = {row["queue"]: row for row in rows}
    names = broker.names
    assert [row["role"] for row in rows] == ["main", "retry", "retry", "failed", "monitor"]
    assert by_queue[names.main_queue]["messages"] == 0
    waiting = by_queue[names.retry_queue("1m-2m")]
    assert (waiting["messages"], waiting["consumers"], waiting["ttl_ms"]) == (1, 0, 60_000)
    assert 0 <= waiting["oldest_seconds"] < 60
    assert by_queue[names.retry_queue("2m")]["messages"] == 0
    assert by_queue[names.failed_queue]["messages"] == 2
    assert by_queue[names.failed_queue]["oldest_seconds"] < 60
    assert await broker.depth(names.retry_queue("1m-2m")) == 1  # looking took nothing


async def test_delay_levels_holding_tasks_are_shown(broker: TestBroker, client: Client) -> None:
    """A task delayed an hour waits in level 11 (2^11 s), its highest bit; empty levels are
    left out."""
    await client.enqueue("job", delay=3600)
    rows = json_out(run_warren(broker, "queues", "--json"))
    delayed = [row for row in rows if row["role"] == "delayed"]
    assert [(row["queue"], row["messages"], row["ttl_ms"]) for row in delayed] == [
        (broker.names.delay_level(11), 1, 2048_000)
    ]


async def test_retry_queues_of_older_plans_are_found_in_failed_records(
    broker: TestBroker, run_worker: Any
) -> None:
    """A plan no longer configured still shows, through the history of a failed task."""
    registry = Registry()
    registry.register("job", Recorder(failures=100))
    await run_worker(registry)
    await publish(broker, envelope("job"), plan(50))
    await broker.wait_depth(broker.names.failed_queue, 1)
    result = run_warren(broker, "queues")
    assert result.returncode == 0, result.stderr
    header, *lines = result.stdout.splitlines()
    assert header.split() == ["QUEUE", "ROLE", "MESSAGES", "CONSUMERS", "OLDEST", "TTL"]
    retry = next(line.split() for line in lines if " retry " in line)
    assert retry[0] == broker.names.retry_queue("50ms") and retry[-1] == "50ms"
    worker_row = next(line.split() for line in lines if " main " in line)
    assert worker_row[3] == "1"  # the worker's consumer


async def test_a_namespace_without_queues_is_a_clear_error(broker: TestBroker) -> None:
    """Nothing declared under CRON_NAMESPACE: exit 2 saying which variable to check."""
    result = run_warren(broker, "queues")
    assert result.returncode == 2 and "CRON_NAMESPACE" in result.stderr
