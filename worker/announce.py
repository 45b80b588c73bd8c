"""A worker's announcement of the tasks it registers (``topology/known_tasks.py``): every
``ANNOUNCE_SECONDS`` on the namespace's fanout, and once more, leaving, when it stops."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from typing import Any

import aio_pika
import structlog
from aio_pika.abc import AbstractChannel, AbstractConnection

from warren_cron.known_tasks import ANNOUNCE_SECONDS, announcement
from warren_cron.names import Names
from warren_cron.worker.registry import Registry

log = structlog.get_logger("worker")
#: How long a stopping worker tries to say it leaves (the monitor forgets it anyway, later).
LEAVING_SECONDS = 2.0


def announced_tasks(registry: Registry) -> dict[str, Any]:
    """Each task of ``registry`` with its payload's JSON schema (None when untyped)."""
    tasks: dict[str, Any] = {}
    for name in registry.names():
        found = registry.get(name)
        tasks[name] = None if found is None or found.payload is None else found.payload.schema()
    return tasks


class Announcer:
    """Announces a registry's tasks on the namespace's known-tasks fanout until closed."""

    def __init__(self, names: Names, registry: Registry, every: float = ANNOUNCE_SECONDS) -> None:
        self._exchange = names.known_tasks_exchange
        self._tasks = announced_tasks(registry)
        self._every = every
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._channel: AbstractChannel | None = None
        self._loop: asyncio.Task[None] | None = None

    async def start(self, connection: AbstractConnection) -> None:
        """Declare the fanout, announce now, then every ``every`` seconds."""
        self._channel = await connection.channel(publisher_confirms=False)
        await self._channel.declare_exchange(
            self._exchange, aio_pika.ExchangeType.FANOUT, auto_delete=True
        )
        # Sent from the background, the first one too: under a memory alarm a publish blocks
        # its connection, and the worker's start must not wait on it.
        self._loop = asyncio.get_running_loop().create_task(self._announce_forever())

    async def close(self) -> None:
        """Stop announcing and say this worker leaves."""
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
        # Bounded: a connection blocked by a memory alarm would hold the shutdown.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._send(leaving=True), LEAVING_SECONDS)
        if self._channel is not None and not self._channel.is_closed:
            await self._channel.close()

    async def _announce_forever(self) -> None:
        while True:
            await self._send(leaving=False)
            await asyncio.sleep(self._every)

    async def _send(self, *, leaving: bool) -> None:
        if self._channel is None:
            return
        body = announcement(self.worker, self._tasks, leaving=leaving)
        try:
            exchange = await self._channel.get_exchange(self._exchange, ensure=False)
            # Not mandatory: with no monitor listening, the fanout routes it nowhere, which is
            # no error (a returned message would be logged as a warning each time).
            await exchange.publish(aio_pika.Message(body), "", mandatory=False)
        except Exception as error:
            # A lost announcement is made again a few seconds later, and the outage that lost
            # it is logged once by the connection's own watch: a DEBUG line, not a warning
            # every 5 s for as long as the broker is away.
            log.debug("tasks not announced", error=repr(error))
