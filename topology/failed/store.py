"""Read, purge and restore records of the failed queue, the store of record.

Reading never removes anything: records are taken unacked and go back, in order, when the
reading channel closes. Only ``purge`` (and a replay) acks, and ``purge`` writes its export
file, flushed to disk, before the first ack.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aio_pika.abc import AbstractConnection, AbstractIncomingMessage, AbstractRobustConnection

from warren_cron.broker.connect import publish_channel
from warren_cron.broker.inspect import holding
from warren_cron.failed.export import restored_message
from warren_cron.failed.select import RecordFilter
from warren_cron.failed.tally import Progress, Tally
from warren_cron.history.events import record_event
from warren_cron.history.publisher import publishing
from warren_cron.names import Names
from warren_cron.records import FailedRecord, read_record
from warren_cron.runtime.settings import CronSettings

Exporter = Callable[[list[FailedRecord]], None]
#: Told of each record once it is gone from the failed queue.
Removed = Callable[[FailedRecord], None]


async def read_records(
    connection: AbstractConnection,
    names: Names,
    select: RecordFilter,
    limit: int | None = None,
    progress: Progress | None = None,
) -> list[FailedRecord]:
    """Matching records from the head of the failed queue, which keeps every one of them."""
    chosen = await _choose(connection, names, select, limit, progress, purge=None)
    return [record for _, record in chosen]


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

    async def remove(chosen: list[tuple[AbstractIncomingMessage, FailedRecord]]) -> None:
        tally.matched = len(chosen)
        if export is not None:
            export([record for _, record in chosen])
        for message, record in chosen:
            await message.ack()
            tally.moved += 1
            if removed is not None:
                removed(record)

    await _choose(connection, names, select, limit, progress, purge=remove)
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


async def _choose(
    connection: AbstractConnection,
    names: Names,
    select: RecordFilter,
    limit: int | None,
    progress: Progress | None,
    purge: Callable[[list[tuple[AbstractIncomingMessage, FailedRecord]]], Any] | None,
) -> list[tuple[AbstractIncomingMessage, FailedRecord]]:
    chosen: list[tuple[AbstractIncomingMessage, FailedRecord]] = []
    async with holding(connection, names.failed_queue) as held:
        async for message in held.messages():
            record = read_record(message, names.main_queue)
            if select.matches(record):
                chosen.append((message, record))
            if progress is not None:
                progress(*held.progress(message))
            if limit is not None and len(chosen) >= limit:
                break
        if purge is not None:
            await purge(chosen)
    return chosen


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
