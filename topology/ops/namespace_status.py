"""The namespace's status: whether a scheduler leads, and one row per schedule, of the
schedules file and the store alike (``warren status``).

The rows are ``warren_cron.ops.schedules``'s, as every surface's. The history comes from the
monitor's status fold (``<ns>_status``) and the events the stream got after it; without a
fold (no monitor running) the whole stream is folded, which takes longer, and the result says
so.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime

from aio_pika.abc import AbstractConnection

from warren_cron.broker.connect import connect
from warren_cron.clock import utcnow
from warren_cron.history.snapshot import current_status
from warren_cron.history.status_fold import StatusFold
from warren_cron.names import Names
from warren_cron.ops.schedules import Listed, every_schedule, status_rows
from warren_cron.runtime.settings import CronSettings
from warren_cron.schedules.control import read_pauses
from warren_cron.schedules.heartbeats import SchedulerView, scheduler_view
from warren_cron.schedules.load import ScheduleSet
from warren_cron.schedules.status_rows import StatusRow
from warren_cron.store.admin import ScheduleAdmin


@dataclass(frozen=True, slots=True)
class NamespaceStatus:
    """What ``warren status`` shows, read at ``at``."""

    rows: list[StatusRow]
    scheduler: SchedulerView
    #: False: no monitor's fold was found, so the whole history stream was folded.
    from_monitor_fold: bool
    at: datetime


async def namespace_status(settings: CronSettings, schedules: ScheduleSet) -> NamespaceStatus:
    """Read the scheduler's state and each schedule's row (the file's ``schedules`` and the
    store's) on one connection."""
    connection = await connect(settings, "warren-status-script", log_outages=False)
    async with connection:
        fold, stored, rows, view = await _gathered(connection, settings, schedules)
    now = utcnow()
    return NamespaceStatus(status_rows(rows, fold, now), view, stored, now)


async def _gathered(
    connection: AbstractConnection, settings: CronSettings, schedules: ScheduleSet
) -> tuple[StatusFold, bool, list[Listed], SchedulerView]:
    """The history's fold (and whether a monitor's fold was its start), every schedule and
    what the leader queue and the beats say of the schedulers."""
    names = Names(settings.namespace)
    admin = ScheduleAdmin(settings)
    # All are reads to a stream's end; side by side, their waits overlap.
    (fold, stored), pauses, view, _ = await asyncio.gather(
        current_status(connection, names),
        read_pauses(connection, names),
        scheduler_view(connection, names, utcnow(), settings.scheduler_partitions),
        admin.start(connection),
    )
    try:
        rows = await every_schedule(
            schedules.schedules, admin, pauses, settings, utcnow(), sync=True
        )
    finally:
        await admin.close()
    return fold, stored, rows, view
