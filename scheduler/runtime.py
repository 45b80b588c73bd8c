"""Runtime schedules on the leader: the store followed live, beside the file's schedules.

A new leader reads the newest snapshot and the log after it before its first fire, writes
a snapshot of its own just after its first fires (so the log's retention can drop
everything before it), and applies each change within moments of its write: a created
schedule fires, an updated one fires on its new timing from the next fire on, an archived
one stops. Neither fires a time from before its creation or the change of its timing (the
store keeps that moment, ``Entry.since``): a leader idle since before it owes it nothing
earlier. The store's copy of a file schedule gives the file's schedule its moment too, so a
new leader agrees with the last one. The file's schedules win: a runtime schedule with the
name of one of them is not run (the store refuses such a name; this covers a file changed
after the runtime schedule was made). The leader also applies the file to the store
(``file_sync.py``); the store's copies of the file's schedules are not run: the file runs
them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime

import structlog
from aio_pika.abc import AbstractConnection

from warren_cron.clock import utcnow
from warren_cron.errors import PlanError
from warren_cron.names import Names
from warren_cron.scheduler.file_sync import FileSync
from warren_cron.scheduler.settings import SchedulerSettings
from warren_cron.schedules.load import ScheduleSet
from warren_cron.schedules.schedule import Schedule, build_schedule
from warren_cron.schedules.timing import EPOCH
from warren_cron.store.apply import SCHEDULER_FILE
from warren_cron.store.book import StoreBook
from warren_cron.store.changes import Entry
from warren_cron.store.snapshot import paused_gc

log = structlog.get_logger("scheduler")
SHADOWED = "runtime schedule not run: the schedules file has its name"
#: A new leader writes its snapshot this long after it starts firing.
SNAPSHOT_DELAY = 2.0
#: Schedules built between two turns of the event loop when a term starts.
BUILD_CHUNK = 2_000


class RuntimeSchedules:
    """The store's active schedules as ``Schedule`` objects, kept current while leading and
    kept between terms: the next term reads only the changes made meanwhile."""

    def __init__(self, settings: SchedulerSettings, names: Names, wake: asyncio.Event) -> None:
        self._settings = settings
        self._wake = wake
        self.book = StoreBook(names, settings.queue_type, self._changed)
        self._built: dict[str, Schedule] = {}
        self._started = False
        #: Every schedule of the book was built (a term may end half-way through).
        self._built_all = False
        self._file: ScheduleSet | None = None
        self._combined: ScheduleSet | None = None
        self.file_sync = FileSync(self.book)
        #: Runtime schedules changed since ``take_changes`` was last called, in order.
        self._changes: dict[str, None] = {}
        #: The names the file's schedules take (``_combined``'s file).
        self._taken: frozenset[str] = frozenset()
        self._writing: asyncio.Future[None] | None = None
        #: Every fire up to it was handled when the term began: a later ``since`` matters.
        self._floor = EPOCH
        #: File schedules given a moment, by name: (as loaded, moment, as owed). Remade only
        #: when either changes: 100,000 of them take half a second to remake.
        self._owed_made: dict[str, tuple[Schedule, datetime, Schedule]] = {}

    async def start(
        self, connection: AbstractConnection, floor: datetime, now: datetime, lost: asyncio.Event
    ) -> None:
        """Read snapshot and log to their end (or, after an earlier term, the log since it),
        build every schedule read anew, write a snapshot; ``floor``: the term's first
        watermark, ``now``: when it began, ``lost``: set if the log's consumer stops."""
        self._floor = floor
        self.file_sync = FileSync(self.book)
        self.file_sync.first_seen = now
        self._file = self._combined = None
        self._changes.clear()
        self.book.on_lost = lost.set
        held = self.book.state.offset
        read_anew = await self.book.start(connection)
        if read_anew or not self._built_all:
            await self._build_anew()
        state = self.book.state
        if state.offset > state.snapshot_offset:
            self._writing = asyncio.ensure_future(self._snapshot_soon())
            self._writing.add_done_callback(_written)
        if read_anew:
            log.info("runtime schedules read", count=len(self._built), log_offset=state.offset)
        else:
            log.info("runtime schedules caught up", log_offset=state.offset, since=held)

    async def _build_anew(self) -> None:
        self._built_all = False  # a term that ends half-way through builds them again
        self._built.clear()
        await self._build_all()
        self._built_all = True

    async def _build_all(self) -> None:
        """Build every active schedule, ``BUILD_CHUNK`` between two turns of the event loop:
        1,000,000 built at once held it for about 20 s, and a new leader lost its lease. A
        change folded meanwhile is built as it comes (started first)."""
        self._started = True
        # The status, not the spec: no spec is decoded for the question.
        active = [name for name, e in self.book.state.entries.items() if e.status == "active"]
        for start in range(0, len(active), BUILD_CHUNK):
            with paused_gc():  # 100,000 schedules build in half the time
                for name in active[start : start + BUILD_CHUNK]:
                    self._build(name)
            await asyncio.sleep(0)

    async def _snapshot_soon(self) -> None:
        # After the first fires, not before them: making the snapshot of 100,000 schedules
        # holds the event loop for half a second or more.
        await asyncio.sleep(SNAPSHOT_DELAY)
        await self.book.write_snapshot()

    def combined(self, file: ScheduleSet) -> ScheduleSet:
        """The file's schedules and, after them, the runtime ones; the same object until
        the file changes (a runtime change is taken from ``take_changes``)."""
        if self._file is not file:
            self.file_sync.follow(file)  # a reload, or the first call while leading
        if self._combined is None or self._file is not file:
            self._file, self._combined = file, self._combine(file)
            self._taken = frozenset(s.name for s in file.schedules)
            self._changes.clear()  # the new set has them
        return self._combined

    def running(self) -> Iterator[Schedule]:
        """Every schedule as it runs now: the file's, as ``combined`` made them, and each
        runtime one as last changed (``combined``'s set may be older than the last change)."""
        assert self._file is not None and self._combined is not None
        yield from self._combined.schedules[: len(self._file.schedules)]
        for name, schedule in self._built.items():
            if name not in self._taken:
                yield schedule

    def take_changes(self) -> list[tuple[str, Schedule | None]]:
        """Each runtime schedule changed since the last call (or ``combined``'s new set),
        as it runs now (None: it no longer runs); a name the file takes is left out."""
        changed = [(name, self._built.get(name)) for name in self._changes]
        self._changes.clear()
        for name, schedule in changed:
            if name in self._taken and schedule is not None:
                log.warning(
                    "runtime schedule not run: the schedules file has its name", schedule=name
                )
        return [(name, schedule) for name, schedule in changed if name not in self._taken]

    def _combine(self, file: ScheduleSet) -> ScheduleSet:
        entries = self.book.state.entries
        owed = tuple(self._owed(s, entries.get(s.name)) for s in file.schedules)
        if not self._built:
            return ScheduleSet(file.source, owed)
        taken = {s.name for s in file.schedules}
        for name in sorted(taken & self._built.keys()):
            log.warning(SHADOWED, schedule=name)
        extra = tuple(s for name, s in self._built.items() if name not in taken)
        return ScheduleSet(f"{file.source} + runtime", owed + extra)

    def _owed(self, schedule: Schedule, copy: Entry | None) -> Schedule:
        # A file schedule's moment: its store copy's when the copy fires alike (the last
        # leader's), else when this process saw it added or changed (``first_seen``).
        since = schedule.since
        if _copy_of(copy, schedule):
            assert copy is not None
            since = copy.since
        counted = schedule.spec.runs is not None and schedule.start_at is None
        if since is None and counted:
            since = self.file_sync.first_seen  # the apply records this moment in the store
        if since is None or (since <= self._floor and not counted):
            return schedule  # nothing before the floor is fired anyway
        made = self._owed_made.get(schedule.name)
        if made is None or made[0] is not schedule or made[1] != since:
            made = self._owed_made[schedule.name] = (schedule, since, schedule.owed_from(since))
        return made[2]

    def _changed(self, name: str) -> None:
        if not self._started:
            return  # start() builds them all at once
        self._build(name)
        self._changes[name] = None
        self._wake.set()
        entry = self.book.state.entries[name]
        last = entry.last_change
        log.info(
            "runtime schedule changed",
            schedule=name,
            change=last.get("kind"),
            version=entry.version,
            by=last.get("by"),
            lag_ms=_since(last.get("at")),
        )

    def _build(self, name: str) -> None:
        entry = self.book.state.entries.get(name)
        self._built.pop(name, None)
        if entry is None or entry.status != "active" or entry.manager == SCHEDULER_FILE:
            return
        try:
            self._built[name] = build_schedule(
                entry.spec, self._settings, since=entry.since, packed=entry.spec_bytes
            )
        except PlanError as error:
            log.warning("runtime schedule not run: its retry plan", schedule=name, error=str(error))

    async def close(self) -> None:
        """Stop applying the file and following the store."""
        await self.file_sync.close()
        if self._writing is not None:
            self._writing.cancel()
            await asyncio.gather(self._writing, return_exceptions=True)
        await self.book.close()


def _copy_of(copy: Entry | None, schedule: Schedule) -> bool:
    # Whether the store's copy tells when ``schedule`` was made: a copy of an older timing
    # (the reload that changed it not applied yet) does not.
    if copy is None or copy.manager != SCHEDULER_FILE or copy.status != "active":
        return False
    if schedule.since is None or copy.spec_bytes == schedule.held:
        return True  # the same spec: the same timing, without decoding either
    return copy.spec.timing_key() == schedule.spec.timing_key()


def _written(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        # The log keeps every change; the next leader or writer takes the snapshot.
        log.warning("schedules snapshot not written", error=str(task.exception()))


def _since(at: object) -> float | None:
    # From the writer's clock to this one: how long a change took to reach the leader.
    try:
        return round((utcnow() - datetime.fromisoformat(str(at))).total_seconds() * 1000, 1)
    except ValueError:
        return None
