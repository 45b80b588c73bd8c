"""The scheduler's heartbeat: a beat on ``<ns>_scheduler.beats`` every few seconds.

It runs beside the fire loop, never in it: publishing fires costs nothing more, and a fire
loop stuck on the broker still beats, saying how far behind it falls. Beats are published
without confirms; a lost one is covered by the next (a reader allows for several).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import datetime
from functools import partial
from typing import Protocol

import aio_pika
from aio_pika.abc import AbstractConnection

from warren_cron.background import beside
from warren_cron.broker.again import until_it_works
from warren_cron.broker.connect import drop, open_channel
from warren_cron.clock import utcnow
from warren_cron.names import Names
from warren_cron.scheduler.leader import identity
from warren_cron.scheduler.publisher import wait_for_event
from warren_cron.schedules.heartbeats import Beat, declare_beats


class Beating(Protocol):
    """What a beat reports of the scheduler."""

    leading: asyncio.Event
    last_fire_at: datetime | None
    next_fire_at: datetime | None
    #: The partitions it leads, of how many.
    partitions: tuple[int, ...]
    partition_count: int
    #: Set when the scheduler stops: its beats say it is leaving from then on.
    stopping: asyncio.Event


def beat_of(scheduler: Beating, interval: float, now: datetime) -> Beat:
    """The beat ``scheduler`` sends now: a leader past its next fire is that much behind,
    and one stopping is leaving (the others count it out at once)."""
    leading = scheduler.leading.is_set()
    due = scheduler.next_fire_at if leading else None
    lag = 0.0 if due is None else max((now - due).total_seconds(), 0.0)
    last = scheduler.last_fire_at if leading else None
    parts = scheduler.partitions if leading else ()
    count, leaving = scheduler.partition_count, scheduler.stopping.is_set()
    return Beat(identity(), leading, now, interval, last, due, lag, count, parts, leaving)


async def send_beats(
    connection: AbstractConnection, names: Names, scheduler: Beating, interval: float
) -> None:
    """Publish a beat every ``interval`` seconds until cancelled, and a leaving one at once
    when the scheduler stops (then no more); after a broker error (logged) the beats start
    again an interval later, on a new channel, for as long as the connection lives."""
    beats = partial(_beat, connection, names, scheduler, interval)
    await until_it_works(beats, connection, interval, "heartbeat")


async def _beat(
    connection: AbstractConnection, names: Names, scheduler: Beating, interval: float
) -> None:
    if not await declare_beats(connection, names):
        return  # the stream exists with other arguments: said once, and no beats
    channel = await open_channel(connection, publisher_confirms=False)
    try:
        while True:
            beat = beat_of(scheduler, interval, utcnow())
            await channel.default_exchange.publish(
                aio_pika.Message(beat.encode()), names.beat_stream
            )
            if beat.leaving:
                # Sent as the stop begins, before its partitions are released: a peer that
                # wins one must not give it back to this scheduler as to one under its share.
                return
            await wait_for_event(scheduler.stopping, interval)
    finally:
        drop(channel)  # not waited for: a frozen node would not answer the close


@contextlib.asynccontextmanager
async def beating(
    connection: AbstractConnection, names: Names, scheduler: Beating, interval: float
) -> AsyncIterator[None]:
    """Beat on ``connection`` while the block runs; a failing beat never ends the block."""
    async with beside(send_beats(connection, names, scheduler, interval)):
        yield
