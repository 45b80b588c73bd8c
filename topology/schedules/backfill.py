"""Backfill: publish the fires of a past range, with the run ids they would have had.

A fire whose run id the history stream already holds as ``fired`` or ``triggered`` is not
sent again, so a backfill run twice sends each run id once (a fire older than the history's
retention cannot be known: it is sent). Fires go out at a bounded rate; a schedule with
``concurrency = Forbid`` or ``Replace`` gets one at a time, each waiting for the previous
run to end, as the worker would otherwise skip (Forbid) or cancel (Replace) all but one.
Each fire sent is recorded as ``fired`` with ``by`` and ``backfill: true``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import datetime, timedelta

from aio_pika.abc import AbstractConnection

from warren_cron.broker.connect import publish_channel
from warren_cron.clock import utc_text, utcnow
from warren_cron.declare import declare_topology
from warren_cron.history.publisher import HistoryPublisher
from warren_cron.history.reader import read_stream
from warren_cron.history.recent import CLOCK_SLACK, one_run
from warren_cron.history.run_fold import ENDED
from warren_cron.names import Names
from warren_cron.publish import TaskPublisher
from warren_cron.runtime.settings import CronSettings
from warren_cron.schedules.schedule import Schedule

#: A backfill larger than this is refused: split the range.
MAX_FIRES = 10_000
#: How often a Forbid or Replace backfill looks whether the run it sent has ended.
POLL_SECONDS = 0.5
_TICK = timedelta(microseconds=1)
_SENT_TYPES = frozenset({"fired", "triggered"})


def range_fires(schedule: Schedule, start: datetime, end: datetime) -> list[datetime]:
    """The schedule's fires from ``start`` to ``end``, both included; ``ValueError`` past
    ``MAX_FIRES``."""
    fires: list[datetime] = []
    fire = schedule.next_fire(start - _TICK)
    while fire is not None and fire <= end:
        if len(fires) == MAX_FIRES:
            raise ValueError(f"the range holds over {MAX_FIRES} fires: backfill it in parts")
        fires.append(fire)
        fire = schedule.next_fire(fire)
    return fires


async def sent_run_ids(
    connection: AbstractConnection, names: Names, schedule: str, since: datetime
) -> set[str]:
    """Run ids of ``schedule`` the history holds as published, from shortly before ``since``."""
    found: set[str] = set()
    async for event in read_stream(connection, names.history_stream, since - CLOCK_SLACK):
        if event.schedule == schedule and event.type in _SENT_TYPES and event.run_id:
            found.add(event.run_id)
    return found


@dataclass(frozen=True, slots=True)
class Backfill:
    """One backfill of ``schedule``: who asks, how fast, how long a run may take."""

    connection: AbstractConnection
    settings: CronSettings
    schedule: Schedule
    history: HistoryPublisher
    by: str
    rate: float = 10.0
    run_timeout: float = 3600.0

    @property
    def one_at_a_time(self) -> bool:
        """True when the overlap policy needs each run to end before the next is sent."""
        return self.schedule.spec.concurrency != "Allow"

    async def send(self, fires: list[datetime]) -> None:
        """Publish each fire, confirmed, at ``rate`` per second."""
        names = Names(self.settings.namespace)
        channel = await publish_channel(self.connection)
        try:
            topology = await declare_topology(channel, names, self.settings)
            tasks = TaskPublisher(channel, topology.tasks, names, self.settings.queue_type)
            for fire in fires:
                await self._paced(self._one(tasks, fire, names))
        finally:
            await channel.close()

    async def _paced(self, step: Awaitable[None]) -> None:
        began = time.monotonic()
        await step
        await asyncio.sleep(max(0.0, 1 / self.rate - (time.monotonic() - began)))

    async def _one(self, tasks: TaskPublisher, fire: datetime, names: Names) -> None:
        schedule, sent_at = self.schedule, utcnow()
        run_id = schedule.run_id(fire)
        await tasks.publish(schedule.envelope(fire), schedule.plan)
        fired = schedule.event(
            "fired", run_id, utc_text(fire), plan=schedule.routing_key, by=self.by, backfill=True
        )
        self.history.emit(fired)
        if self.one_at_a_time:
            await self._ended(run_id, sent_at, names)

    async def _ended(self, run_id: str, sent_at: datetime, names: Names) -> None:
        deadline = time.monotonic() + self.run_timeout
        while time.monotonic() < deadline:
            run = await one_run(self.connection, names.history_stream, run_id, sent_at)
            if run is not None and run.outcome in ENDED:
                return
            await asyncio.sleep(POLL_SECONDS)
        raise TimeoutError(
            f"run {run_id} did not end within {self.run_timeout:g} s; the backfill stopped "
            "there: run it again later (fires sent are not sent twice)"
        )
