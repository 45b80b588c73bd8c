"""Acks of one channel, sent once per event-loop pass instead of one frame each.

At thousands of tasks a second, one ``basic.ack`` frame per task is a frame to encode, a
queue hop to aiormq's writer and a socket write each. Acks decided during one pass of the
loop are sent together at its end: one ``multiple`` ack covers every acked delivery below
the oldest one still unsettled, and any acked delivery above it is acked on its own.

A ``multiple`` ack never covers an unsettled delivery: every delivery is registered when its
task starts, and tasks start in delivery order, so when a delivery is acked, every older one
is registered (or settled). Rejects go out at once: a reject queued before a ``multiple`` ack
reaches the broker first, so the ack does not cover a rejected delivery.
"""

from __future__ import annotations

import asyncio

import aiormq
import structlog
from aiormq.exceptions import ChannelInvalidStateError

log = structlog.get_logger("worker")


class Acks:
    """Settles the deliveries of one aiormq channel."""

    def __init__(self, channel: aiormq.abc.AbstractChannel) -> None:
        self._channel = channel
        self._unsettled: set[int] = set()
        self._acked: list[int] = []
        self._sender: asyncio.Task[None] | None = None

    def delivered(self, tag: int) -> None:
        """A delivery whose attempt is starting: no ack may cover it until it is settled."""
        self._unsettled.add(tag)

    def ack(self, tag: int) -> None:
        """Ack ``tag`` at the end of this loop pass; raises if the channel is already gone."""
        if self._channel.is_closed:
            raise ChannelInvalidStateError(f"{self._channel!r} closed")
        self._unsettled.discard(tag)
        self._acked.append(tag)
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(self._send())

    async def flush(self) -> None:
        """Wait until every ack decided so far has been handed to the connection's writer."""
        while self._sender is not None:
            await asyncio.shield(self._sender)

    async def reject(self, tag: int) -> None:
        """Reject ``tag`` without requeue (the broker dead-letters it), now."""
        self._check_open()
        await self._channel.basic_reject(tag, requeue=False, wait=False)
        self._unsettled.discard(tag)

    def _check_open(self) -> None:
        if self._channel.is_closed:
            raise ChannelInvalidStateError(f"{self._channel!r} closed")

    async def _send(self) -> None:
        # One sender at a time: a tag handed to one batch is never covered by another's
        # multiple ack before its own frame went out (acking a tag twice closes the channel).
        try:
            while self._acked:
                acked, self._acked = sorted(self._acked), []
                await self._send_batch(acked)
        except ChannelInvalidStateError as error:
            # The broker redelivers what it did not see acked.
            log.warning("acks not sent; the broker will redeliver", error=repr(error))
        finally:
            self._sender = None

    async def _send_batch(self, acked: list[int]) -> None:
        oldest = min(self._unsettled, default=None)
        covered = [tag for tag in acked if oldest is None or tag < oldest]
        if covered:
            await self._channel.basic_ack(covered[-1], multiple=len(covered) > 1, wait=False)
        for tag in acked[len(covered) :]:
            await self._channel.basic_ack(tag, wait=False)
