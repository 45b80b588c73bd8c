"""Exclusive queues as locks: the scheduler's leadership and the overlap policy's run locks.

Only one connection can declare an exclusive queue; another one gets ``RESOURCE_LOCKED``, and
the broker deletes the queue when its connection closes, so a crashed holder frees the lock
on any host. The holder's connection is a plain one, never aio-pika's robust kind: a robust
connection would reconnect and declare the queue again behind the holder's back, making it
hold a lock it does not know it lost and won again.
"""

from __future__ import annotations

import aio_pika
from aio_pika.abc import AbstractConnection, AbstractQueue
from aiormq.exceptions import ChannelLockedResource, ChannelNotFoundEntity

from warren_cron.broker.connect import briefly, first_answering, open_channel
from warren_cron.declare import queue_arguments
from warren_cron.runtime.settings import CronSettings


async def plain_connection(settings: CronSettings, name: str, heartbeat: int) -> AbstractConnection:
    """A connection that is lost for good when it drops: closing it releases its locks.

    It opens to the first node of ``CRON_AMQP_URL`` that answers.
    """

    async def open_one(url: str, _order: list[str]) -> AbstractConnection:
        return await aio_pika.connect(
            url, client_properties={"connection_name": name}, heartbeat=heartbeat, timeout=10
        )

    return await first_answering(settings, open_one)


async def try_exclusive(connection: AbstractConnection, name: str) -> AbstractQueue | None:
    """Declare the exclusive queue ``name``; None when another connection holds it."""
    channel = await open_channel(connection)
    try:
        # Exclusive queues cannot be quorum queues: locks are always classic.
        return await channel.declare_queue(
            name, exclusive=True, arguments=queue_arguments("classic")
        )
    except ChannelLockedResource:
        return None  # the broker closed this channel; the connection stays usable


async def exists(connection: AbstractConnection, name: str) -> bool:
    """True while queue ``name`` exists, held by this connection or another one."""
    async with briefly(connection) as channel:
        try:
            await channel.declare_queue(name, passive=True)
        except ChannelLockedResource:
            return True  # exclusive to another connection: it exists
        except ChannelNotFoundEntity:
            return False
    return True


async def consumer_count(connection: AbstractConnection, name: str) -> int | None:
    """Consumers of queue ``name`` as its passive declare counts them (a single-active-consumer
    queue counts its active one only); None when there is no such queue, and 1 for an
    exclusive queue held by another connection."""
    async with briefly(connection) as channel:
        try:
            declared = await channel.declare_queue(name, passive=True)
        except ChannelLockedResource:
            return 1
        except ChannelNotFoundEntity:
            return None
    return declared.declaration_result.consumer_count
