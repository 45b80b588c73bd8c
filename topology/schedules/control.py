"""Pause and resume: commands kept in the stream ``<ns>_control``, folded into who is paused.

The stream is the durable state: each command is a ``paused`` or ``resumed`` event (the
format of ``topology/history/events.py``), appended with a publisher confirm, never edited,
so two operators never overwrite each other's change, and whichever scheduler leads reads
the same answer. The last command about a schedule wins.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import aio_pika
from aio_pika.abc import AbstractConnection

from warren_cron.broker.connect import publish_channel
from warren_cron.envelope import CONTENT_TYPE
from warren_cron.history.events import Event, encode
from warren_cron.history.reader import read_stream
from warren_cron.history.stream import declare_control
from warren_cron.names import Names


@dataclass(frozen=True, slots=True)
class Pause:
    """A schedule's pause: why, by whom, since when."""

    reason: str
    by: str
    since: datetime


def fold_pauses(
    events: Iterable[Event], paused: dict[str, Pause] | None = None
) -> dict[str, Pause]:
    """The schedules paused after ``events`` (applied over ``paused``), by name."""
    state = dict(paused or {})
    for event in events:
        if event.schedule is None:
            continue
        if event.type == "paused":
            state[event.schedule] = Pause(event.get("reason", ""), event.get("by", "?"), event.at)
        elif event.type == "resumed":
            state.pop(event.schedule, None)
    return state


async def read_pauses(connection: AbstractConnection, names: Names) -> dict[str, Pause]:
    """Every schedule paused now, read from the start of the control stream."""
    await declare_control(connection, names)
    return fold_pauses([event async for event in read_stream(connection, names.control_stream)])


async def send_command(
    connection: AbstractConnection, names: Names, command: dict[str, Any]
) -> None:
    """Append one ``paused`` or ``resumed`` event; returns once the broker confirmed it."""
    await declare_control(connection, names)
    channel = await publish_channel(connection)
    try:
        message = aio_pika.Message(
            encode([command]),
            content_type=CONTENT_TYPE,
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        )
        await channel.default_exchange.publish(message, names.control_stream, mandatory=True)
    finally:
        await channel.close()
