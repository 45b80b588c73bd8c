"""A durable queue that holds one message, the latest: the scheduler's watermark, the status fold.

The queue has ``x-max-length`` 1, so publishing a new message drops the old one and a
confirmed publish is the whole update. Reading is ``basic.get`` and a return: the message
stays until a newer one replaces it.
"""

from __future__ import annotations

from typing import Any

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractQueue

from warren_cron.envelope import CONTENT_TYPE
from warren_cron.errors import TopologyError


class LatestMessage:
    """Reads and writes the one message of queue ``name`` through a channel with confirms."""

    def __init__(self, channel: AbstractChannel, name: str, arguments: dict[str, Any]) -> None:
        self._channel = channel
        self.name = name
        self._arguments = arguments
        self._queue: AbstractQueue | None = None

    async def declare(self, conflict_hint: str) -> None:
        """Declare the queue (idempotent); ``conflict_hint`` says what to do if it differs."""
        try:
            self._queue = await self._channel.declare_queue(
                self.name, durable=True, arguments=self._arguments
            )
        except aio_pika.exceptions.ChannelPreconditionFailed as error:
            raise TopologyError(
                f"queue {self.name!r} exists with other arguments than {self._arguments} "
                f"({error}); {conflict_hint}"
            ) from None

    async def read(self) -> bytes | None:
        """The body of the message held, or None when there is none."""
        assert self._queue is not None, "declare() first"
        message = await self._queue.get(no_ack=False, fail=False)
        if message is None:
            return None
        await message.nack(requeue=True)
        return message.body

    async def write(self, body: bytes) -> None:
        """Replace the message; returns once the broker confirmed it."""
        message = aio_pika.Message(
            body, content_type=CONTENT_TYPE, delivery_mode=aio_pika.DeliveryMode.PERSISTENT
        )
        await self._channel.default_exchange.publish(message, self.name, mandatory=True)
