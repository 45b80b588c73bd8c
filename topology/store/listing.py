"""Each schedule as a list shows it, file and runtime alike: what ``warren schedules list``
and the HTTP API answer, from one place."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from warren_cron.clock import utc_text
from warren_cron.runtime.settings import CronSettings
from warren_cron.schedules.control import Pause
from warren_cron.schedules.schedule import Schedule, build_schedule
from warren_cron.schedules.status_rows import schedule_status, upcoming_fire
from warren_cron.store.stored import StoredSchedule, pause_fields


def file_row(schedule: Schedule, pause: Pause | None, now: datetime) -> dict[str, Any]:
    """One schedule: name, how it fires, next fire, pause."""
    following = upcoming_fire(schedule, pause is not None, now)
    return {
        "name": schedule.name,
        "source": "file",
        "status": schedule_status(schedule, pause is not None, now),
        "fires": schedule.timing.describe(),
        "next_fire_at": utc_text(following) if following else None,
        **pause_fields(pause),
    }


def runtime_row(stored: StoredSchedule, settings: CronSettings, now: datetime) -> dict[str, Any]:
    """One runtime schedule as ``list`` shows it."""
    schedule = build_schedule(stored.spec, settings, since=stored.since)
    live = stored.status in ("active", "completed")
    following = upcoming_fire(schedule, not live, now)
    return {
        "name": stored.name,
        "source": "runtime",
        "status": stored.status,
        "version": stored.version,
        "fires": schedule.timing.describe(),
        "next_fire_at": utc_text(following) if following else None,
        **pause_fields(stored.pause),
    }


def owed_file(schedules: tuple[Schedule, ...], stored: list[StoredSchedule]) -> list[Schedule]:
    """The file's schedules with the moment their store copies hold (the leader recorded it):
    ``runs`` without ``start_at`` is counted from it, as the scheduler counts it."""
    moments = {item.name: item.since for item in stored if item.from_file}
    return [s.owed_from(moments.get(s.name, s.since)) for s in schedules]


def listed(stored: list[StoredSchedule]) -> list[StoredSchedule]:
    """The runtime schedules a list shows: the store's copies of the scheduler's own file's
    schedules are left out (the file's rows show them)."""
    return [item for item in stored if not item.from_file]
