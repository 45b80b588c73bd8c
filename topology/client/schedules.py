"""Runtime schedules from an application: the schedule methods of ``Client`` and
``SyncClient``.

::

    async with Client() as client:
        made = await client.create_schedule(
            {"name": "report-42", "cron": "30 2 * * *", "task": "http",
             "payload": {"url": "https://reports.internal/42"}},
            by="signup-service", reason="customer 42 signed up",
        )
        await client.update_schedule("report-42", {"cron": "0 3 * * *"}, version=made.version)
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from aio_pika.abc import AbstractRobustConnection

from warren_cron.errors import StoreError, broker_failures
from warren_cron.history.events import who
from warren_cron.ops import schedule_writes as writes
from warren_cron.runtime.settings import CronSettings
from warren_cron.store.admin import ScheduleAdmin
from warren_cron.store.edits import SpecLike
from warren_cron.store.stored import StoredSchedule

if TYPE_CHECKING:
    from warren_cron.client.client import Client

T = TypeVar("T")


class ScheduleMethods:
    """The schedule methods of ``Client``: each returns once the broker holds the change."""

    settings: CronSettings
    _connection: AbstractRobustConnection | None
    _admin: ScheduleAdmin | None = None
    _admin_lock: asyncio.Lock | None = None

    if TYPE_CHECKING:

        async def connect(self) -> None:
            """Connect (``Client.connect``)."""

    async def _schedules(self) -> ScheduleAdmin:
        self._admin_lock = self._admin_lock or asyncio.Lock()
        async with self._admin_lock:
            await self.connect()
            connection = self._connection
            assert connection is not None
            if self._admin is None or self._admin_on is not connection:
                admin = ScheduleAdmin(self.settings)
                await admin.start(connection)
                self._admin, self._admin_on = admin, connection
            return self._admin

    _admin_on: AbstractRobustConnection | None = None

    async def create_schedule(
        self, spec: SpecLike, *, by: str | None = None, reason: str | None = None
    ) -> StoredSchedule:
        """Create a runtime schedule from a ``ScheduleSpec`` or its fields as a dict (as in a
        ``[[schedule]]`` table); the leading scheduler fires it within moments.

        Raises ``InvalidSchedule`` naming each bad field, ``NameTaken`` when the name is in
        use (by the schedules file, or a live runtime schedule)."""
        with broker_failures("create_schedule"):
            admin = await self._schedules()
            return await writes.create_schedule(admin, spec, by or who(), reason)

    async def create_schedules(
        self, specs: Iterable[SpecLike], *, by: str | None = None, reason: str | None = None
    ) -> list[StoredSchedule | StoreError]:
        """Create many runtime schedules at once, many changes in flight together (thousands
        a second, where one ``create_schedule`` after another waits out each round trip).

        Every spec is checked before anything is written: ``InvalidSchedule`` for the first
        bad one (or a name given twice), ``NameTaken`` for a name of the schedules file. Each
        returned item is the created schedule, or the ``NameTaken`` that refused it (a live
        runtime schedule has the name), in the order given. The broker failing under them
        raises ``CreatesCut``, whose ``results`` has each outcome: created, refused, or
        ``Unconfirmed`` (get it to know)."""
        with broker_failures("create_schedules"):
            admin = await self._schedules()
            return await writes.create_schedules(admin, specs, by or who(), reason)

    async def update_schedule(
        self,
        name: str,
        changes: Mapping[str, Any],
        *,
        version: int,
        by: str | None = None,
        reason: str | None = None,
    ) -> StoredSchedule:
        """Change fields of ``name`` (None: back to the default), based on ``version`` as
        read; ``VersionConflict`` when another change came first."""
        with broker_failures("update_schedule"):
            admin = await self._schedules()
            return await writes.update_schedule(admin, name, changes, version, by or who(), reason)

    async def archive_schedule(
        self,
        name: str,
        *,
        version: int | None = None,
        by: str | None = None,
        reason: str | None = None,
    ) -> StoredSchedule:
        """Stop ``name`` for good, keeping its history (given ``version``: only if current)."""
        with broker_failures("archive_schedule"):
            admin = await self._schedules()
            return await writes.archive_schedule(admin, name, version, by or who(), reason)

    async def get_schedule(self, name: str) -> StoredSchedule:
        """``name``'s spec, version, status and history; ``ScheduleNotFound`` if none."""
        with broker_failures("get_schedule"):
            return await (await self._schedules()).get(name)

    async def list_schedules(self) -> list[StoredSchedule]:
        """Every runtime schedule (archived ones too), by name."""
        with broker_failures("list_schedules"):
            return await (await self._schedules()).list()


class SyncScheduleMethods:
    """The schedule methods of ``SyncClient``: those of ``Client``, waited for."""

    if TYPE_CHECKING:
        _client: Client

        def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
            """Run on the client's loop (``SyncClient._call``)."""

    def create_schedule(
        self, spec: SpecLike, *, by: str | None = None, reason: str | None = None
    ) -> StoredSchedule:
        """``Client.create_schedule``, waited for."""
        return self._call(self._client.create_schedule(spec, by=by, reason=reason))

    def create_schedules(
        self, specs: Iterable[SpecLike], *, by: str | None = None, reason: str | None = None
    ) -> list[StoredSchedule | StoreError]:
        """``Client.create_schedules``, waited for."""
        return self._call(self._client.create_schedules(specs, by=by, reason=reason))

    def update_schedule(
        self,
        name: str,
        changes: Mapping[str, Any],
        *,
        version: int,
        by: str | None = None,
        reason: str | None = None,
    ) -> StoredSchedule:
        """``Client.update_schedule``, waited for."""
        update = self._client.update_schedule(name, changes, version=version, by=by, reason=reason)
        return self._call(update)

    def archive_schedule(
        self,
        name: str,
        *,
        version: int | None = None,
        by: str | None = None,
        reason: str | None = None,
    ) -> StoredSchedule:
        """``Client.archive_schedule``, waited for."""
        archive = self._client.archive_schedule(name, version=version, by=by, reason=reason)
        return self._call(archive)

    def get_schedule(self, name: str) -> StoredSchedule:
        """``Client.get_schedule``, waited for."""
        return self._call(self._client.get_schedule(name))

    def list_schedules(self) -> list[StoredSchedule]:
        """``Client.list_schedules``, waited for."""
        return self._call(self._client.list_schedules())
