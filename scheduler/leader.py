"""Leadership: the scheduler that holds the exclusive queue ``<ns>_scheduler.leader``.

The queue is declared on the very connection the leader publishes on, so the broker fences
a leader by itself: when that connection dies the queue is deleted and a standby can take
it, while nothing the old leader sends can arrive any more.

The connection is a plain one, not aio-pika's robust kind: a robust connection reconnects
and redeclares its queues behind our back, which would make a leader out of a process that
does not know it lost the post. Here a lost connection ends the leadership, always, and the
process has to run for it again.
"""

from __future__ import annotations

import asyncio
import os
import socket

import aio_pika
from aio_pika.abc import AbstractConnection
from aiormq.exceptions import ChannelLockedResource

from scheduler.settings import SchedulerSettings
from topology.declare import queue_arguments
from topology.names import Names


def identity() -> str:
    """Who this scheduler is, in logs and in the broker's connection list."""
    return f"{socket.gethostname()}:{os.getpid()}"


async def open_connection(settings: SchedulerSettings) -> AbstractConnection:
    """A plain (non-robust) connection with the scheduler's short heartbeat."""
    return await aio_pika.connect(
        settings.url,
        client_properties={"connection_name": f"warren-scheduler {identity()}"},
        heartbeat=settings.scheduler_heartbeat_seconds,
        timeout=10,
    )


async def try_lead(connection: AbstractConnection, names: Names) -> bool:
    """Declare the exclusive leader queue; False when another connection holds it."""
    channel = await connection.channel()
    try:
        # Exclusive queues cannot be quorum queues: this one is always classic.
        await channel.declare_queue(
            names.leader_queue, exclusive=True, arguments=queue_arguments("classic")
        )
    except ChannelLockedResource:
        return False  # the broker closed this channel; the connection stays usable
    return True


def watch_connection(connection: AbstractConnection) -> asyncio.Event:
    """An event set as soon as ``connection`` closes, for whatever reason."""
    lost = asyncio.Event()
    connection.close_callbacks.add(lambda *_: lost.set())
    return lost
