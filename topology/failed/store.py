"""Read, purge and restore records of the failed queue, the store of record.

Reading never removes anything: records are taken unacked and go back, in order, when the
reading channel closes. Only ``purge`` (and a replay) acks, and ``purge`` writes its export
file, flushed to disk, before the first ack.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from contextlib import aclosing
from typing import Any

from aio_pika.abc import AbstractConnection, AbstractIncomingMessage, AbstractRobustConnection

from warren_cron.broker.connect import publish_channel
from warren_cron.broker.held import Held, holding
from warren_cron.failed.export import restored_message
from warren_cron.failed.select import RecordFilter
from warren_cron.failed.tally import Progress, Tally
from warren_cron.history.events import record_event
from warren_cron.history.publisher import publishing
from warren_cron.names import Names
from warren_cron.records import FailedRecord, read_record
from warren_cron.runtime.settings import CronSettings

Exporter = Callable[[list[FailedRecord]], None]
#: A record read and the message it came in, held until acked or handed back.
Chosen = tuple[AbstractIncomingMessage, FailedRecord]
#: Told of each record once it is gone from the failed queue.
Removed = Callable[[FailedRecord], None]


async def each_record(
    connection: AbstractConnection,
    names: Names,
    select: RecordFilter,
    limit: int | None = None,
    progress: Progress | None = None,
) -> AsyncGenerator[FailedRecord]:
    """Matching records from the head of the failed queue, one at a time as they are read;
    the queue keeps every one of them (close the iterator to hand them back at once)."""
    async with holding(connection, names.failed_queue) as held:
        async for _, record in _matching(held, names, select, limit, progress):
            yield record


async def read_records(
    connection: AbstractConnection,
    names: Names,
    select: RecordFilter,
    limit: int | None = None,
    progress: Progress | None = None,
) -> list[FailedRecord]:
    """Matching records from the head of the failed queue, which keeps every one of them."""
    async with aclosing(each_record(connection, names, select, limit, progress)) as records:
        return [record async for record in records]


async def purge_records(
    connection: AbstractConnection,
    names: Names,
    select: RecordFilter,
    limit: int | None = None,
    progress: Progress | None = None,
    export: Exporter | None = None,
    removed: Removed | None = None,
) -> Tally:
    """Remove matching records, after ``export`` (if given) has saved every one of them;
    ``removed`` hears of each one removed."""
    tally = Tally()

    async def remove(held: Held, chosen: list[Chosen]) -> None:
        tally.matched = len(chosen)
        if export is not None:
            export([record for _, record in chosen])
        for message, record in chosen:
            await held.ack(message)
            tally.moved += 1
            if removed is not None:
                removed(record)

    await _choose(connection, names, select, limit, progress, remove)
    return tally


async def purge_recorded(
    connection: AbstractConnection,
    settings: CronSettings,
    select: RecordFilter,
    limit: int | None = None,
    *,
    by: str | None = None,
    reason: str | None = None,
    progress: Progress | None = None,
    export: Exporter | None = None,
) -> Tally:
    """``purge_records``, writing a ``purged`` event (who, why) for each record removed."""
    names = Names(settings.namespace)
    async with publishing(connection, names, settings, "purge") as history:

        def gone(record: FailedRecord) -> None:
            history.emit(record_event("purged", record, by=by, reason=reason))

        return await purge_records(connection, names, select, limit, progress, export, gone)


async def _matching(
    held: Held,
    names: Names,
    select: RecordFilter,
    limit: int | None,
    progress: Progress | None,
) -> AsyncIterator[Chosen]:
    found = 0
    async for message in held.messages():
        record = read_record(message, names.main_queue)
        if progress is not None:
            progress(*held.progress())
        if select.matches(record):
            found += 1
            yield message, record
        if limit is not None and found >= limit:
            return


async def _choose(
    connection: AbstractConnection,
    names: Names,
    select: RecordFilter,
    limit: int | None,
    progress: Progress | None,
    purge: Callable[[Held, list[Chosen]], Any],
) -> None:
    async with holding(connection, names.failed_queue) as held:
        matching = _matching(held, names, select, limit, progress)
        await purge(held, [chosen async for chosen in matching])


async def restore_records(
    connection: AbstractRobustConnection, names: Names, exported: Iterable[Mapping[str, Any]]
) -> int:
    """Publish exported records back into the failed queue (not the monitor's), confirmed."""
    channel = await publish_channel(connection)
    count = 0
    try:
        for data in exported:
            message = restored_message(data)
            await channel.default_exchange.publish(message, names.failed_queue, mandatory=True)
            count += 1
    finally:
        await channel.close()
    return count
