"""Declare the two streams: ``<ns>_history`` (events, kept for a while) and ``<ns>_control``.

A stream refuses a second declaration with other retention arguments. History is
observability, so a stream found with other arguments is used as it is and the difference
logged once; each declaration runs on a channel of its own, which the refusal closes.
"""

from __future__ import annotations

from typing import Any, Protocol

import aio_pika
import structlog
from aio_pika.abc import AbstractChannel, AbstractConnection
from aiormq.exceptions import ChannelPreconditionFailed

from warren_cron.broker.connect import open_channel
from warren_cron.broker.drops import through_drops
from warren_cron.names import Names

log = structlog.get_logger("history")
#: Retention drops whole segments: small ones keep the stream near its limits.
SEGMENT_BYTES = 50_000_000
#: The control stream holds a few commands a day; this bound is never reached in practice.
CONTROL_MAX_BYTES = 100_000_000
#: A message of no events: what ``open_stream`` puts in an empty stream.
NO_EVENTS = b"[]"


class HistorySettings(Protocol):
    """Retention of the history stream (``CRON_HISTORY_MAX_AGE``, ``CRON_HISTORY_MAX_BYTES``)."""

    @property
    def history_max_age_seconds(self) -> int:
        """How long events are kept."""

    @property
    def history_max_bytes(self) -> int:
        """How many bytes of events are kept."""


def stream_arguments(max_bytes: int, max_age_seconds: int | None = None) -> dict[str, Any]:
    """Arguments of a durable stream; the only place they are built."""
    args: dict[str, Any] = {
        "x-queue-type": "stream",
        "x-max-length-bytes": max_bytes,
        "x-stream-max-segment-size-bytes": min(SEGMENT_BYTES, max_bytes),
    }
    if max_age_seconds is not None:
        args["x-max-age"] = f"{max_age_seconds}s"
    return args


async def declare_stream(connection: AbstractConnection, name: str, args: dict[str, Any]) -> bool:
    """Declare a stream; False (and a warning) when it exists with other arguments.

    Just after a broker restart a stream can exist while its member has not started: the
    declare is refused as NOT_FOUND ("home node ... is down or inaccessible") for some
    seconds, or another reader's consumer drops the connection under it; a service started
    with the broker waits through them (``through_drops``) instead of exiting."""
    return await through_drops(connection, lambda: _declare_once(connection, name, args))


async def _declare_once(connection: AbstractConnection, name: str, args: dict[str, Any]) -> bool:
    channel = await open_channel(connection)
    try:
        await channel.declare_queue(name, durable=True, arguments=args)
    except ChannelPreconditionFailed as error:
        log.warning(
            "stream exists with other arguments; using it as it is (delete it, or set a "
            "policy, to change its retention)",
            stream=name,
            wanted=args,
            error=str(error),
        )
        return False
    await channel.close()
    return True


async def declare_history(
    connection: AbstractConnection, names: Names, settings: HistorySettings
) -> bool:
    """Declare ``<ns>_history`` with the retention of ``settings``."""
    args = stream_arguments(settings.history_max_bytes, settings.history_max_age_seconds)
    return await declare_stream(connection, names.history_stream, args)


async def declare_control(connection: AbstractConnection, names: Names) -> bool:
    """Declare ``<ns>_control``: kept without an age limit, as a pause lasts until resumed."""
    args = stream_arguments(CONTROL_MAX_BYTES)
    return await declare_stream(connection, names.control_stream, args)


async def open_stream(channel: AbstractChannel, stream: str) -> None:
    """Put a message of no events in an empty stream; ``channel`` has publisher confirms.

    A reader tells an empty stream from a slow one only by waiting a second for its last
    message (``topology/history/reader.py``); a stream holding anything answers at once.
    """
    message = aio_pika.Message(NO_EVENTS, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
    await channel.default_exchange.publish(message, stream, mandatory=True)
