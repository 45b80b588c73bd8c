"""Declare the topology: one idempotent function used by every process.

Queue arguments are built in ``queue_arguments`` only. A retry queue's arguments depend on
its plan key alone, so declaring again, from any process or after a retry setting changed,
never conflicts: a new plan simply makes new queues and old messages finish on old ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractExchange, AbstractQueue
from aiormq.exceptions import ChannelPreconditionFailed

from warren_cron.errors import TopologyError
from warren_cron.names import FAILED_KEY, FINAL_KEY, Names
from warren_cron.plan import RetryPlan

QueueType = Literal["classic", "quorum"]


class QueueSettings(Protocol):
    """What queues are declared with: always the settings of the process that declares them.

    Quorum queues refuse a second declaration with other arguments, so a value written here
    instead (a literal delivery limit, say) would stop every process started with another.
    """

    @property
    def queue_type(self) -> QueueType:
        """classic or quorum (``CRON_QUEUE_TYPE``)."""

    @property
    def delivery_limit(self) -> int:
        """The main queue's quorum delivery limit (``CRON_DELIVERY_LIMIT``)."""


#: Delivery limit of the queues that ops tools and the monitor read without consuming (failed,
#: monitor, retry). Reading them is ``basic.get`` then a return, and on quorum queues every
#: return counts toward the limit: RabbitMQ 4.x applies 20 even when none is set, and the failed
#: queue has no DLX, so a few ``warren failed list`` runs would silently drop records. ``-1`` means
#: "no limit" on 4.x but makes 3.x drop a message on its first return (tried on 3.10), so a
#: limit nobody reaches stands for "none" on both. With any limit set, a return goes back near
#: the head, so reading keeps the order on 3.x too.
UNLIMITED_DELIVERIES = 2**31 - 1


def queue_arguments(
    queue_type: QueueType,
    *,
    ttl_ms: int | None = None,
    dead_letter_exchange: str | None = None,
    dead_letter_key: str | None = None,
    delivery_limit: int | None = None,
    max_length: int | None = None,
    expires_ms: int | None = None,
    reject_overflow: bool = False,
) -> dict[str, Any]:
    """Arguments of one durable queue; the only place queue arguments are built."""
    args: dict[str, Any] = {"x-queue-type": queue_type}
    if max_length is not None:
        # Overflow drops the oldest message unless ``reject_overflow``: a new one replaces it
        # in one confirmed publish.
        args["x-max-length"] = max_length
    if reject_overflow:
        # A full queue refuses the publish (a nack): the publisher learns it was not stored.
        args["x-overflow"] = "reject-publish"
    if ttl_ms is not None:
        args["x-message-ttl"] = ttl_ms
    if expires_ms is not None:
        args["x-expires"] = expires_ms
    if dead_letter_exchange is not None:
        args["x-dead-letter-exchange"] = dead_letter_exchange
    if dead_letter_key is not None:
        args["x-dead-letter-routing-key"] = dead_letter_key
    if queue_type == "quorum" and dead_letter_exchange is not None:
        # at-least-once dead-lettering keeps a message until the target queue confirms it;
        # RabbitMQ requires reject-publish overflow for that strategy.
        args["x-dead-letter-strategy"] = "at-least-once"
        args["x-overflow"] = "reject-publish"
    if queue_type == "quorum" and delivery_limit is not None:
        args["x-delivery-limit"] = delivery_limit
    return args


@dataclass(frozen=True, slots=True)
class Topology:
    """The exchanges and queues every process works with."""

    tasks: AbstractExchange
    dlx: AbstractExchange
    main: AbstractQueue
    failed: AbstractQueue
    monitor: AbstractQueue


async def durable_queue(channel: AbstractChannel, name: str, args: dict[str, Any]) -> AbstractQueue:
    """Declare a durable queue, or raise ``TopologyError`` when it exists with other arguments."""
    try:
        return await channel.declare_queue(name, durable=True, arguments=args)
    except ChannelPreconditionFailed as error:
        raise TopologyError(
            f"queue {name!r} exists with other arguments than {args} ({error}); "
            "it was probably made with another CRON_QUEUE_TYPE or CRON_DELIVERY_LIMIT: keep "
            "the old settings, or drain and delete the queue before changing them"
        ) from None


async def _exchanges(channel: AbstractChannel, names: Names) -> tuple[AbstractExchange, ...]:
    unrouted = await channel.declare_exchange(
        names.unrouted_exchange, aio_pika.ExchangeType.FANOUT, durable=True
    )
    tasks = await channel.declare_exchange(
        names.tasks_exchange, aio_pika.ExchangeType.TOPIC, durable=True
    )
    dlx = await channel.declare_exchange(
        names.dlx,
        aio_pika.ExchangeType.DIRECT,
        durable=True,
        arguments={"alternate-exchange": names.unrouted_exchange},
    )
    return unrouted, tasks, dlx


def main_arguments(names: Names, settings: QueueSettings) -> dict[str, Any]:
    """Arguments of the main queue, as every process declares it."""
    return queue_arguments(
        settings.queue_type, dead_letter_exchange=names.dlx, delivery_limit=settings.delivery_limit
    )


def kept_arguments(queue_type: QueueType) -> dict[str, Any]:
    """Arguments of the failed and monitor queues: read without consuming, never dropped."""
    return queue_arguments(queue_type, delivery_limit=UNLIMITED_DELIVERIES)


def retry_arguments(names: Names, queue_type: QueueType, step: RetryPlan) -> dict[str, Any]:
    """Arguments of the retry queue of ``step``: its first delay, then back to the tasks."""
    return queue_arguments(
        queue_type,
        ttl_ms=step.delays_ms[0],
        dead_letter_exchange=names.tasks_exchange,
        dead_letter_key=step.rest().key,
        delivery_limit=UNLIMITED_DELIVERIES,  # the monitor peeks at the head
    )


async def declare_topology(
    channel: AbstractChannel, names: Names, settings: QueueSettings
) -> Topology:
    """Declare exchanges, the main, failed and monitor queues and their bindings."""
    unrouted, tasks, dlx = await _exchanges(channel, names)
    main = await durable_queue(channel, names.main_queue, main_arguments(names, settings))
    await main.bind(tasks, "#")
    kept_args = kept_arguments(settings.queue_type)
    failed = await durable_queue(channel, names.failed_queue, kept_args)
    monitor = await durable_queue(channel, names.monitor_queue, kept_args)
    for queue in (failed, monitor):
        for key in (FINAL_KEY, FAILED_KEY):
            await queue.bind(dlx, key)
        await queue.bind(unrouted, "")
    return Topology(tasks=tasks, dlx=dlx, main=main, failed=failed, monitor=monitor)


class PlanDeclarer:
    """Declares the retry queues of each plan once per process, before it is published."""

    def __init__(self, channel: AbstractChannel, names: Names, queue_type: QueueType) -> None:
        self._channel = channel
        self._names = names
        self._queue_type = queue_type
        self._declared: set[str] = set()

    async def declare(self, plan: RetryPlan) -> None:
        """Make sure a retry queue exists for ``plan`` and every plan it passes through."""
        for step in plan.suffixes():
            if step.key not in self._declared:
                await self._declare_step(step)
                self._declared.add(step.key)

    async def _declare_step(self, step: RetryPlan) -> None:
        args = retry_arguments(self._names, self._queue_type, step)
        queue = await durable_queue(self._channel, self._names.retry_queue(step.key), args)
        await queue.bind(self._names.dlx, step.key)
