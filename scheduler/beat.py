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
from typing import Protocol

import aio_pika
import structlog
from aio_pika.abc import AbstractConnection

from warren_cron.background import beside
from warren_cron.clock import utcnow
from warren_cron.errors import BROKER_TROUBLE
from warren_cron.names import Names
from warren_cron.scheduler.leader import identity
from warren_cron.schedules.heartbeats import Beat, declare_beats

log = structlog.get_logger("scheduler")


class Beating(Protocol):
    """What a beat reports of the scheduler."""

    leading: asyncio.Event
    last_fire_at: datetime | None
    next_fire_at: datetime | None


def beat_of(scheduler: Beating, interval: float, now: datetime) -> Beat:
    """The beat ``scheduler`` sends now: a leader past its next fire is that much behind."""
    leading = scheduler.leading.is_set()
    due = scheduler.next_fire_at if leading else None
    lag = 0.0 if due is None else max((now - due).total_seconds(), 0.0)
    last = scheduler.last_fire_at if leading else None
    return Beat(identity(), leading, now, interval, last, due, lag)


async def send_beats(
    connection: AbstractConnection, names: Names, scheduler: Beating, interval: float
) -> None:
    """Publish a beat every ``interval`` seconds until cancelled; a broker error is logged
    and ends the beats of this connection (the next connection beats again)."""
    try:
        if not await declare_beats(connection, names):
            return
        channel = await connection.channel(publisher_confirms=False)
        while True:
            body = beat_of(scheduler, interval, utcnow()).encode()
            await channel.default_exchange.publish(aio_pika.Message(body), names.beat_stream)
            await asyncio.sleep(interval)
    except BROKER_TROUBLE as error:
        log.warning("heartbeat stopped until the next connection", error=repr(error))


@contextlib.asynccontextmanager
async def beating(
    connection: AbstractConnection, names: Names, scheduler: Beating, interval: float
) -> AsyncIterator[None]:
    """Beat on ``connection`` while the block runs; a failing beat never ends the block."""
    async with beside(send_beats(connection, names, scheduler, interval)):
        yield
