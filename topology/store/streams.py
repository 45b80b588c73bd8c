"""Where the runtime schedules live: the stream ``<ns>_schedules`` and the one-message
queue ``<ns>_schedules.snapshot``.

The log holds three kinds of message, told apart by the AMQP ``type`` property: a
``change`` (JSON, ``topology/store/changes.py``), a ``snapshot`` note (the log offset a
snapshot just written covers, so every follower knows) and a ``marker`` (empty: a reader
appends one and waits for it to come back to know it has read everything before it).
"""

from __future__ import annotations

from typing import Any

import aio_pika
import orjson
from aio_pika.abc import AbstractChannel, AbstractConnection

from warren_cron.broker.latest import LatestMessage
from warren_cron.codec import Outgoing
from warren_cron.declare import QueueType, queue_arguments
from warren_cron.envelope import CONTENT_TYPE
from warren_cron.history.stream import declare_stream, stream_arguments
from warren_cron.names import Names
from warren_cron.store.changes import Change

#: The log keeps this many bytes; a snapshot is written before a quarter of it is past the
#: newest one (``book.SNAPSHOT_BYTES``).
LOG_MAX_BYTES = 2_000_000_000
CHANGE, SNAPSHOT, MARKER = "change", "snapshot", "marker"
_NO_HEADERS: dict[str, str] = {}


async def declare_log(connection: AbstractConnection, names: Names) -> bool:
    """Declare the change log: kept by size only, as a schedule lasts until archived."""
    return await declare_stream(connection, names.store_log, stream_arguments(LOG_MAX_BYTES))


async def snapshot_store(
    channel: AbstractChannel, names: Names, queue_type: QueueType = "classic"
) -> LatestMessage:
    """The snapshot's one-message queue, declared; ``channel`` has publisher confirms."""
    store = LatestMessage(channel, names.store_snapshot, queue_arguments(queue_type, max_length=1))
    await store.declare(
        "delete it (readers then fold the whole change log) or keep the old CRON_QUEUE_TYPE"
    )
    return store


def _message(body: bytes, kind: str, message_id: str) -> aio_pika.Message:
    return aio_pika.Message(
        body,
        type=kind,
        message_id=message_id,
        content_type=CONTENT_TYPE,
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
    )


def change_message(change: Change, log: str) -> Outgoing:
    """The log message of one change, for ``topology/store/outbox.py``: the properties
    aio-pika would write for ``_message`` (and an empty headers table)."""
    body = orjson.dumps(change.to_json())
    return Outgoing("", log, body, change.id, _NO_HEADERS, CHANGE)


def snapshot_note(offset: int, message_id: str) -> aio_pika.Message:
    """The log message saying a snapshot up to ``offset`` was written."""
    return _message(orjson.dumps({"offset": offset}), SNAPSHOT, message_id)


def marker(message_id: str) -> aio_pika.Message:
    """A message of no content: it comes back once everything before it was read."""
    return _message(b"", MARKER, message_id)


def read_change(body: bytes) -> Change | None:
    """The change a ``change`` message holds; None when it cannot be read."""
    try:
        data: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return Change.from_json(data)


def read_note(body: bytes) -> int | None:
    """The offset a ``snapshot`` note names; None when it cannot be read."""
    try:
        return int(orjson.loads(body)["offset"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
