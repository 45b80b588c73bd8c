"""Backfill a schedule: which fires of a past range to publish, then publishing them.

``warren schedules backfill`` calls these. A fire whose run id the history already holds as
published is not sent again; the sending itself, paced and one run at a time where the
schedule's overlap policy needs it, is ``topology/schedules/backfill.py``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from aio_pika.abc import AbstractConnection

from warren_cron.errors import PlanError, StoreError, WarrenError
from warren_cron.history.publisher import HistoryPublisher
from warren_cron.names import Names
from warren_cron.runtime.settings import CronSettings
from warren_cron.schedules.backfill import Backfill, range_fires, sent_run_ids
from warren_cron.schedules.schedule import Schedule, build_schedule
from warren_cron.store.admin import ScheduleAdmin


class BackfillRefused(WarrenError, ValueError):
    """A backfill that cannot be made: an archived or unknown schedule, too many fires."""


@dataclass(frozen=True, slots=True)
class BackfillPlan:
    """A range's fires of one schedule, and the run ids the history holds as sent."""

    schedule: Schedule
    fires: list[datetime]
    sent: frozenset[str]

    def was_sent(self, fire: datetime) -> bool:
        """Whether the fire's run id was published before: it is skipped."""
        return self.schedule.run_id(fire) in self.sent

    @property
    def todo(self) -> list[datetime]:
        """The fires to publish, in order."""
        return [fire for fire in self.fires if not self.was_sent(fire)]


async def runtime_target(name: str, store: ScheduleAdmin, settings: CronSettings) -> Schedule:
    """Runtime schedule ``name`` to backfill; ``BackfillRefused`` when archived or unknown."""
    try:
        stored = await store.get(name)
        if stored.status == "archived":
            raise BackfillRefused(f"runtime schedule {name!r} is archived: nothing to backfill")
        return build_schedule(stored.spec, settings)
    except (StoreError, PlanError) as error:
        raise BackfillRefused(str(error)) from None


async def plan_backfill(
    connection: AbstractConnection,
    names: Names,
    schedule: Schedule,
    start: datetime,
    end: datetime,
) -> BackfillPlan:
    """The fires from ``start`` to ``end`` and which were sent; ``BackfillRefused`` for a
    range of too many fires."""
    try:
        fires = range_fires(schedule, start, end)
    except ValueError as error:
        raise BackfillRefused(str(error)) from None
    sent = await sent_run_ids(connection, names, schedule.name, start)
    return BackfillPlan(schedule, fires, frozenset(sent))


async def send_backfill(
    connection: AbstractConnection,
    settings: CronSettings,
    plan: BackfillPlan,
    history: HistoryPublisher,
    by: str,
    *,
    rate: float,
    run_timeout: float,
) -> int:
    """Publish the plan's fires not sent before, at ``rate`` a second; how many.
    ``TimeoutError`` when a one-at-a-time run did not end within ``run_timeout``."""
    todo = plan.todo
    job = Backfill(connection, settings, plan.schedule, history, by, rate, run_timeout)
    await job.send(todo)
    return len(todo)
