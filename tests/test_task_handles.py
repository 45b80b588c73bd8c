"""Task handles on a real broker: typed enqueues, the worker's check, typed results."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit_handlers import Report, Sent, send_report
from tests.namespace import TestBroker
from tests.test_worker import failed_records
from warren_cron.client import Client, SyncClient
from warren_cron.errors import EnqueueError
from warren_cron.worker.registry import Registry, default_registry

pytestmark = pytest.mark.broker


def kit_registry() -> Registry:
    """A registry with the typed handlers of ``tests.kit_handlers``."""
    mine = Registry()
    for name in ("kit-report", "kit-greet"):
        found = default_registry.get(name)
        assert found is not None and found.origin is not None
        mine.register(name, found.origin)
    return mine


async def test_a_handle_enqueues_and_reads_its_typed_result(
    client: Client, run_worker: Any
) -> None:
    """``enqueue`` through the client sends the model as JSON; the worker hands the handler
    the model, and ``result`` reads the returned model back."""
    await run_worker(kit_registry())
    done = await send_report.enqueue(Report(customer=9), client=client)
    assert await send_report.result(done, client=client, timeout=30) == Sent(customer=9, pages=3)


async def test_a_wrong_payload_at_enqueue_publishes_nothing(
    broker: TestBroker, client: Client
) -> None:
    """The handle refuses a payload that does not fit, naming the field; the main queue
    stays empty."""
    with pytest.raises(EnqueueError, match=r"customer: Field required"):
        await send_report.enqueue({"period": "weekly"}, client=client)  # type: ignore[arg-type]
    assert await broker.depth(broker.names.main_queue) == 0


async def test_a_wrong_payload_at_the_worker_fails_permanent_without_retries(
    broker: TestBroker, client: Client, run_worker: Any
) -> None:
    """Sent by name past the handle's check, the payload fails at the worker as
    ``invalid-payload`` on its first attempt, with the field's problem, no retry spent."""
    await run_worker(kit_registry())
    await client.enqueue("kit-report", {"customer": "many"}, plan="1s-1s-1s")
    [record] = await failed_records(broker, 1)
    assert record.headers["cron-reason"] == "invalid-payload"
    assert record.headers["cron-attempts"] == 1
    assert "customer: Input should be a valid integer" in record.headers["cron-error"]


def test_a_sync_client_enqueues_through_a_handle(broker: TestBroker) -> None:
    """``enqueue_sync`` through a ``SyncClient``: the task is in the main queue."""
    with SyncClient(broker.settings()) as sync:
        done = send_report.enqueue_sync(Report(customer=3), client=sync, delay=0)
    assert done.created and done.run_id.startswith("once:kit-report@")
