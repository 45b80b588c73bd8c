"""Create, update, archive, get and list runtime schedules: what the client and
``warren schedules`` both do.

Each write is checked whole before it is sent (``topology/store/edits.py``), then appended
to the log and read back (``topology/store/book.py``): it returns once it applied, or raises
why not. A runtime schedule may not take the name of a schedule of CRON_SCHEDULES_FILE: the
file's schedules are changed in the file.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from aio_pika.abc import AbstractConnection

from warren_cron.broker.connect import publish_channel
from warren_cron.clock import utc_text, utcnow
from warren_cron.errors import InvalidSchedule, NameTaken, PlanError, ScheduleNotFound, StoreError
from warren_cron.history.events import Event
from warren_cron.history.follow import StreamFollower
from warren_cron.history.stream import declare_control, open_stream
from warren_cron.names import Names
from warren_cron.runtime.settings import CronSettings
from warren_cron.schedules.control import Pause, fold_pauses
from warren_cron.schedules.load import configured_schedules, resolve_one
from warren_cron.schedules.schedule import build_schedule
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store.apply import Step
from warren_cron.store.book import StoreBook
from warren_cron.store.changes import Change, Entry, Kind, spec_json
from warren_cron.store.edits import SpecLike, checked_spec, checked_text, updated_spec

Status = Literal["active", "paused", "completed", "archived"]
#: The change each step of an apply writes.
_KINDS: dict[str, Kind] = {
    "create": "create",
    "change": "update",
    "adopt": "update",
    "archive": "archive",
}
#: The pauses the control stream held at start not read by then: the broker is in trouble.
CATCH_UP_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class StoredSchedule:
    """A runtime schedule: its spec, version, status and the history of its changes."""

    name: str
    spec: ScheduleSpec
    version: int
    status: Status
    #: One dict per change, oldest first: kind, version, previous, by, at, reason.
    history: list[dict[str, Any]]
    pause: Pause | None = None

    def to_json(self) -> dict[str, Any]:
        """The schedule as ``get --json`` prints it."""
        return {
            "name": self.name,
            "source": "runtime",
            "status": self.status,
            "version": self.version,
            "spec": spec_json(self.spec),
            **pause_fields(self.pause),
            "history": self.history,
        }


def pause_fields(pause: Pause | None) -> dict[str, Any]:
    """A schedule's pause as JSON fields (all None when it is not paused)."""
    return {
        "paused": pause is not None,
        "paused_since": utc_text(pause.since) if pause else None,
        "paused_by": pause.by if pause else None,
        "reason": pause.reason if pause else None,
    }


class ScheduleAdmin:
    """The runtime schedules of one namespace, read and changed through a live book."""

    def __init__(self, settings: CronSettings) -> None:
        self.settings = settings
        self.names = Names(settings.namespace)
        self.book = StoreBook(self.names, settings.queue_type)
        self._pauses: dict[str, Pause] = {}
        self._control = StreamFollower(self.names.control_stream, self._on_control)
        file = configured_schedules(settings)
        self._file_names = {s.name for s in file.schedules} if file else set[str]()
        self._file = str(settings.schedules_file)

    async def start(self, connection: AbstractConnection) -> None:
        """Read the store and follow it, and the pauses, on ``connection``."""
        await declare_control(connection, self.names)
        # An empty stream takes a second to tell from a slow one: both are looked at at once.
        await asyncio.gather(self.book.start(connection), self._control.start(connection))
        if self._control.end_at_start is None:
            channel = await publish_channel(connection)
            await open_stream(channel, self.names.control_stream)
            await channel.close()

    def _on_control(self, events: list[Event], _offset: int) -> None:
        self._pauses = fold_pauses(events, self._pauses)

    async def _caught_up(self) -> None:
        """Wait until the pauses the control stream held at start are folded in."""
        for _ in range(int(CATCH_UP_SECONDS / 0.05)):
            if self._control.caught_up:
                return
            await asyncio.sleep(0.05)
        raise StoreError(f"the control stream was not read within {CATCH_UP_SECONDS:g} s")

    async def create(self, raw: SpecLike, by: str, reason: str | None = None) -> StoredSchedule:
        """Create a schedule (or again one that was archived); ``NameTaken`` if it is live."""
        spec = self._resolved(checked_spec(raw))
        if spec.name in self._file_names:
            raise NameTaken(
                f"schedule {spec.name!r} is defined in {self._file}: change it there, or "
                "give the runtime schedule another name"
            )
        previous = self.book.state.version(spec.name)
        return await self._write("create", spec.name, previous, by, reason, spec)

    async def update(
        self, name: str, changes: Mapping[str, Any], version: int, by: str, reason: str | None
    ) -> StoredSchedule:
        """Change fields of schedule ``name``, whose version the caller read is ``version``."""
        spec = self._resolved(updated_spec(self._live(name).spec, changes))
        return await self._write("update", name, version, by, reason, spec)

    async def archive(
        self, name: str, version: int | None, by: str, reason: str | None
    ) -> StoredSchedule:
        """Stop schedule ``name`` for good (its history stays); ``version`` None: any."""
        entry = self._live(name)
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
        await self.book.append(Change(kind, name, previous, who, why, data, manager))
        return self._stored(name, self.book.state.entries[name], self._pauses)

    def _resolved(self, spec: ScheduleSpec) -> ScheduleSpec:
        try:
            resolve_one(spec, self.settings)
        except ValueError as error:
            raise InvalidSchedule(spec.name, [str(error)]) from None
        return spec

    def _live(self, name: str) -> Entry:
        entry = self.book.state.entries.get(name)
        if entry is None or entry.status == "archived":
            raise ScheduleNotFound(self._unknown(name))
        return entry

    def _completed(self, spec: ScheduleSpec) -> bool:
        if spec.stop_at is None and spec.runs is None:
            return False  # the common case, without building the schedule
        try:
            return build_schedule(spec, self.settings).completed(utcnow())
        except PlanError:
            return False

    def _unknown(self, name: str) -> str:
        if name in self._file_names:
            return f"schedule {name!r} is defined in {self._file}: change it there"
        return f"no runtime schedule {name!r}: list_schedules() shows the others"

    def _stored(self, name: str, entry: Entry, pauses: dict[str, Pause]) -> StoredSchedule:
        pause = pauses.get(name)
        status: Status = entry.status
        if status == "active" and self._completed(entry.spec):
            status = "completed"
        elif status == "active" and pause is not None:
            status = "paused"
        return StoredSchedule(name, entry.spec, entry.version, status, entry.history, pause)
