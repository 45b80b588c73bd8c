"""The watermark: "every fire up to T is handled", kept in the broker for the next leader.

It lives in the durable one-message queue ``<ns>_scheduler.watermark``: the queue holds at
most one message, so publishing a new watermark drops the old one, and a confirmed publish
is the whole update. The leader writes it only after the fires it covers were confirmed
(or skipped by their catch-up policy).
"""

from __future__ import annotations

from datetime import datetime

import aio_pika
import orjson
import structlog
from aio_pika.abc import AbstractChannel, AbstractQueue

from topology.declare import QueueType, queue_arguments
from topology.envelope import CONTENT_TYPE, utcnow
from topology.errors import TopologyError
from topology.names import Names
from topology.schedules.timing import utc_text

log = structlog.get_logger("scheduler")
#: The watermark's key in its message body. Its spelling is the stored format: renamed, a new
#: scheduler would not read the watermark an older one left, and would catch nothing up.
KEY = "settled_up_to"


class Watermark:
    """Reads and writes the watermark through a channel with publisher confirms."""

    def __init__(self, channel: AbstractChannel, names: Names, queue_type: QueueType) -> None:
        self._channel = channel
        self._name = names.watermark_queue
        self._queue_type = queue_type
        self._queue: AbstractQueue | None = None

    async def declare(self) -> None:
        """Declare the one-message queue (idempotent)."""
        args = queue_arguments(self._queue_type, max_length=1)
        try:
            self._queue = await self._channel.declare_queue(
                self._name, durable=True, arguments=args
            )
        except aio_pika.exceptions.ChannelPreconditionFailed as error:
            raise TopologyError(
                f"queue {self._name!r} exists with other arguments than {args} ({error}); "
                "delete it (the next leader then starts without catching up) or keep the "
                "old CRON_QUEUE_TYPE"
            ) from None

    async def read(self) -> datetime | None:
        """The stored watermark, or None when there is none or it cannot be read."""
        assert self._queue is not None, "declare() first"
        message = await self._queue.get(no_ack=False, fail=False)
        if message is None:
            return None
        # Handed back at once: the message stays until a newer watermark replaces it.
        await message.nack(requeue=True)
        try:
            return datetime.fromisoformat(orjson.loads(message.body)[KEY])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as error:
            log.warning("watermark unreadable; starting without catch-up", error=repr(error))
            return None

    async def write(self, moment: datetime) -> None:
        """Store ``moment``; returns once the broker confirmed it."""
        body = orjson.dumps({KEY: utc_text(moment), "written_at": utc_text(utcnow())})
        message = aio_pika.Message(
            body, content_type=CONTENT_TYPE, delivery_mode=aio_pika.DeliveryMode.PERSISTENT
        )
        await self._channel.default_exchange.publish(message, self._name, mandatory=True)
