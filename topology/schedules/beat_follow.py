"""Every scheduler's latest beat, followed live from ``<ns>_scheduler.beats``.

The monitor's liveness alert and the schedulers spreading their partitions both need who
beats now: one consumer from a few hundred beats before the stream's end, kept for the
process's life (a read of the stream's tail every few seconds opened and closed a channel
each time, with beats still in flight to it).

A consumer can get stuck: one attached to the stream while the node restarted (RabbitMQ
3.10) was seen to get the stream's old beats and then nothing more, on an open channel, while
a new reader saw every beat. So the readers check it: a scheduler reads its own beats back,
and follows the stream again once they stop coming (``behind``); the monitor does so once no
beat came for a while although a scheduler holds the leader queue (``quiet_seconds``).
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage

from warren_cron.broker.connect import close_quietly
from warren_cron.history.reader import consuming, last_offset, stream_offset
from warren_cron.names import Names
from warren_cron.schedules.heartbeats import (
    RECENT_BEATS,
    Beat,
    declare_beats,
    decode_beat,
    latest_by_scheduler,
)

#: A scheduler's own beat read back this many of its intervals late: the reading is behind.
LATE_INTERVALS = 2


class BeatFollower:
    """Keeps ``beats``: each scheduler's latest beat, as the stream brings them."""

    def __init__(self, names: Names) -> None:
        self.names = names
        self.beats: dict[str, Beat] = {}
        self._arguments: dict[str, Any] = {}
        self._channel: AbstractChannel | None = None
        self._heard_at = time.monotonic()  # the last beat delivered, or the start

    async def start(self, connection: AbstractConnection) -> None:
        """Follow the beat stream from its latest beats on (anew, when it already did)."""
        await self.close()
        self._heard_at = time.monotonic()
        await declare_beats(connection, self.names)
        self._channel, _ = await consuming(connection, self._follow)

    def behind(self, me: str, now: datetime) -> bool:
        """True when the latest beat of ``me`` (this process, beating on) read back is over
        ``LATE_INTERVALS`` of its intervals old, or none came back."""
        mine = self.beats.get(me)
        if mine is None:
            return True
        return now - mine.at > timedelta(seconds=mine.interval_seconds * LATE_INTERVALS)

    def quiet_seconds(self) -> float:
        """Seconds since the last beat was delivered (or since the start, if none was)."""
        return time.monotonic() - self._heard_at

    async def close(self) -> None:
        """Stop following (a closed connection has stopped it already)."""
        channel, self._channel = self._channel, None
        if channel is not None:
            await close_quietly(channel)

    async def _follow(self, channel: AbstractChannel) -> None:
        """Consume the beats from a few before the stream's end."""
        await channel.set_qos(prefetch_count=100)
        end = await last_offset(channel, self.names.beat_stream)
        start: int | str = "next" if end is None else max(0, end.offset - RECENT_BEATS)
        # Declared (passively), so a robust channel consumes again after a reconnect, from
        # the offset after the last beat read (the arguments are kept up to date).
        queue = await channel.declare_queue(self.names.beat_stream, passive=True)
        self._arguments["x-stream-offset"] = start
        await queue.consume(self._on_beat, arguments=self._arguments)

    async def _on_beat(self, message: AbstractIncomingMessage) -> None:
        self._heard_at = time.monotonic()
        self._arguments["x-stream-offset"] = stream_offset(message) + 1
        beat = decode_beat(message.body)
        if beat is not None:
            latest_by_scheduler([beat], self.beats)
        await message.ack()
