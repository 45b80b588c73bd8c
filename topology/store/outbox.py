"""Changes on their way to the log: those appended in one turn of the event loop go out in
one write, each still its own message with its own confirm.

A bulk create keeps hundreds of changes in flight; one aio-pika publish per change (a lock,
a drain, a few tasks each) was a third of the client's CPU per create. Here the changes
appended while the loop runs other work are marshalled together (``broker/batch.py``) and
each one's confirm is entered in aiormq's tables, so a nack, a return or a channel that
closes fails that change alone, as it failed its own publish before. The messages are the
same bytes in the log either way: readers see no difference.
"""

from __future__ import annotations

import asyncio
import time

from aio_pika.abc import AbstractChannel
from aiormq.exceptions import ChannelInvalidStateError

from warren_cron.broker.batch import Sent, publish_batch
from warren_cron.codec import Outgoing

Pending = tuple[Outgoing, asyncio.Future[None]]


class Outbox:
    """Writes the messages given to ``send`` on ``channel`` (publisher confirms, returns
    raising), many in one write."""

    def __init__(self, channel: AbstractChannel, seconds: float) -> None:
        self._channel = channel
        #: A confirm not back by then fails its change with ``TimeoutError``.
        self._seconds = seconds
        self._pending: list[Pending] = []
        #: Writes under way: kept so they are not collected before they finish.
        self._writes: set[asyncio.Task[None]] = set()

    def send(self, message: Outgoing) -> asyncio.Future[None]:
        """Queue ``message``; the future is done when the broker confirms it (or fails why not)."""
        confirmed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        self._pending.append((message, confirmed))
        return confirmed

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        task = asyncio.ensure_future(self._write(batch))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _publish(self, messages: list[Outgoing]) -> Sent:
        if self._channel.is_closed:  # as aio-pika's publish: fail now, not on reconnect
            raise ChannelInvalidStateError(f"{self._channel!r} closed")
        return await publish_batch(self._channel, messages)

    async def _write(self, batch: list[Pending]) -> None:
        try:
            sent = await self._publish([message for message, _ in batch])
        except Exception as error:  # the channel is gone or closing: each change fails
            outcomes: list[BaseException | None] = [error] * len(batch)
        else:
            outcomes = await sent.confirmed(time.monotonic() + self._seconds)
        for (_, confirmed), outcome in zip(batch, outcomes, strict=True):
            _settle(confirmed, outcome)


def _settle(confirmed: asyncio.Future[None], outcome: BaseException | None) -> None:
    if confirmed.done():
        return  # its writer stopped waiting
    if outcome is None:
        confirmed.set_result(None)
    elif isinstance(outcome, asyncio.CancelledError):
        confirmed.cancel()
    else:
        confirmed.set_exception(outcome)
