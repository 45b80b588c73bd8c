"""Runtime schedules on the leader: the store followed live, beside the file's schedules.

A new leader reads the newest snapshot and the log after it before its first fire, then
writes a snapshot of its own (so the log's retention can drop everything before it), and
applies each change within moments of its write: a created schedule fires, an updated one
fires on its new timing from the next fire on, an archived one stops. The file's schedules
win: a runtime schedule with the name of one of them is not run (the store refuses such a
name; this covers a file changed after the runtime schedule was made).
"""

from __future__ import annotations

import asyncio

import structlog
from aio_pika.abc import AbstractConnection

from warren_cron.errors import PlanError
from warren_cron.names import Names
from warren_cron.scheduler.settings import SchedulerSettings
from warren_cron.schedules.load import ScheduleSet
from warren_cron.schedules.schedule import Schedule, build_schedule
from warren_cron.store.book import StoreBook

log = structlog.get_logger("scheduler")


class RuntimeSchedules:
    """The store's active schedules as ``Schedule`` objects, kept current while leading."""

    def __init__(
        self, settings: SchedulerSettings, names: Names, wake: asyncio.Event, lost: asyncio.Event
    ) -> None:
        self._settings = settings
        self._wake = wake
        self.book = StoreBook(names, settings.queue_type, self._changed, lost.set)
        self._built: dict[str, Schedule] = {}
        self._started = False
        self._file: ScheduleSet | None = None
        self._combined: ScheduleSet | None = None

    async def start(self, connection: AbstractConnection) -> None:
        """Read snapshot and log to their end, build every schedule, write a snapshot."""
        await self.book.start(connection)
        for name in self.book.state.active():
            self._build(name)
        self._started = True
        state = self.book.state
        if state.offset > state.snapshot_offset:
            await self.book.write_snapshot()
        log.info("runtime schedules read", count=len(self._built), log_offset=state.offset)

    def combined(self, file: ScheduleSet) -> ScheduleSet:
        """The file's schedules and, after them, the runtime ones; the same object until
        the file or the store changes."""
        if self._combined is None or self._file is not file:
            self._file, self._combined = file, self._combine(file)
        return self._combined

    def _combine(self, file: ScheduleSet) -> ScheduleSet:
        if not self._built:
            return file
        taken = {s.name for s in file.schedules}
        for name in sorted(taken & self._built.keys()):
            log.warning("runtime schedule not run: the schedules file has its name", schedule=name)
        extra = tuple(s for name, s in self._built.items() if name not in taken)
        return ScheduleSet(f"{file.source} + runtime", file.schedules + extra)

    def _changed(self, name: str) -> None:
        if not self._started:
            return  # start() builds them all at once
        self._build(name)
        self._combined = None
        self._wake.set()
        entry = self.book.state.entries[name]
        last = entry.history[-1] if entry.history else {}
        log.info(
            "runtime schedule changed",
            schedule=name,
            change=last.get("kind"),
            version=entry.version,
            by=last.get("by"),
        )

    def _build(self, name: str) -> None:
        entry = self.book.state.entries.get(name)
        self._built.pop(name, None)
        if entry is None or entry.status != "active":
            return
        try:
            self._built[name] = build_schedule(entry.spec, self._settings)
        except PlanError as error:
            log.warning("runtime schedule not run: its retry plan", schedule=name, error=str(error))

    async def close(self) -> None:
        """Stop following the store."""
        await self.book.close()
