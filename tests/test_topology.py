"""The topology on a real broker: exact names, idempotent declares, nothing ever lost."""

from __future__ import annotations

import aio_pika
import pytest

from tests.conftest import plan
from tests.helpers import envelope, publish, publish_raw
from tests.namespace import TestBroker
from warren_cron import codec
from warren_cron.declare import PlanDeclarer, declare_topology
from warren_cron.errors import TopologyError
from warren_cron.names import Names

pytestmark = pytest.mark.broker


def test_default_namespace_gives_the_documented_names() -> None:
    """Namespace cron gives exactly the names operators and the design use."""
    names = Names()
    assert (names.tasks_exchange, names.main_queue, names.dlx) == (
        "cron_tasks",
        "cron_scheduler",
        "cron_dlx",
    )
    assert names.retry_queue("30s-1m-2m") == "cron_scheduler_retry.30s-1m-2m"
    assert (names.failed_queue, names.monitor_queue) == ("cron_scheduler_failed", "cron_monitor")
    assert names.lock_queue("nightly") == "cron_lock.nightly"


async def test_declaring_twice_and_after_a_plan_change_never_raises(broker: TestBroker) -> None:
    """Every process declares on start; repeats and new plans coexist with old queues."""
    await broker.declare()
    await broker.declare()
    channel = await broker.channel()
    await PlanDeclarer(channel, broker.names, "classic").declare(plan(200, 400))
    await PlanDeclarer(channel, broker.names, "classic").declare(plan(200, 400))
    await PlanDeclarer(channel, broker.names, "classic").declare(plan(300, 400))
    for key in ("200ms-400ms", "300ms-400ms", "400ms"):
        await channel.declare_queue(broker.names.retry_queue(key), passive=True)


async def test_a_failed_record_reaches_both_failed_and_monitor_queues(broker: TestBroker) -> None:
    """The monitor gets its own copy, so consuming it leaves the failed queue whole."""
    topology = await broker.declare()
    await topology.dlx.publish(aio_pika.Message(b"{}"), "failed", mandatory=True)
    assert await broker.depth(broker.names.failed_queue) == 1
    assert await broker.depth(broker.names.monitor_queue) == 1


async def test_an_undeclared_plan_is_caught_by_the_alternate_exchange(broker: TestBroker) -> None:
    """A NACKed message whose retry queue was never declared lands in the failed queue."""
    await broker.declare()
    await publish_raw(broker, codec.encode(envelope("noop")), "7s-9s")
    await broker.reject_head()
    await broker.wait_depth(broker.names.failed_queue, 1)
    [kept] = await broker.get_all(broker.names.failed_queue)
    assert kept.routing_key == "7s-9s"
    assert kept.headers["x-death"][0]["reason"] == "rejected"


async def test_quorum_queues_get_the_at_least_once_arguments(broker: TestBroker) -> None:
    """With CRON_QUEUE_TYPE=quorum, dead-lettering is at-least-once with a delivery limit."""
    broker.queue_type = "quorum"
    await broker.declare()
    await publish(broker, envelope("noop"), plan(100))
    channel = await broker.channel()
    with pytest.raises(aio_pika.exceptions.ChannelPreconditionFailed):
        # Same name, other type: proves the queue really is a quorum queue.
        await channel.declare_queue(
            broker.names.main_queue, durable=True, arguments={"x-queue-type": "classic"}
        )
    assert await broker.depth(broker.names.main_queue) == 1


async def test_changing_the_queue_type_is_a_clear_error(broker: TestBroker) -> None:
    """Switching CRON_QUEUE_TYPE on existing queues names the setting instead of crashing."""
    await broker.declare()
    channel = await broker.channel()
    with pytest.raises(TopologyError, match="CRON_QUEUE_TYPE"):
        await declare_topology(channel, broker.names, broker.settings(queue_type="quorum"))
