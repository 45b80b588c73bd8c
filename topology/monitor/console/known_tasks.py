"""The monitor's ear on the workers' announcements of their tasks (``known_tasks.py``)."""

from __future__ import annotations

import asyncio
import time

import aio_pika
import structlog
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractRobustChannel
from aiormq.abc import DeliveredMessage

from warren_cron.broker.connect import open_channel
from warren_cron.broker.underlay import underlay
from warren_cron.known_tasks import ANNOUNCE_SECONDS, KnownTasks
from warren_cron.names import Names

log = structlog.get_logger("monitor")


class KnownTasksEar:
    """Hears every worker's announcements in an exclusive queue of its own."""

    def __init__(self, names: Names) -> None:
        self._exchange = names.known_tasks_exchange
        self.known = KnownTasks()
        self._channel: AbstractChannel | None = None
        self._since: float | None = None
        self._relisten: asyncio.Task[None] | None = None

    async def start(self, connection: AbstractConnection) -> None:
        """Declare the fanout and a queue of its own, bound and consumed."""
        self._channel = await open_channel(connection)
        await self._listen()
        if isinstance(self._channel, AbstractRobustChannel):
            self._channel.reopen_callbacks.add(self._on_reopen)
        self._since = time.monotonic()

    async def _listen(self) -> None:
        """A queue named by the broker, bound and consumed: a new one after each reconnect
        (as the fleet's counts, ``worker/fleet.py``: a robust queue's second declare of the
        same exclusive name fails on a RabbitMQ 4.2+ node that saw the first one's down)."""
        assert self._channel is not None
        await self._channel.declare_exchange(
            self._exchange, aio_pika.ExchangeType.FANOUT, auto_delete=True
        )
        raw = await underlay(self._channel)
        declared = await raw.queue_declare("", exclusive=True, auto_delete=True)
        assert declared.queue is not None
        await raw.queue_bind(declared.queue, self._exchange)
        await raw.basic_consume(declared.queue, self._heard, no_ack=True)

    def _on_reopen(self, _channel: object) -> None:
        self._relisten = asyncio.get_running_loop().create_task(self._listen_logged())

    async def _listen_logged(self) -> None:
        try:
            await self._listen()
        except Exception as error:  # deaf until the next reconnect; nothing is refused then
            log.warning("known tasks not heard", error=repr(error))
            self.known.judging = False

    async def _heard(self, message: DeliveredMessage) -> None:
        self.known.heard(message.body)

    async def settled(self) -> None:
        """Wait, once after the start, until every live worker announced at least once."""
        if self._since is None:
            return
        left = self._since + ANNOUNCE_SECONDS + 1 - time.monotonic()
        if left > 0:
            await asyncio.sleep(left)

    async def close(self) -> None:
        """Stop hearing."""
        if self._channel is not None and not self._channel.is_closed:
            await self._channel.close()
