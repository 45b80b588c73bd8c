"""The watermark: "every fire up to T is handled", kept in the broker for the next leader.

It lives in the durable one-message queue ``<ns>_scheduler.watermark``
(``topology/broker/latest.py``): publishing a new watermark drops the old one, and a
confirmed publish is the whole update. The leader writes it only after the fires it covers
were confirmed (or skipped by their catch-up policy).
"""

from __future__ import annotations

from datetime import datetime

import orjson
import structlog
from aio_pika.abc import AbstractChannel

from warren_cron.broker.latest import LatestMessage
from warren_cron.clock import utc_text, utcnow
from warren_cron.declare import QueueType, queue_arguments
from warren_cron.names import Names

log = structlog.get_logger("scheduler")
#: The watermark's key in its message body. Its spelling is the stored format: renamed, a new
#: scheduler would not read the watermark an older one left, and would catch nothing up.
KEY = "settled_up_to"


class Watermark:
    """Reads and writes the watermark through a channel with publisher confirms."""

    def __init__(
        self, channel: AbstractChannel, names: Names, queue_type: QueueType, queue: str = ""
    ) -> None:
        """``queue``: a partition's watermark queue, the one watermark's by default."""
        args = queue_arguments(queue_type, max_length=1)
        self._store = LatestMessage(channel, queue or names.watermark_queue, args)

    async def declare(self) -> None:
        """Declare the one-message queue (idempotent)."""
        await self._store.declare(
            "delete it (the next leader then starts without catching up) or keep the "
            "old CRON_QUEUE_TYPE"
        )

    async def read(self) -> datetime | None:
        """The stored watermark, or None when there is none or it cannot be read."""
        body = await self._store.read()
        if body is None:
            return None
        try:
            return datetime.fromisoformat(orjson.loads(body)[KEY])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as error:
            log.warning("watermark unreadable; starting without catch-up", error=repr(error))
            return None

    async def write(self, moment: datetime) -> None:
        """Store ``moment``; returns once the broker confirmed it."""
        body = orjson.dumps({KEY: utc_text(moment), "written_at": utc_text(utcnow())})
        await self._store.write(body)
