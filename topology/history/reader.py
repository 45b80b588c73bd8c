"""Read a stream from a point to its end, as it stands when the read starts.

AMQP has no "end of stream" signal, so the end is found first: a consumer at ``last`` gets
the stream's last chunk, whose first offset is at or before the end. The read then runs
until it has passed that offset and no delivery came for ``TAIL_SECONDS``. Events published
while it reads may or may not be included.

``read_messages`` hands over each message's offset and body, for a reader that need not
decode them all; given ``until``, it stops before the first message that condition accepts
and asks the broker for fewer messages ahead, as whatever was sent past the stop is read for
nothing. Given a ``Budget``, a read also stops once it has handed over that many events, and
the budget says it was cut: what a viewer asks of the monitor must not read the whole stream.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from aio_pika.abc import (
    AbstractChannel,
    AbstractConnection,
    AbstractIncomingMessage,
    AbstractQueue,
    ConsumerTag,
)

from warren_cron.broker.connect import close_quietly, open_channel
from warren_cron.broker.drops import through_drops
from warren_cron.broker.ending import end_consumer
from warren_cron.errors import BROKER_TROUBLE
from warren_cron.history.events import Event, decode

#: Where a read starts: ``first``, ``last``, ``next``, an offset, or a time (second precision).
Start = str | int | datetime
PREFETCH = 2000
#: Messages ahead for a read that may stop early (a message holds up to 500 events).
STOPPING_PREFETCH = 20
#: No delivery for this long after the known end: the read is done.
TAIL_SECONDS = 0.1
#: How long the last chunk may take to come: none by then means the stream is empty.
PROBE_SECONDS = 2.0
#: No delivery for this long while short of the known end: the broker is stuck; give up there.
STALL_SECONDS = 15.0
_ACK_EVERY = 500
#: True for the body of the first message a read should not go past.
Until = Callable[[bytes], bool]
R = TypeVar("R")
#: How every writer's encoding (``events.event``, orjson) begins an event: ``v`` comes first.
_EVENT_START = b'{"v":'


@dataclass(slots=True)
class Budget:
    """How many events reads may hand over (None: no bound), how many they did, and whether
    one stopped at the bound before its end."""

    limit: int | None
    scanned: int = 0
    cut: bool = False

    def spend(self, body: bytes) -> None:
        """Count the events of one message handed over (one at least: a body another writer
        encoded otherwise still counts)."""
        self.scanned += max(1, body.count(_EVENT_START))

    def spent(self) -> bool:
        """True (and ``cut`` set) when no more may be read."""
        self.cut = self.cut or (self.limit is not None and self.scanned >= self.limit)
        return self.cut


@dataclass(frozen=True, slots=True)
class End:
    """An offset at or before the stream's end, and the time of the latest event there."""

    offset: int
    latest: datetime | None


async def last_offset(channel: AbstractChannel, stream: str) -> End | None:
    """Where the stream ends now (an offset at or before its end); None when it is empty.

    ``channel`` needs a prefetch (``set_qos``): streams serve no consumer without one."""
    first: asyncio.Future[End] = asyncio.get_running_loop().create_future()

    async def seen(message: AbstractIncomingMessage) -> None:
        if not first.done():
            times = [event.at for event in decode(message.body, 0)]
            first.set_result(End(stream_offset(message), max(times, default=None)))

    queue = await channel.get_queue(stream, ensure=False)
    tag = await queue.consume(seen, arguments={"x-stream-offset": "last"})
    try:
        return await asyncio.wait_for(first, PROBE_SECONDS)
    except TimeoutError:
        return None
    finally:
        await end_consumer(queue, tag)


async def stream_end(connection: AbstractConnection, stream: str) -> End | None:
    """Where ``stream`` ends now (``last_offset``), read on a channel of its own."""
    channel = await open_channel(connection)
    try:
        await channel.set_qos(prefetch_count=1)  # streams serve no consumer without one
        return await last_offset(channel, stream)
    finally:
        await close_quietly(channel)


def _nothing_after(start: Start, end: End) -> bool:
    """True when no event can lie at or after ``start``: reading would only wait."""
    if isinstance(start, datetime):
        return end.latest is not None and start > end.latest
    return start == "next"


def stream_offset(message: AbstractIncomingMessage) -> int:
    """The offset of a message delivered from a stream."""
    return int((message.headers or {}).get("x-stream-offset", -1))  # type: ignore[arg-type]


