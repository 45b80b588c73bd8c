"""The ``<ns>_cancels`` stream: declared, written with confirms, and followed from its start.

A worker reads the whole stream before it takes a task, so that a cancel stored before it
started (or before the broker restarted) is known to it; the stream is kept by size only, as
a tombstone may have to outlive any age limit (a run delayed for weeks).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import aio_pika
import structlog
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage

from warren_cron.cancel.tombstone import Tombstone, decode, encode
from warren_cron.history.follow import StreamFollower
from warren_cron.history.stream import NO_EVENTS, declare_stream, stream_arguments
from warren_cron.names import Names

#: The stream's size bound: at about 250 bytes a tombstone, 200,000 cancels.
CANCELS_MAX_BYTES = 50_000_000
#: How long a declarer waits for its marker's confirm (a memory alarm holds it back).
MARK_SECONDS = 2.0
log = structlog.get_logger("cancels")
#: Markers still on their way (kept referenced until done).
_MARKING: set[asyncio.Future[None]] = set()
OnTombstone = Callable[[Tombstone], None]


async def declare_cancels(
    connection: AbstractConnection, names: Names, marker: AbstractConnection | None = None
) -> None:
    """Declare ``<ns>_cancels`` and put a message in it that is no tombstone, for a reader to
    find the stream's end at once rather than wait to tell an empty stream from a slow one.

    Every declarer puts one (a few bytes a process start): RabbitMQ 3.10 may close a
    connection that looks passively at a stream another one is creating, so there is no
    asking first whether it is new. The marker goes over ``marker`` when given, a connection
    of its own that is closed once it is written (a worker's: a memory alarm blocks every
    frame of a connection that publishes, and the worker's acks and its own channels must
    keep flowing), and is waited for ``MARK_SECONDS`` at most: under an alarm a start goes
    on without it."""
    try:
        await declare_stream(connection, names.cancels_stream, stream_arguments(CANCELS_MAX_BYTES))
    except BaseException:
        # The marker's connection is ours to close: dropped open, it was closed by the
        # garbage collector, whose close outside the event loop never ran (and warned so).
        if marker is not None:
            with contextlib.suppress(Exception):
                await marker.close()
        raise
    marking = asyncio.ensure_future(_mark(marker or connection, names, marker is not None))
    _MARKING.add(marking)
    marking.add_done_callback(_marked)
    # Waited for, not cancelled: a blocked connection would not even close its channel.
    # Only a speed-up for readers: a marker refused or late is logged (``_marked``), never
    # fatal (RabbitMQ 3.10 may refuse a publish to a stream another client is creating).
    done, _ = await asyncio.wait({marking}, timeout=MARK_SECONDS)
    if not done:
        log.warning("cancels stream marker not confirmed yet (a memory alarm?); going on")


async def _mark(connection: AbstractConnection, names: Names, own: bool) -> None:
    channel = await connection.channel(publisher_confirms=True)
    try:
        marker = aio_pika.Message(NO_EVENTS, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
        await channel.default_exchange.publish(marker, names.cancels_stream)
    finally:
        await (connection if own else channel).close()


def _marked(marking: asyncio.Future[None]) -> None:
    _MARKING.discard(marking)
    if not marking.cancelled() and marking.exception() is not None:
        log.warning("cancels stream marker not written", error=repr(marking.exception()))


async def store(channel: AbstractChannel, names: Names, tombstone: Tombstone) -> None:
    """Write ``tombstone``; returns once the broker confirmed it (``channel`` has confirms)."""
    message = aio_pika.Message(encode(tombstone), delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
    await channel.default_exchange.publish(message, names.cancels_stream, mandatory=True)


class TombstoneFollower(StreamFollower):
    """Hands each tombstone of the stream to ``on_tombstone``, from the stream's first on."""

    def __init__(self, names: Names, on_tombstone: OnTombstone) -> None:
        super().__init__(names.cancels_stream, _no_events)
        self._on_tombstone = on_tombstone
        self._reached = asyncio.Event()

    def _hand_over(self, body: bytes, offset: int) -> None:
        tombstone = decode(body)
        if tombstone is not None:
            self._on_tombstone(tombstone)

    async def wait_caught_up(self) -> None:
        """Wait until every tombstone the stream held when reading (re)started was handed
        over (the caller bounds the wait)."""
        if not self.caught_up:
            self._reached.clear()
            await self._reached.wait()

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        await super()._on_message(message)
        if self.caught_up:
            self._reached.set()


def _no_events(*_: object) -> None:
    """Unused: a tombstone follower hands over tombstones, not events."""
