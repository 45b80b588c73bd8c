"""The failed queue as the dashboard pages it: read in the background, its summaries kept in
memory.

The failed queue stays the store of record; this is a copy for reading. Reading ten thousand
records takes seconds, far too long for a page, so the index reads the queue when the
dashboard starts, after each of its own replays and purges, and every
``CRON_DASHBOARD_REFRESH_SECONDS`` (for what ``warren failed`` changed meanwhile). Between reads
it adds each record the monitor consumes from its copy queue, so a new failure shows at once.

The index keeps what the list, its filters and the counts need (ids, times, schedule, task,
reason, error), not the message: a record's body, headers and history are
about 9 KB, and a monitor beside a growing failed queue grew by that much a record. A record's
page reads them from the queue on demand (``whole``).

While it reads, the index holds the records unacked on its channel; a ``warren failed replay`` or
``purge`` run at that moment skips them. The dashboard's own actions wait for the read.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from datetime import datetime

import structlog
from aio_pika.abc import AbstractConnection

from warren_cron.clock import utcnow
from warren_cron.errors import cuts_logged
from warren_cron.failed.select import RecordFilter, exact
from warren_cron.failed.store import each_record, read_records
from warren_cron.names import Names
from warren_cron.records import FailedRecord

log = structlog.get_logger("dashboard")
#: What tells two reads of the same record apart from two records (see ``identity``).
Identity = tuple[str | None, str | None, int, str]


def identity(record: FailedRecord) -> Identity:
    """The same record read twice, from the failed queue or its monitor copy, is equal here."""
    failed_at = record.failed_at.isoformat() if record.failed_at else ""
    return (record.run_id, record.reason, record.replays, failed_at)


def summary_of(record: FailedRecord) -> FailedRecord:
    """``record`` without its message (body, headers, history): what the index keeps."""
    return dataclasses.replace(record, body=b"", headers={}, history=[], properties={})


class FailedIndex:
    """A summary of every record of the failed queue, in queue order, as of ``read_at``."""

    def __init__(self, names: Names, refresh_seconds: float) -> None:
        self.names = names
        self.refresh_seconds = refresh_seconds
        self.records: list[FailedRecord] = []
        self.read_at: datetime | None = None
        #: Records read so far by the read in progress, and of how many (0, 0 before it
        #: starts): until the first read ends, the pages say how far it got.
        self.reading = (0, 0)
        #: Held by a read of the queue, and by the actions that must not race one.
        self.lock = asyncio.Lock()
        self._known: set[Identity] = set()
        self._arrived: list[FailedRecord] = []

    def learn(self, record: FailedRecord) -> None:
        """Add a record the monitor just consumed (the failed queue has it too)."""
        kept = summary_of(record)
        if self.lock.locked():
            self._arrived.append(kept)  # the read in progress may or may not include it
        self._add(kept)

    def _add(self, record: FailedRecord) -> None:
        key = identity(record)
        if key not in self._known:
            self._known.add(key)
            self.records.append(record)

    async def refresh(self, connection: AbstractConnection) -> None:
        """Read the whole failed queue again (records go back in place)."""
        async with self.lock:
            self._arrived = []
            records = []
            # One record whole at a time: a read never holds the queue's messages at once.
            reading = each_record(connection, self.names, RecordFilter(), None, self._read)
            async with contextlib.aclosing(reading) as each:
                async for record in each:
                    records.append(summary_of(record))
            self.records, self._known = records, {identity(r) for r in records}
            for record in self._arrived:
                self._add(record)
            self.read_at = utcnow()

    async def whole(self, connection: AbstractConnection, run_id: str) -> list[FailedRecord]:
        """The records of ``run_id`` in full, read from the queue (none if the index has
        none); the read stops at the last one the index knows of."""
        select = RecordFilter(run_id=exact(run_id))
        known = len(self.select(select))
        if known == 0:
            return []
        async with self.lock:
            return await read_records(connection, self.names, select, known)

    def _read(self, done: int, total: int) -> None:
        self.reading = (done, total)

    async def run(self, connection: AbstractConnection, stop: asyncio.Event) -> None:
        """Refresh until ``stop`` is set; broker trouble waits for the next round."""
        while not stop.is_set():
            with cuts_logged(log.warning, "failed queue not read; trying again"):
                await self.refresh(connection)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.refresh_seconds)

    def select(self, select: RecordFilter) -> list[FailedRecord]:
        """The records ``select`` matches, in queue order."""
        if select.selects_all:
            return self.records
        return [record for record in self.records if select.matches(record)]

    def reasons(self) -> list[str]:
        """Every reason among the records, for the filter's choices."""
        return sorted({record.reason for record in self.records})
