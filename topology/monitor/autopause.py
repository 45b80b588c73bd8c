"""``pause_on_failure``: the monitor pauses a schedule whose run failed for good.

The monitor already reads a copy of every failed task (``<ns>_monitor``); a record of a
schedule that sets ``pause_on_failure`` (in the schedules file, or a runtime schedule of the
store, followed live) pauses it through the control stream, exactly as ``warren schedules
pause`` does, with the run and the failure's reason as the pause's reason. The failure's
error text is not copied into the reason: it may hold a secret.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import structlog
from aio_pika.abc import AbstractConnection

from warren_cron.history.publisher import HistoryPublisher
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.names import Names
from warren_cron.ops.schedule_actions import pause_schedule
from warren_cron.records import FailedRecord
from warren_cron.schedules.schedule import Schedule
from warren_cron.store.book import StoreBook

log = structlog.get_logger("monitor")
#: Who the pause is attributed to, in history and ``warren schedules list``.
BY = "monitor (pause_on_failure)"


class FailurePauser:
    """Pauses the schedules that ask for it when one of their runs fails for good."""

    def __init__(self, settings: MonitorSettings, schedules: Sequence[Schedule]) -> None:
        self.names = Names(settings.namespace)
        self._file = {s.name: s.spec.pause_on_failure for s in schedules}
        self._book = StoreBook(self.names, settings.queue_type)
        self._history = HistoryPublisher(self.names, settings, "monitor")
        self._connection: AbstractConnection | None = None
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, connection: AbstractConnection) -> None:
        """Follow the runtime schedules and be ready to pause on ``connection``."""
        await self._book.start(connection)
        await self._history.start(connection)
        self._connection = connection

    def wants(self, name: str) -> bool:
        """True when schedule ``name`` sets ``pause_on_failure`` (the file's name wins)."""
        if name in self._file:
            return self._file[name]
        entry = self._book.state.entries.get(name)
        return entry is not None and entry.status == "active" and entry.spec.pause_on_failure

    def failed(self, record: FailedRecord) -> None:
        """Pause the record's schedule, in the background, if it asks for it."""
        if record.schedule is None or not self.wants(record.schedule):
            return
        task = asyncio.create_task(self._pause(record.schedule, record))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _pause(self, name: str, record: FailedRecord) -> None:
        assert self._connection is not None, "start() first"
        reason = f"pause_on_failure: run {record.run_id} failed for good ({record.reason})"
        async with self._lock:  # two failures at once pause once
            try:
                paused = await pause_schedule(
                    self._connection, self.names, name, self._history, BY, reason
                )
            except Exception as error:
                log.warning("pause_on_failure: not paused", schedule=name, error=repr(error))
                return
        if paused.changed:
            log.warning("schedule paused after a failure", schedule=name, run_id=record.run_id)

    async def stop(self) -> None:
        """Finish the pauses under way, stop following the store."""
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._history.close()
        await self._book.close()
