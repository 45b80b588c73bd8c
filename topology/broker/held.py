"""Read a queue without removing anything: through consumers, never ``basic.get``.

AMQP 0-9-1 has no "peek": a message is taken unacked and closing the channel puts it back
where it was, in order. Quorum queues on RabbitMQ 3.10 and 4.0 mishandle messages that were
taken with ``basic.get`` and handed back: if the node is killed while a later reader acks
them, acked ones come back and as many never-acked ones are gone on restart (about 240 of
1,000 records, README "Inspecting, replaying and purging failed tasks"). Messages taken by a
consumer and handed back are recovered whole, so every read here consumes.

Each consumer has a prefetch of ``BATCH``: memory stays flat in the length of the queue. A
message held (unacked) keeps its consumer's slot, so once every consumer is full and nothing
is buffered, another consumer starts and takes the next ``BATCH``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage, AbstractQueue

from warren_cron.broker.connect import close_quietly, open_channel
from warren_cron.broker.underlay import underlay

#: Prefetch of each consumer: how many messages one consumer holds before the next starts.
BATCH = 256
#: How long to wait for a message before asking the broker whether any is still ready.
IDLE_SECONDS = 0.05
#: How long messages may be said ready while none arrives before the broker is taken for gone.
STALL_SECONDS = 15.0


class Held:
    """A queue being read: every message taken and not acked goes back when the block ends.

    Reading ends when no message is ready any more: all were read, or another reader holds
    the rest.
    """

    def __init__(self, channel: AbstractChannel, queue: AbstractQueue) -> None:
        self.channel, self.queue = channel, queue
        self.ready_at_start = queue.declaration_result.message_count or 0
        self.seen = 0
        self._settled = 0
        self._consumers = 0
        self._arrived: asyncio.Queue[AbstractIncomingMessage] = asyncio.Queue()

    async def messages(self, limit: int | None = None) -> AsyncIterator[AbstractIncomingMessage]:
        """Messages from the head until none is ready (or ``limit`` were read)."""
        while limit is None or self.seen < limit:
            message = await self._next()
            if message is None:
                return
            self.seen += 1
            yield message

    async def ack(self, message: AbstractIncomingMessage) -> None:
        """Remove ``message`` from the queue; its consumer takes another in its place."""
        await message.ack()
        self._settled += 1

    def progress(self) -> tuple[int, int]:
        """Messages read so far, and of how many (those ready at the start, or more)."""
        return self.seen, max(self.seen, self.ready_at_start)

    async def _next(self) -> AbstractIncomingMessage | None:
        stalled_at = time.monotonic() + STALL_SECONDS
        while True:
            if self._full():
                await self.queue.consume(self._arrive)
                self._consumers += 1
            with suppress(TimeoutError):
                return await asyncio.wait_for(self._arrived.get(), IDLE_SECONDS)
            if not await self._any_ready():
                await asyncio.sleep(0)  # what was delivered before that answer is queued now
                return None if self._arrived.empty() else self._arrived.get_nowait()
            if time.monotonic() > stalled_at:
                raise TimeoutError(f"{self.queue.name}: messages ready but none delivered")

    def _full(self) -> bool:
        # Every consumer holds its BATCH and nothing waits here: only a new consumer gets more.
        return self._arrived.empty() and self.seen - self._settled >= self._consumers * BATCH

    async def _arrive(self, message: AbstractIncomingMessage) -> None:
        self._arrived.put_nowait(message)

    async def _any_ready(self) -> bool:
        # On the wire: a robust channel answers a passive declare from its cache.
        found = await (await underlay(self.channel)).queue_declare(self.queue.name, passive=True)
        return bool(found.message_count)


@asynccontextmanager
async def holding(connection: AbstractConnection, queue_name: str) -> AsyncIterator[Held]:
    """Read ``queue_name`` on a channel of its own; closing it returns what was not acked."""
    channel = await open_channel(connection)
    try:
        await channel.set_qos(prefetch_count=BATCH)
        yield Held(channel, await channel.declare_queue(queue_name, passive=True))
    finally:
        await close_quietly(channel)
