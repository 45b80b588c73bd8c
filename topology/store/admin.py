"""Create, update, archive, get and list runtime schedules: what the client and
``warren schedules`` both do.

Each write is checked whole before it is sent (``topology/store/edits.py``), then appended
to the log and read back (``topology/store/book.py``): it returns once it applied, or raises
why not. A runtime schedule may not take the name of a schedule of CRON_SCHEDULES_FILE: the
file's schedules are changed in the file.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from aio_pika.abc import AbstractConnection

from warren_cron.broker.connect import publish_channel
from warren_cron.broker.drops import through_drops
from warren_cron.cancel.request import archive_tombstone
from warren_cron.cancel.stream import declare_cancels
from warren_cron.clock import utcnow
from warren_cron.errors import (
    InvalidSchedule,
    NameTaken,
    PlanError,
    ScheduleNotFound,
    StoreError,
)
from warren_cron.history.events import Event
from warren_cron.history.follow import StreamFollower
from warren_cron.history.stream import declare_control, open_stream
from warren_cron.names import Names
from warren_cron.runtime.settings import CronSettings
from warren_cron.schedules.control import Pause, fold_pauses
from warren_cron.schedules.load import Resolve, configured_schedules, resolver
from warren_cron.schedules.schedule import build_schedule
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store.apply import SCHEDULER_FILE, Step
from warren_cron.store.book import StoreBook
from warren_cron.store.bulk import create_all, no_repeats
from warren_cron.store.changes import Change, Entry, Kind, spec_json
from warren_cron.store.edits import SpecLike, checked_spec, checked_text, updated_spec
from warren_cron.store.masking import kept_secrets, refuse_masks
from warren_cron.store.stored import Status, StoredSchedule

#: The change each step of an apply writes.
_KINDS: dict[str, Kind] = {
    "create": "create",
    "change": "update",
    "adopt": "update",
    "archive": "archive",
}
#: The pauses the control stream held at start not read by then: the broker is in trouble.
CATCH_UP_SECONDS = 30.0


class ScheduleAdmin:
    """The runtime schedules of one namespace, read and changed through a live book."""

    def __init__(self, settings: CronSettings) -> None:
        self.settings = settings
        self.names = Names(settings.namespace)
        self.book = StoreBook(self.names, settings.queue_type)
        self._pauses: dict[str, Pause] = {}
        #: Set whenever pauses are folded in: a caller waits on it to read its own pause.
        self.pauses_changed = asyncio.Event()
        self._control = StreamFollower(self.names.control_stream, self._on_control)
        file = configured_schedules(settings)
        self._file_names = {s.name for s in file.schedules} if file else set[str]()
        self._file = str(settings.schedules_file)
        self._connection: AbstractConnection | None = None

    async def start(self, connection: AbstractConnection) -> None:
        """Read the store and follow it, and the pauses, on ``connection``."""
        self._connection = connection
        await declare_control(connection, self.names)
        # The other readers' opening on the same connection may drop it under either one.
        # Safe to start again: the only write of a start is the book's sync marker, which
        # changes nothing.
        await through_drops(connection, self._follow, self._restart)
        if self._control.end_at_start is None:
            channel = await publish_channel(connection)
            await open_stream(channel, self.names.control_stream)
            await channel.close()

    async def _follow(self) -> None:
        assert self._connection is not None
        # An empty stream takes a second to tell from a slow one: both are looked at at once,
        # and a failure of one stops the other (a retry starts both anew).
        try:
            async with asyncio.TaskGroup() as both:
                both.create_task(self.book.start(self._connection))
                both.create_task(self._control.start(self._connection))
        except BaseExceptionGroup as failed:
            raise failed.exceptions[0] from None

    async def _restart(self) -> None:
        """Forget a start that failed half-way: the next reads everything again."""
        await self.close()
        self.book = StoreBook(self.names, self.settings.queue_type)
        self._control = StreamFollower(self.names.control_stream, self._on_control)
        self._pauses = {}

    def _on_control(self, events: list[Event], _offset: int) -> None:
        self._pauses = fold_pauses(events, self._pauses)
        self.pauses_changed.set()

    @property
    def pauses(self) -> Mapping[str, Pause]:
        """The pauses as the control stream was followed so far."""
        return self._pauses

    async def _caught_up(self) -> None:
        """Wait until the pauses the control stream held at start are folded in."""
        for _ in range(int(CATCH_UP_SECONDS / 0.05)):
            if self._control.caught_up:
                return
            await asyncio.sleep(0.05)
        raise StoreError(f"the control stream was not read within {CATCH_UP_SECONDS:g} s")

    async def create(self, raw: SpecLike, by: str, reason: str | None = None) -> StoredSchedule:
        """Create a schedule (or again one that was archived); ``NameTaken`` if it is live."""
        spec = self._new(raw)
        previous = self.book.state.version(spec.name)
        return await self._write("create", spec.name, previous, by, reason, spec)

    async def create_many(
        self, raws: Iterable[SpecLike], by: str, reason: str | None = None
    ) -> list[StoredSchedule | StoreError]:
        """Create many schedules, ``bulk.IN_FLIGHT`` changes at a time; each outcome in order.

        Every spec is checked first: one invalid (or a name given twice) raises
        ``InvalidSchedule`` and nothing is written. A create the store refuses (a live
        schedule has the name) is that schedule's outcome; the others still apply. The
        broker failing under them raises ``CreatesCut`` with every outcome."""
        resolve = resolver(self.settings)
        specs = [self._new(raw, resolve) for raw in raws]
        no_repeats(specs)

        async def create(spec: ScheduleSpec) -> StoredSchedule:
            previous = self.book.state.version(spec.name)  # read once its turn came
            return await self._write("create", spec.name, previous, by, reason, spec)

        return await create_all(specs, create)

    def _new(self, raw: SpecLike, resolve: Resolve | None = None) -> ScheduleSpec:
        spec = self._resolved(checked_spec(raw), resolve)
        refuse_masks(spec.name, spec.payload)
        if spec.name in self._file_names:
            raise NameTaken(
                f"schedule {spec.name!r} is defined in {self._file}: change it there, or "
                "give the runtime schedule another name"
            )
        return spec

    async def update(
        self, name: str, changes: Mapping[str, Any], version: int, by: str, reason: str | None
    ) -> StoredSchedule:
        """Change fields of schedule ``name``, whose version the caller read is ``version``."""
        stored = self._editable(name).spec
        spec = self._resolved(updated_spec(stored, kept_secrets(stored, changes)))
        return await self._write("update", name, version, by, reason, spec)

    async def archive(
        self, name: str, version: int | None, by: str, reason: str | None
    ) -> StoredSchedule:
        """Stop schedule ``name`` for good (its history stays); ``version`` None: any."""
        entry = self._editable(name)
        return await self._write("archive", name, version or entry.version, by, reason, None)

    async def get(self, name: str, *, sync: bool = True) -> StoredSchedule:
        """Schedule ``name`` as it stands now; ``ScheduleNotFound`` if it never existed.
        ``sync=False``: as the log followed so far (a long-lived reader, such as the
        monitor's API, reads without appending a marker to the log on every read)."""
        await asyncio.gather(self._synced(sync), self._caught_up())
        entry = self.book.state.entries.get(name)
        if entry is None:
            raise ScheduleNotFound(self._unknown(name))
        return self._stored(name, entry, self._pauses)

    async def live_spec(self, name: str) -> ScheduleSpec:
        """The spec of live schedule ``name``, read now; ``ScheduleNotFound`` if archived."""
        await self.book.sync()
        return self._live(name).spec

    async def list(self, *, sync: bool = True) -> list[StoredSchedule]:
        """Every runtime schedule, archived ones too, by name (``sync`` as for ``get``)."""
        await asyncio.gather(self._synced(sync), self._caught_up())
        entries = self.book.state.entries
        return [self._stored(name, entries[name], self._pauses) for name in sorted(entries)]

    async def _synced(self, sync: bool) -> None:
        if sync:
            await self.book.sync()

    async def entries(self) -> dict[str, Entry]:
        """Every runtime schedule's entry (archived ones too), read to the log's end."""
        await self.book.sync()
        return dict(self.book.state.entries)

    async def apply_step(
        self, step: Step, manager: str, by: str, reason: str | None
    ) -> StoredSchedule:
        """Write one step of a file's apply, recording ``manager`` as the schedule's."""
        return await self._write(
            _KINDS[step.action], step.name, step.previous, by, reason, step.spec, manager
        )

    async def close(self) -> None:
        """Stop following the store and the pauses."""
        await self._control.stop()
        await self.book.close()

    async def _write(
        self,
        kind: Kind,
        name: str,
        previous: int,
        by: str,
        reason: str | None,
        spec: ScheduleSpec | None,
        manager: str | None = None,
    ) -> StoredSchedule:
        who = checked_text(by, "by", required=True)
        assert who is not None
        why = checked_text(reason, "reason")
        data = None if spec is None else spec_json(spec)
        await self.book.append(Change(kind, name, previous, who, why, data, manager), spec)
        if kind == "archive":
            await self._cancel_fires(name, who, why)
        return self._stored(name, self.book.state.entries[name], self._pauses)

    async def _cancel_fires(self, name: str, by: str, reason: str | None) -> None:
        """Archived: the fires already published and not started are cancelled, not run."""
        assert self._connection is not None, "start() first"
        await declare_cancels(self._connection, self.names)
        channel = await publish_channel(self._connection)
        try:
            await archive_tombstone(channel, self.names, name, by, reason)
        finally:
            await channel.close()

    def _resolved(self, spec: ScheduleSpec, resolve: Resolve | None = None) -> ScheduleSpec:
        try:
            (resolve or resolver(self.settings))(spec)
        except ValueError as error:
            raise InvalidSchedule(spec.name, [str(error)]) from None
        return spec

    def _live(self, name: str) -> Entry:
        entry = self.book.state.entries.get(name)
        if entry is None or entry.status == "archived":
            raise ScheduleNotFound(self._unknown(name))
        return entry

    def _editable(self, name: str) -> Entry:
        """The live entry of ``name`` when a change may be made to it here."""
        entry = self._live(name)
        if entry.manager == SCHEDULER_FILE:
            raise NameTaken(
                f"schedule {name!r} is defined in the scheduler's CRON_SCHEDULES_FILE: change "
                "it there (the scheduler applies the file on each reload)"
            )
        return entry

    def _completed(self, spec: ScheduleSpec, since: datetime | None) -> bool:
        if spec.stop_at is None and spec.runs is None:
            return False  # the common case, without building the schedule
        try:
            return build_schedule(spec, self.settings, since=since).completed(utcnow())
        except PlanError:
            return False

    def _unknown(self, name: str) -> str:
        if name in self._file_names:
            return f"schedule {name!r} is defined in {self._file}: change it there"
        return f"no runtime schedule {name!r}: list_schedules() shows the others"

    def _stored(self, name: str, entry: Entry, pauses: dict[str, Pause]) -> StoredSchedule:
        pause = pauses.get(name)
        status: Status = entry.status
        if status == "active" and self._completed(entry.spec, entry.since):
            status = "completed"
        elif status == "active" and pause is not None:
            status = "paused"
        fields = (entry.spec, entry.version, status, entry.history, pause, entry.manager)
        return StoredSchedule(name, *fields, entry.since)
