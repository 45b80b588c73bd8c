"""Follow a stream live: every message's events handed over once, in order, from an offset on.

A robust channel consumes again after a reconnect with the arguments it first consumed
with; the follower keeps those arguments pointing past the last message it handed over, and
skips any message at or before it, so a reconnect neither repeats nor loses events.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

from aio_pika.abc import (
    AbstractChannel,
    AbstractConnection,
    AbstractIncomingMessage,
    AbstractQueue,
    ConsumerTag,
)
from aiormq.exceptions import ChannelInvalidStateError

from warren_cron.broker.connect import close_quietly
from warren_cron.broker.ending import end_consumer
from warren_cron.errors import BROKER_TROUBLE
from warren_cron.history.events import Event, decode
from warren_cron.history.reader import consuming, last_offset, stream_offset

#: Messages held at once: a message holds up to 500 events, and a follower catching up on a
#: day of them should not hold hundreds of megabytes.
PREFETCH = 100
#: Called with each message's events and its offset.
OnEvents = Callable[[list[Event], int], None]


class StreamFollower:
    """Consumes ``stream`` after offset ``after`` (-1: from its first message, or from the
    first message published at or after ``since``) until ``stop``."""

    def __init__(
        self, stream: str, on_events: OnEvents, after: int = -1, since: datetime | None = None
    ) -> None:
        self.stream = stream
        self._since = since
        #: The offset of the last message handed over.
        self.offset = after
        #: An offset at or before the stream's end when following began; None if it was empty.
        self.end_at_start: int | None = None
        self._on_events = on_events
        self._arguments: dict[str, Any] = {}
        self._queue: AbstractQueue | None = None
        self._tag: ConsumerTag | None = None
        self._channel: AbstractChannel | None = None

    @property
    def caught_up(self) -> bool:
        """True once every event the stream held when following began was handed over."""
        return self.end_at_start is None or self.offset >= self.end_at_start

    async def start(self, connection: AbstractConnection) -> None:
        """Start consuming; the stream must exist. A stream that cannot be read yet leaves
        no channel behind for a caller trying again."""
        self._channel, _ = await consuming(connection, self._consume)

    async def _consume(self, channel: AbstractChannel) -> None:
        # Streams serve only consumers with a prefetch, and need acks to go on delivering.
        await channel.set_qos(prefetch_count=PREFETCH)
        end = await last_offset(channel, self.stream)
        self.end_at_start = None if end is None else end.offset
        first: int | str | datetime = "first" if self._since is None else self._since
        self._arguments["x-stream-offset"] = self.offset + 1 if self.offset >= 0 else first
        # Declared (passively), not merely named: a robust channel restores only the queues
        # declared on it, and with them their consumers, at the offset kept in the arguments.
        self._queue = await channel.declare_queue(self.stream, passive=True)
        self._tag = await self._queue.consume(self._on_message, arguments=self._arguments)

    async def stop(self) -> None:
        """Stop consuming; the channel closes with its connection.

        Closing it here could race an ack still on its way, which the broker answers by
        closing the whole connection."""
        if self._queue is not None and self._tag is not None:
            # A channel the broker or a lost connection closed took the consumer with it.
            with contextlib.suppress(*BROKER_TROUBLE):
                await end_consumer(self._queue, self._tag)
            self._tag = None

    async def close(self) -> None:
        """Stop consuming and close the channel, for a follower started again on a new one:
        a robust connection restores every channel left open after each reconnect, so each
        would hold one more channel on the broker for good."""
        await self.stop()
        channel, self._channel = self._channel, None
        if channel is not None:
            # A delivery still being handed over acks on a closing channel: its ack is
            # refused here (see _on_message), never sent to a channel the broker closed.
            await close_quietly(channel)

    def _hand_over(self, body: bytes, offset: int) -> None:
        """Hand one message over: its events, decoded (a follower of another stream reads
        its own kind of message)."""
        self._on_events(decode(body, offset), offset)

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        offset = stream_offset(message)
        if offset > self.offset:
            self._hand_over(message.body, offset)
            self.offset = offset
            self._arguments["x-stream-offset"] = offset + 1
        # A channel closed meanwhile (close(), a lost connection): a stream needs no ack but
        # for flow, and the message was handed over already.
        with contextlib.suppress(ChannelInvalidStateError):
            await message.ack()
