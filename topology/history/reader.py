"""Read a stream from a point to its end, as it stands when the read starts.

AMQP has no "end of stream" signal, so the end is found first: a consumer at ``last`` gets
the stream's last chunk, whose first offset is at or before the end. The read then runs
until it has passed that offset and no delivery came for ``TAIL_SECONDS``. Events published
while it reads may or may not be included.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime

from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage

from topology.history.events import Event, decode

#: Where a read starts: ``first``, ``last``, ``next``, an offset, or a time (second precision).
Start = str | int | datetime
PREFETCH = 2000
#: No delivery for this long after the known end: the read is done.
TAIL_SECONDS = 0.1
#: How long the last chunk may take to come: none by then means the stream is empty.
PROBE_SECONDS = 2.0
#: No delivery for this long while short of the known end: the broker is stuck; give up there.
STALL_SECONDS = 15.0
_ACK_EVERY = 500


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
        await queue.cancel(tag)


def _nothing_after(start: Start, end: End) -> bool:
    """True when no event can lie at or after ``start``: reading would only wait."""
    if isinstance(start, datetime):
        return end.latest is not None and start > end.latest
    return start == "next"


def stream_offset(message: AbstractIncomingMessage) -> int:
    """The offset of a message delivered from a stream."""
    return int((message.headers or {}).get("x-stream-offset", -1))  # type: ignore[arg-type]


async def read_stream(
    connection: AbstractConnection, stream: str, start: Start = "first"
) -> AsyncIterator[Event]:
    """Every event from ``start`` to the stream's end, in order; bodies of no known schema are
    skipped."""
    channel = await connection.channel()
    try:
        # Streams serve only consumers with a prefetch, and need acks to go on delivering.
        await channel.set_qos(prefetch_count=PREFETCH)
        end = await last_offset(channel, stream)
        if end is None or _nothing_after(start, end):
            return
        inbox: asyncio.Queue[AbstractIncomingMessage] = asyncio.Queue()
        queue = await channel.get_queue(stream, ensure=False)
        await queue.consume(inbox.put, arguments={"x-stream-offset": start})
        # ``end`` starts the last chunk: a start past it may still be short of the real end.
        before = start - 1 if isinstance(start, int) else -1
        async for event in _drain(inbox, end.offset, before):
            yield event
    finally:
        await channel.close()


async def _drain(
    inbox: asyncio.Queue[AbstractIncomingMessage], end: int, offset: int
) -> AsyncIterator[Event]:
    unacked = 0
    while True:
        wait = TAIL_SECONDS if offset >= end else STALL_SECONDS
        try:
            message = await asyncio.wait_for(inbox.get(), wait)
        except TimeoutError:
            return
        offset = stream_offset(message)
        unacked += 1
        if unacked >= _ACK_EVERY or inbox.empty():
            # Streams hand out credit on acks: without them the consumer stops at PREFETCH.
            await message.ack(multiple=True)
            unacked = 0
        for event in decode(message.body, offset):
            yield event
