"""A failure record and its publishing channel: the task is acked only once its record is
confirmed, and a channel the broker closed and reopened does not cost the record its reason."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from aio_pika.abc import AbstractRobustChannel, AbstractRobustConnection
from aiormq.abc import DeliveredMessage
from aiormq.exceptions import ChannelNotFoundEntity

from tests.conftest import plan
from tests.helpers import envelope, publish
from tests.namespace import TestBroker
from warren_cron.broker.connect import connect, publish_channel
from warren_cron.broker.underlay import underlay
from warren_cron.delay import DelayDeclarer
from warren_cron.headers import H_REASON
from warren_cron.names import FINAL_KEY
from warren_cron.plan import RetryPlan
from warren_cron.records import Failure
from warren_cron.worker import fate
from warren_cron.worker import later as later_module
from warren_cron.worker.acks import Acks
from warren_cron.worker.delivery import Delivery
from warren_cron.worker.fate import Settler
from warren_cron.worker.later import Later

pytestmark = pytest.mark.broker
FAILURE = Failure("permanent-error", "bad input", 1)


@dataclass
class Parts:
    """A task delivered on a consuming channel, and a worker's publishing channel."""

    delivery: Delivery
    acks: Acks
    publisher: AbstractRobustChannel
    connection: AbstractRobustConnection

    async def fail(self, broker: TestBroker) -> None:
        """Fail the task as a worker's settler does, its records on the publishing channel."""
        dlx = await self.publisher.get_exchange(broker.names.dlx, ensure=False)
        await Settler(dlx, None, self.publisher.ready).fail(self.delivery, FAILURE, "r1")
        await self.acks.flush()


@pytest.fixture
async def parts(broker: TestBroker) -> AsyncIterator[Parts]:
    """One task of the final step, delivered and not settled; a publishing channel beside."""
    await publish(broker, envelope("t"), plan())
    raw = await underlay(await broker.channel())
    delivered: asyncio.Queue[DeliveredMessage] = asyncio.Queue()
    await raw.basic_consume(broker.names.main_queue, delivered.put)
    acks = Acks(raw)
    delivery = Delivery(await asyncio.wait_for(delivered.get(), 10), acks)
    connection = await connect(broker.settings(), "test:record-publisher")
    yield Parts(delivery, acks, await publish_channel(connection), connection)
    await connection.close()


async def close_by_broker(broker: TestBroker, channel: AbstractRobustChannel) -> None:
    """Make the broker close ``channel`` (a passive declare of a queue that does not exist)."""
    with pytest.raises(ChannelNotFoundEntity):
        await channel.declare_queue(f"{broker.names.namespace}_missing", passive=True)
    assert channel.is_closed


async def test_a_record_goes_out_with_its_reason_once_its_channel_is_reopened(
    broker: TestBroker, parts: Parts
) -> None:
    """The publishing channel closed by the broker as a task fails: the record waits for it."""
    await close_by_broker(broker, parts.publisher)
    await parts.fail(broker)
    [record] = await broker.get_all(broker.names.failed_queue)
    assert record.headers[H_REASON] == "permanent-error"
    assert record.headers.get("x-death") is None  # published by the worker, not dead-lettered


async def test_a_record_not_confirmed_in_time_leaves_the_task_to_the_broker(
    broker: TestBroker, parts: Parts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No channel to publish on: the task is NACKed, and the broker dead-letters the final
    step into the failed queue, never acked without a record."""
    monkeypatch.setattr(fate, "RECORD_TIMEOUT_SECONDS", 1.0)
    await parts.connection.close()
    await parts.fail(broker)
    await broker.wait_depth(broker.names.failed_queue, 1)  # the broker dead-letters it after
    [dead] = await broker.get_all(broker.names.failed_queue)
    assert H_REASON not in dead.headers and dead.headers["x-death"][0]["reason"] == "rejected"


async def cut(*_: object) -> None:
    """A publish failed as aiormq fails one under way when it drops its connection as stuck
    (no frame within the heartbeat timeout): a CancelledError, no cancel of the caller."""
    raise asyncio.CancelledError


async def test_a_record_cut_by_a_stuck_connection_dead_letters_the_task(
    broker: TestBroker, parts: Parts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record's publish cut by aiormq's drop: the task is NACKed into the failed queue
    like any unconfirmed record, not left unsettled (a prefetch slot held till a restart)."""
    monkeypatch.setattr(Settler, "_publish", cut)
    await parts.fail(broker)
    await broker.wait_depth(broker.names.failed_queue, 1)  # the broker dead-letters it after
    [dead] = await broker.get_all(broker.names.failed_queue)
    assert dead.headers["x-death"][0]["reason"] == "rejected"


async def test_a_delayed_copy_cut_by_a_stuck_connection_is_not_confirmed(
    broker: TestBroker, parts: Parts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retry's delayed copy cut by aiormq's drop is a copy not confirmed (the caller NACKs
    the task into its retry plan), not an end of the delivery's task."""
    monkeypatch.setattr(Later, "_publish", cut)
    later = Later(parts.publisher, broker.names, "classic")
    assert await later.send(parts.delivery, 5, FINAL_KEY, 1, "r1") is False


async def test_a_delayed_copy_is_declared_again_on_a_channel_the_broker_closed_under_it(
    broker: TestBroker, parts: Parts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker closes the publishing channel under the delay levels' declaration (as
    RabbitMQ 3.10 does when two workers declare a new level at once): the levels are
    declared again on the reopened channel and the copy is confirmed where it is due, not
    the task NACKed into its plan's retry."""
    declare = DelayDeclarer.declare
    refusals: list[str] = []

    async def refused_once(self: DelayDeclarer, plan: RetryPlan) -> None:
        if not refusals:
            refusals.append(plan.key)
            missing = f"{broker.names.namespace}_missing"  # the broker's NOT_FOUND closes it
            await parts.publisher.declare_queue(missing, passive=True)
        await declare(self, plan)

    monkeypatch.setattr(DelayDeclarer, "declare", refused_once)
    later = Later(parts.publisher, broker.names, "classic", parts.publisher.ready)
    assert await later.send(parts.delivery, 1024, FINAL_KEY, 1, "r1") is True
    assert refusals == [FINAL_KEY]
    await broker.wait_depth(broker.names.delay_level(10), 1)  # held 1,024 s at its level


async def test_a_delayed_copy_refused_at_every_declaration_is_not_confirmed(
    broker: TestBroker, parts: Parts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker that closes the channel at every declaration: a bounded number of tries,
    then a copy not confirmed (the caller NACKs the task into its plan)."""
    tries: list[int] = []

    async def always_refused(self: DelayDeclarer, plan: RetryPlan) -> None:
        tries.append(1)
        await parts.publisher.declare_queue(f"{broker.names.namespace}_missing", passive=True)

    monkeypatch.setattr(DelayDeclarer, "declare", always_refused)
    later = Later(parts.publisher, broker.names, "classic", parts.publisher.ready)
    assert await later.send(parts.delivery, 1024, FINAL_KEY, 1, "r1") is False
    assert len(tries) == later_module.DECLARE_TRIES