async def read_stream(
    connection: AbstractConnection,
    stream: str,
    start: Start = "first",
    budget: Budget | None = None,
) -> AsyncGenerator[Event, None]:
    """Every event from ``start`` to the stream's end (or the ``budget``), in order; bodies of
    no known schema are skipped."""
    reading = read_messages(connection, stream, start, budget=budget)
    async with contextlib.aclosing(reading) as messages:
        async for offset, body in messages:
            for event in decode(body, offset):
                yield event


async def read_messages(
    connection: AbstractConnection,
    stream: str,
    start: Start = "first",
    until: Until | None = None,
    budget: Budget | None = None,
) -> AsyncGenerator[tuple[int, bytes], None]:
    """The offset and body of every message from ``start`` to the stream's end, to the first
    that ``until`` accepts (left out), or until ``budget`` is spent."""
    stopping = until is not None
    channel, inbox = await consuming(
        connection, lambda channel: _consume(channel, stream, start, stopping)
    )
    try:
        if inbox is None:
            return
        async with contextlib.aclosing(inbox) as messages:
            async for message in messages:
                if until is not None and until(message.body):
                    return  # the consumer is cancelled, its channel closed: every ack was awaited
                if budget is not None:
                    if budget.spent():
                        return
                    budget.spend(message.body)
                yield stream_offset(message), message.body
    finally:
        await channel.close()


async def consuming(
    connection: AbstractConnection, begin: Callable[[AbstractChannel], Awaitable[R]]
) -> tuple[AbstractChannel, R]:
    """A new channel and what ``begin`` made of it, tried again while the connection comes
    back from a drop (a consumer at a stream not started yet drops it: nothing was read, so
    a new try loses nothing); the channel is closed when ``begin`` fails."""
    channels: list[AbstractChannel] = []

    async def once() -> tuple[AbstractChannel, R]:
        channels.append(await open_channel(connection))
        return channels[-1], await begin(channels[-1])

    async def close() -> None:
        while channels:
            await close_quietly(channels.pop())

    return await through_drops(connection, once, close)


async def _consume(
    channel: AbstractChannel, stream: str, start: Start, stopping: bool
) -> AsyncGenerator[AbstractIncomingMessage, None] | None:
    """The stream's messages from ``start`` to its end; None when there is none."""
    ahead = STOPPING_PREFETCH if stopping else PREFETCH
    # Streams serve only consumers with a prefetch, and need acks to go on delivering.
    await channel.set_qos(prefetch_count=ahead)
    end = await last_offset(channel, stream)
    if end is None or _nothing_after(start, end):
        return None
    inbox: asyncio.Queue[AbstractIncomingMessage] = asyncio.Queue()
    queue = await channel.get_queue(stream, ensure=False)
    tag = await queue.consume(inbox.put, arguments={"x-stream-offset": start})
    # ``end`` starts the last chunk: a start past it may still be short of the real end.
    before = start - 1 if isinstance(start, int) else -1
    return _cancelling(queue, tag, _drain(inbox, end.offset, before, ahead))


async def _cancelling(
    queue: AbstractQueue, tag: ConsumerTag, messages: AsyncGenerator[AbstractIncomingMessage, None]
) -> AsyncGenerator[AbstractIncomingMessage, None]:
    """``messages``, then the consumer cancelled, however the read ends: RabbitMQ (3.10) goes
    on counting a stream's consumer whose channel closed without a cancel."""
    try:
        async with contextlib.aclosing(messages):
            async for message in messages:
                yield message
    finally:
        with contextlib.suppress(*BROKER_TROUBLE):
            await end_consumer(queue, tag)


async def _drain(
    inbox: asyncio.Queue[AbstractIncomingMessage], end: int, offset: int, ahead: int
) -> AsyncGenerator[AbstractIncomingMessage, None]:
    unacked, ack_every = 0, min(_ACK_EVERY, max(1, ahead // 2))
    while True:
        wait = TAIL_SECONDS if offset >= end else STALL_SECONDS
        try:
            message = await asyncio.wait_for(inbox.get(), wait)
        except TimeoutError:
            return
        offset = stream_offset(message)
        unacked += 1
        if unacked >= ack_every or inbox.empty():
            # Streams hand out credit on acks: without them the consumer stops at the prefetch.
            await message.ack(multiple=True)
            unacked = 0
        yield message
