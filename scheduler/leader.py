"""Leadership: the scheduler that holds the exclusive queue ``<ns>_scheduler.leader``.

The queue is declared on the very connection the leader publishes on, so the broker fences
a leader by itself: when that connection dies the queue is deleted and a standby can take
it, while nothing the old leader sends can arrive any more.
Its connection is a plain one (see ``topology.broker.exclusive``): a lost connection ends
the leadership, always, and the process has to run for it again.
"""

from __future__ import annotations

import asyncio
import os
import socket

from aio_pika.abc import AbstractConnection

from warren_cron.broker.exclusive import plain_connection, try_exclusive
from warren_cron.names import Names
from warren_cron.scheduler.settings import SchedulerSettings


def identity() -> str:
    """Who this scheduler is, in logs and in the broker's connection list."""
    return f"{socket.gethostname()}:{os.getpid()}"


async def open_connection(settings: SchedulerSettings) -> AbstractConnection:
    """A plain (non-robust) connection with the scheduler's short heartbeat."""
    name = f"warren-scheduler {identity()}"
    return await plain_connection(settings, name, settings.scheduler_heartbeat_seconds)


async def try_lead(connection: AbstractConnection, names: Names) -> bool:
    """Declare the exclusive leader queue; False when another connection holds it."""
    return await try_exclusive(connection, names.leader_queue) is not None


def watch_connection(connection: AbstractConnection) -> asyncio.Event:
    """An event set as soon as ``connection`` closes, for whatever reason."""
    lost = asyncio.Event()
    connection.close_callbacks.add(lambda *_: lost.set())
    return lost
