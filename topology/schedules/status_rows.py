"""Each schedule's status row: the schedules file joined with the history fold and the pauses.

``warren status`` prints these rows and the dashboard's schedules page shows them: one source,
two faces.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from warren_cron.clock import utc_text
from warren_cron.durations import relative
from warren_cron.history.status_fold import ScheduleState, StatusFold
from warren_cron.schedules.control import Pause
from warren_cron.schedules.load import ScheduleSet
from warren_cron.schedules.schedule import Schedule

#: A fire not seen in the history this long after it was due is overdue: fires reach the
#: history in the background, a second or two after they are published.
OVERDUE_GRACE = timedelta(seconds=10)


@dataclass(frozen=True, slots=True)
class StatusRow:
    """One schedule's status; times in UTC, None where there is none."""

    name: str
    schedule: str
    paused: bool
    #: ``active``, ``paused``, ``disabled`` (``enabled = false``) or ``completed`` (no fire
    #: left under ``stop_at`` or ``runs``).
    status: str
    last_fire_at: datetime | None
    last_outcome: str | None
    last_success_at: datetime | None
    last_failure_at: datetime | None
    next_fire_at: datetime | None
    retrying: int
    failed_records: int
    expect_success_within: str | None
    #: When the fire after the last one was due, if that is long past and it never came.
    overdue_since: datetime | None = None
    #: ``file`` (CRON_SCHEDULES_FILE) or ``runtime`` (the broker's store).
    source: str = "file"

    def next_fire_text(self, now: datetime) -> str:
        """``in 4s``, or ``overdue 3m`` when nothing fired since a fire was due."""
        if self.overdue_since is not None:
            return f"overdue {relative(self.overdue_since, now).removesuffix(' ago')}"
        return relative(self.next_fire_at, now)

    def to_json(self) -> dict[str, Any]:
        """The row as JSON values, times as ``2026-01-31T02:30:00Z``."""
        values = (getattr(self, key) for key in self.__slots__)
        return {
            key: utc_text(value) if isinstance(value, datetime) else value
            for key, value in zip(self.__slots__, values, strict=True)
        }


def fires_when(schedule: Schedule) -> str:
    """How a schedule fires, as written in the file: its cron (and zone) or its interval."""
    spec = schedule.spec
    if spec.cron is None:
        return f"every {spec.every}"
    return f"{spec.cron} ({spec.timezone})" if spec.timezone else spec.cron


def upcoming_fire(schedule: Schedule, paused: bool, now: datetime) -> datetime | None:
    """The schedule's next fire after ``now``; none while it is paused or disabled (it
    publishes nothing): what ``warren status``, ``schedules list`` and the dashboard show."""
    return None if paused or not schedule.spec.enabled else schedule.next_fire(now)


def overdue_since(
    schedule: Schedule, state: ScheduleState, paused: bool, now: datetime
) -> datetime | None:
    """When the fire after the schedule's last one was due, if that is past the grace and
    none came (no scheduler leads, or it is stuck); None otherwise."""
    if paused or not schedule.spec.enabled or state.last_fire_at is None:
        return None
    due = schedule.next_fire(state.last_fire_at)
    return due if due is not None and due < now - OVERDUE_GRACE else None


def schedule_status(schedule: Schedule, paused: bool, now: datetime) -> str:
    """``completed`` once no fire is left (``stop_at``, ``runs``); else ``disabled``,
    ``paused`` or ``active``: what ``warren status``, ``schedules list`` and the dashboard
    show."""
    if schedule.completed(now):
        return "completed"
    if not schedule.spec.enabled:
        return "disabled"
    return "paused" if paused else "active"


def status_row(
    schedule: Schedule, state: ScheduleState, counts: tuple[int, int], paused: bool, now: datetime
) -> StatusRow:
    """The row of one schedule."""
    return StatusRow(
        schedule.name,
        fires_when(schedule),
        paused,
        schedule_status(schedule, paused, now),
        state.last_fire_at,
        state.last_outcome,
        state.last_success_at,
        state.last_failure_at,
        upcoming_fire(schedule, paused, now),
        *counts,
        schedule.spec.expect_success_within,
        overdue_since(schedule, state, paused, now),
    )


def status_rows(
    schedules: ScheduleSet | list[Schedule],
    fold: StatusFold,
    pauses: dict[str, Pause],
    now: datetime,
) -> list[StatusRow]:
    """A row per schedule given (a whole file, or a page of it), in their order."""
    chosen = schedules.schedules if isinstance(schedules, ScheduleSet) else schedules
    counts, blank = fold.counts(), ScheduleState()
    return [
        status_row(
            schedule,
            fold.schedules.get(schedule.name, blank),
            counts.get(schedule.name, (0, 0)),
            schedule.name in pauses,
            now,
        )
        for schedule in chosen
    ]
