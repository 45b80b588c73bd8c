"""The schedules log's acks: one ``multiple`` ack a turn of the loop, written in order."""

from __future__ import annotations

import asyncio
import contextlib

from aio_pika.abc import AbstractIncomingMessage

from warren_cron.errors import BROKER_TROUBLE


class TurnAcks:
    """Acks every message read in one turn of the event loop with one ``multiple`` ack: a
    bulk create reads hundreds at once, and an ack each was a write each."""

    def __init__(self) -> None:
        #: The last message read and not acked yet, and the acks under way.
        self._unacked: AbstractIncomingMessage | None = None
        self._next: AbstractIncomingMessage | None = None
        self._acking: asyncio.Future[None] | None = None
        self._settled = False

    def read(self, message: AbstractIncomingMessage) -> None:
        """Ack ``message`` (and every one before it) at the end of this turn."""
        if self._settled:
            return  # its channel is closing: the credit goes with it
        if self._unacked is None:
            asyncio.get_running_loop().call_soon(self._ack)
        self._unacked = message

    def restart(self) -> None:
        """Ack again, on a new channel: what an old one left unacked is dropped."""
        self._unacked = self._next = None
        self._settled = False

    async def settle(self) -> None:
        """Ack nothing more and wait for the ack under way, before the channel closes: an ack
        written after the channel's close makes the broker close the whole connection
        (``CHANNEL_ERROR - expected 'channel.open'``), and every channel on it."""
        self._settled, self._unacked, self._next = True, None, None
        if self._acking is not None:
            await asyncio.wait({self._acking})

    def _ack(self) -> None:
        message, self._unacked = self._unacked, None
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
