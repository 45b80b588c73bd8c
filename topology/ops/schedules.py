"""Every schedule, file and runtime, as one list of rows with their source: what ``warren
status``, ``warren schedules list|get``, the HTTP API and the dashboard all show.

A file schedule's ``runs`` without ``start_at`` is counted from the moment the leader
recorded in the store, as the scheduler counts it, so ``completed`` reads alike everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from warren_cron.errors import ScheduleNotFound
from warren_cron.history.status_fold import ScheduleState, StatusFold
from warren_cron.runtime.settings import CronSettings
from warren_cron.schedules.control import Pause
from warren_cron.schedules.schedule import Schedule, build_schedule
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.schedules.status_rows import StatusRow, status_row
from warren_cron.store.admin import ScheduleAdmin
from warren_cron.store.listing import file_row, listed, owed_file, runtime_row
from warren_cron.store.stored import StoredSchedule

Source = Literal["file", "runtime"]


@dataclass(frozen=True, slots=True)
class Listed:
    """One schedule as every surface shows it: built to fire, its source and its list row."""

    schedule: Schedule
    source: Source
    #: As ``schedules list`` and ``GET /api/v1/schedules`` show it: name, source, status,
    #: (version), fires, next_fire_at and the pause fields.
    row: dict[str, Any]
    #: The store's entry: the runtime schedule, or the store's copy of a file schedule the
    #: leader recorded (its history of reloads); None for a file schedule without one.
    stored: StoredSchedule | None = None

    @property
    def name(self) -> str:
        """The schedule's name."""
        return self.schedule.name

    @property
    def status(self) -> str:
        """``active``, ``paused``, ``disabled``, ``completed`` or ``archived``."""
        return str(self.row["status"])

    @property
    def paused(self) -> bool:
        """Whether a pause holds its fires back."""
        return bool(self.row["paused"])

    @property
    def spec(self) -> ScheduleSpec:
        """Its fields: a file schedule's as the file says, a runtime one's as stored."""
        if self.source == "runtime" and self.stored is not None:
            return self.stored.spec
        return self.schedule.spec

    @property
    def live(self) -> bool:
        """Not archived: status and the overview count it."""
        return self.status != "archived"


def file_listed(
    schedule: Schedule, pause: Pause | None, now: datetime, copy: StoredSchedule | None = None
) -> Listed:
    """A schedule of the file (already counted from its recorded moment), with its copy."""
    return Listed(schedule, "file", file_row(schedule, pause, now), copy)


def runtime_listed(stored: StoredSchedule, settings: CronSettings, now: datetime) -> Listed:
    """A runtime schedule of the store, archived ones too."""
    schedule = build_schedule(stored.spec, settings, since=stored.since)
    return Listed(schedule, "runtime", runtime_row(stored, settings, now), stored)


def schedule_rows(
    file: Sequence[Schedule],
    stored: list[StoredSchedule],
    pauses: Mapping[str, Pause],
    settings: CronSettings,
    now: datetime,
) -> list[Listed]:
    """Every schedule: the file's in its order (pauses from ``pauses``), then the store's
    runtime ones by name (each with its own pause); the store's copies of the file's
    schedules are not rows of their own, they go with the file's."""
    copies = {item.name: item for item in stored if item.from_file}
    owed = owed_file(tuple(file), stored)
    rows = [file_listed(s, pauses.get(s.name), now, copies.get(s.name)) for s in owed]
    return rows + [runtime_listed(item, settings, now) for item in listed(stored)]


async def every_schedule(
    file: Sequence[Schedule],
    admin: ScheduleAdmin | None,
    pauses: Mapping[str, Pause],
    settings: CronSettings,
    now: datetime,
    *,
    sync: bool,
) -> list[Listed]:
    """Every schedule, file and runtime, the store read now (as followed so far for
    ``sync=False``: a long-lived reader writes nothing to the log)."""
    stored = [] if admin is None else await admin.list(sync=sync)
    return schedule_rows(file, stored, pauses, settings, now)


async def one_schedule(
    name: str,
    file: Sequence[Schedule],
    admin: ScheduleAdmin | None,
    pauses: Mapping[str, Pause],
    settings: CronSettings,
    now: datetime,
    *,
    sync: bool,
) -> Listed:
    """Schedule ``name``, the file's or the store's (archived too), as ``every_schedule``
    shows it; ``ScheduleNotFound`` for neither."""
    chosen = [s for s in file if s.name == name]
    stored = await _stored(name, admin, sync)
    if chosen:
        return schedule_rows(chosen, stored, pauses, settings, now)[0]
    if not stored:
        raise ScheduleNotFound(f"no schedule {name!r}, neither in the schedules file nor runtime")
    # Also the store's copy of a schedule of a file this process does not read.
    return runtime_listed(stored[0], settings, now)


async def _stored(name: str, admin: ScheduleAdmin | None, sync: bool) -> list[StoredSchedule]:
    if admin is None:
        return []
    try:
        return [await admin.get(name, sync=sync)]
    except ScheduleNotFound:
        return []


def status_rows(rows: list[Listed], fold: StatusFold, now: datetime) -> list[StatusRow]:
    """The status row of each live schedule (archived ones are left out), with its source."""
    counts, blank = fold.counts(), ScheduleState()
    return [
        replace(
            status_row(
                item.schedule,
                fold.schedules.get(item.name, blank),
                counts.get(item.name, (0, 0)),
                item.paused,
                now,
            ),
            status=item.status,
            source=item.source,
        )
        for item in rows
        if item.live
    ]


def counts(rows: list[Listed]) -> tuple[int, int]:
    """How many live schedules there are, and how many of them are paused."""
    live = [item for item in rows if item.live]
    return len(live), sum(item.paused for item in live)
