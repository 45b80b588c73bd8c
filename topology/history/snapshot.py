"""The monitor's status fold kept in the one-message queue ``<ns>_status``, and read back.

The monitor writes the fold every few seconds while it changes; a reader takes it and folds
only the events the stream got after its offset, so it answers in the same time whether the
stream holds an hour of events or a week. Without a fold (no monitor ever ran) the reader
folds the whole stream.
"""

from __future__ import annotations

import structlog
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage

from warren_cron.broker.inspect import counts, peek
from warren_cron.broker.latest import LatestMessage
from warren_cron.declare import UNLIMITED_DELIVERIES, QueueType, queue_arguments
from warren_cron.history.reader import read_stream
from warren_cron.history.status_fold import StatusFold
from warren_cron.names import Names

log = structlog.get_logger("history")
CONFLICT_HINT = (
    "delete it (the monitor folds the history stream again) or keep the old CRON_QUEUE_TYPE"
)


def status_store(channel: AbstractChannel, names: Names, queue_type: QueueType) -> LatestMessage:
    """The queue ``<ns>_status`` on ``channel`` (which needs publisher confirms to write)."""
    # Every warren status call reads it with a get and a return: on quorum queues each return
    # counts toward the delivery limit, and the fold must not be dropped for being read.
    args = queue_arguments(queue_type, max_length=1, delivery_limit=UNLIMITED_DELIVERIES)
    return LatestMessage(channel, names.status_queue, args)


def parse_fold(body: bytes) -> StatusFold | None:
    """The fold in a body, or None (and a warning) when it is no fold of this version."""
    try:
        return StatusFold.loads(body)
    except ValueError as error:
        log.warning("status fold unreadable; folding the history stream again", error=str(error))
        return None


def _body(message: AbstractIncomingMessage) -> bytes:
    return message.body


async def read_fold(connection: AbstractConnection, names: Names) -> StatusFold | None:
    """The monitor's last fold, or None when there is none."""
    body = await peek(connection, names.status_queue, _body)
    return None if body is None else parse_fold(body)


async def current_status(connection: AbstractConnection, names: Names) -> tuple[StatusFold, bool]:
    """The fold of the whole history as it stands, and whether a monitor's fold was the start."""
    stored = await read_fold(connection, names)
    fold = stored or StatusFold()
    if await counts(connection, names.history_stream) is not None:
        start = fold.offset + 1 if fold.offset >= 0 else "first"
        async for event in read_stream(connection, names.history_stream, start):
            fold.apply(event)
    return fold, stored is not None
