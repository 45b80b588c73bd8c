"""The schedules log's acks: one ``multiple`` ack for many messages, written in order."""

from __future__ import annotations

import asyncio
import contextlib

from aio_pika.abc import AbstractIncomingMessage

from warren_cron.errors import BROKER_TROUBLE

#: An ack waits this long for more messages to cover: following a bulk create, an ack each
#: turn of the loop was a write for nearly every change (a fifth of a follower's samples).
ACK_SECONDS = 0.05
#: ... or until this many are read (a quarter of the log consumer's prefetch, 500), so that
#: a fast read of the log never waits for credit.
ACK_EVERY = 125


class TurnAcks:
    """Acks the messages read within ``ACK_SECONDS`` (or ``ACK_EVERY`` of them) with one
    ``multiple`` ack: a bulk create reads hundreds a second, and an ack each was a write
    each. A stream's acks only give the consumer credit: none is redelivered unacked."""

    def __init__(self) -> None:
        #: The last message read and not acked yet, and the acks under way.
        self._unacked: AbstractIncomingMessage | None = None
        self._next: AbstractIncomingMessage | None = None
        self._acking: asyncio.Future[None] | None = None
        self._settled = False
        self._count = 0

    def read(self, message: AbstractIncomingMessage) -> None:
        """Ack ``message`` (and every one before it) soon."""
        if self._settled:
            return  # its channel is closing: the credit goes with it
        first, self._unacked = self._unacked is None, message
        self._count += 1
        if first:
            asyncio.get_running_loop().call_later(ACK_SECONDS, self._ack)
        elif self._count == ACK_EVERY:
            asyncio.get_running_loop().call_soon(self._ack)

    def restart(self) -> None:
        """Ack again, on a new channel: what an old one left unacked is dropped."""
        self._unacked = self._next = None
        self._settled, self._count = False, 0

    async def settle(self) -> None:
        """Ack nothing more and wait for the ack under way, before the channel closes: an ack
        written after the channel's close makes the broker close the whole connection
        (``CHANNEL_ERROR - expected 'channel.open'``), and every channel on it."""
        self._settled, self._unacked, self._next = True, None, None
        if self._acking is not None:
            await asyncio.wait({self._acking})

    def _ack(self) -> None:
        # A timer of an earlier batch may come after ACK_EVERY acked it: an early ack.
        message, self._unacked, self._count = self._unacked, None, 0
        if message is None:
            return
        self._next = message
        if self._acking is None or self._acking.done():
            self._acking = asyncio.ensure_future(self._acked())

    async def _acked(self) -> None:
        # One writer, so acks leave in order: two acks awaiting a full write queue at once
        # could be written the newer first, and the older one (multiple) then names a tag
        # the broker no longer holds: it closes the channel (PRECONDITION_FAILED, unknown
        # delivery tag), and the leader's term with it.
        while (message := self._next) is not None:
            self._next = None
            with contextlib.suppress(*BROKER_TROUBLE):  # a closed channel: the credit is gone
                await message.ack(multiple=True)
