"""The scheduler's own schedules file in the store: applied as ``warren schedules apply FILE
--prune`` applies one, by the leader, when it starts leading and after each reload.

So the file's schedules and the runtime ones meet in one place: ``get NAME`` shows a file
schedule's history of changes (by ``scheduler host:pid``, reason ``reload of FILE``), and a
runtime schedule cannot quietly shadow a file one. The file's schedules are recorded as
managed by ``CRON_SCHEDULES_FILE`` (one name for every scheduler of the namespace). They
still run from the file (the leader does not run the store's copy of them); a schedule
dropped from the file is archived in the store. Schedules created at runtime are untouched
unless the file names them (then the file adopts them, as ``apply`` does). A create, or a
change of a schedule's timing, is recorded at the moment the leader's process first saw it
in the file (or the term began): the store's ``since``, which the next leader reads.

Unlike the command, which refuses everything on one conflict, a daemon applies what it
can: each conflict (a schedule managed by another applied file, or changed in the store
since the last reload) is logged with what to do, and the other schedules are applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Iterator
from datetime import datetime

import structlog

from warren_cron.clock import utcnow
from warren_cron.errors import BROKER_TROUBLE, StoreError
from warren_cron.scheduler.leader import identity
from warren_cron.schedules.load import ScheduleSet
from warren_cron.schedules.schedule import Schedule
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store.apply import SCHEDULER_FILE, Options, Plan, Step, plan_apply
from warren_cron.store.book import StoreBook
from warren_cron.store.changes import Change, Entry, Kind, spec_json

log = structlog.get_logger("scheduler")
#: Changes of the file's apply in flight at once. Fewer than a bulk create's 200: the leader
#: folds each as it comes back, in the loop that publishes its fires, and 200 at a time made
#: its turns long enough to hold fires back by a tenth of a second while a file of 100,000
#: was first written; 32 write about as fast on two cores.
FILE_IN_FLIGHT = 32
#: The change each step of an apply writes (as ``ScheduleAdmin.apply_step`` does).
_KINDS: dict[str, Kind] = {
    "create": "create",
    "change": "update",
    "adopt": "update",
    "archive": "archive",
}


async def apply_file(book: StoreBook, file: ScheduleSet, first_seen: datetime) -> Plan:
    """Make the store hold ``file``'s schedules; conflicts logged, the rest written;
    ``first_seen``: when a schedule without a moment of its own was first seen."""
    await book.sync()
    entries = dict(book.state.entries)
    # A schedule whose store copy is the file's, as the file has it, needs no step: left out
    # of the plan (and of what it may prune), so a new leader of 100,000 decodes none.
    same = {s.name for s in file.schedules if _unchanged(s, entries.get(s.name))}
    for name in same:
        del entries[name]
    # Decoded as planned: a list of 1,000,000 specs made first held the loop for seconds.
    specs = (schedule.spec for schedule in file.schedules if schedule.name not in same)
    plan = await plan_apply(specs, entries, Options(SCHEDULER_FILE, frozenset(), True))
    for conflict in plan.conflicts:
        log.warning(
            "schedule of the file not applied to the store; it still runs from the file",
            conflict=conflict.replace("apply with --force", "archive it in the store"),
            file=file.source,
        )
    by, reason = f"scheduler {identity()}", f"reload of {file.source}"
    seen = {s.name: s.since or first_seen for s in file.schedules} if plan.changes() else {}

    def changes() -> Iterator[tuple[Change, ScheduleSpec | None]]:
        # Made as they are written: a file of 100,000 made at once held the loop for seconds.
        for step in plan.changes():
            data = None if step.spec is None else spec_json(step.spec)
            kind = _KINDS[step.action]
            change = Change(kind, step.name, step.previous, by, reason, data, SCHEDULER_FILE)
            if _timed(step, book.state.entries.get(step.name)):
                change = dataclasses.replace(change, at=seen[step.name])
            yield change, step.spec

    await write_all(book, changes(), file.source)
    if plan.changes():
        log.info(
            "schedules file applied to the store", file=file.source, changes=len(plan.changes())
        )
    return plan


async def write_all(
    book: StoreBook, changes: Iterator[tuple[Change, ScheduleSpec | None]], source: str
) -> None:
    """Write the changes as a bulk create does, ``FILE_IN_FLIGHT`` writers taking the next
    change in turn (the writes of one turn of the loop go out in one socket write), each spec
    folded in as checked. A change refused is logged and the others written; broker trouble
    raises once every writer stopped."""

    async def writer() -> None:
        for change, spec in changes:
            try:
                await book.append(change, spec)
            except StoreError as error:
                log.warning(
                    "schedule of the file not applied to the store; it still runs from the file",
                    schedule=change.name,
                    error=str(error),
                    file=source,
                )

    results = await asyncio.gather(
        *(writer() for _ in range(FILE_IN_FLIGHT)), return_exceptions=True
    )
    for result in results:
        if isinstance(result, BaseException):
            raise result


def _unchanged(schedule: Schedule, entry: Entry | None) -> bool:
    # The file's own copy in the store, untouched since its apply, with the same spec bytes.
    return (
        entry is not None
        and entry.manager == SCHEDULER_FILE
        and entry.status == "active"
        and entry.version == entry.applied
        and entry.spec_bytes == schedule.held
    )


def _timed(step: Step, entry: Entry | None) -> bool:
    # A create or a change of timing: the moment it is owed from, not the moment written.
    if step.spec is None:
        return False
    if step.action == "create" or entry is None:
        return True
    return entry.spec.timing_key() != step.spec.timing_key()


class FileSync:
    """Applies the newest file it was given, one apply at a time, in the background."""

    def __init__(self, book: StoreBook) -> None:
        self._book = book
        self._wanted: ScheduleSet | None = None
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: Set after each apply that ran to its end (tests and logs wait on it).
        self.applied = asyncio.Event()
        #: When the term began: the moment of a schedule first seen at it.
        self.first_seen = utcnow()
        #: Whether this term applies the file: with partitions, partition 0's leader does.
        self.enabled = True

    def follow(self, file: ScheduleSet) -> None:
        """Apply ``file`` soon (a newer one given meanwhile replaces it)."""
        self._wanted = file
        self._changed.set()
        if self._task is None and self.enabled:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def enable(self, on: bool) -> None:
        """Apply the file from now on (``on``), or leave it to another term."""
        if on == self.enabled:
            return
        self.enabled = on
        if not on and self._task is not None:
            self._task.cancel()  # a write under way is abandoned; the new applier redoes it
            self._task = None
        elif on and self._wanted is not None:
            self.follow(self._wanted)

    async def _run(self) -> None:
        while True:
            await self._changed.wait()
            self._changed.clear()
            assert self._wanted is not None
            try:
                await apply_file(self._book, self._wanted, self.first_seen)
            except StoreError as error:
                # The next reload, or the next leader, applies the file again.
                log.warning("schedules file not applied to the store", error=str(error))
                continue
            except BROKER_TROUBLE as error:
                log.warning("schedules file not applied: broker trouble", error=str(error))
                continue
            self.applied.set()

    async def close(self) -> None:
        """Stop applying (a write under way is abandoned; the log holds it or not)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
