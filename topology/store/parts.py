"""A snapshot in parts: each part a message of the stream ``<ns>_schedules.snapshot.parts``,
their index in the snapshot queue.

The index is written once every part is confirmed, so the queue never names a part not
yet there. It names the parts by digest and the stream offset they follow: two writers at
once may interleave their parts, and a reader keeps only the ones its index names. The
stream keeps ``PARTS_MAX_BYTES``: the newest snapshot's parts are its newest messages, so
retention drops older snapshots' parts only.
"""

from __future__ import annotations

import asyncio
import contextlib

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractConnection
from aio_pika.exceptions import ChannelNotFoundEntity

from warren_cron.errors import StoreError
from warren_cron.history.reader import read_messages, stream_end
from warren_cron.history.stream import declare_stream, stream_arguments
from warren_cron.names import Names
from warren_cron.store.snapshot import SnapshotIndex, decode_state, part_digest
from warren_cron.store.state import StoreState

#: Room for some forty snapshots of a million schedules (24 MB each).
PARTS_MAX_BYTES = 1_000_000_000


async def write_parts(
    connection: AbstractConnection,
    channel: AbstractChannel,
    names: Names,
    offset: int,
    bodies: list[bytes],
) -> SnapshotIndex:
    """Publish ``bodies`` (a snapshot up to log ``offset``) to the parts stream through
    ``channel`` (with confirms); their index, for the snapshot queue."""
    stream = names.store_snapshot_parts
    await declare_stream(connection, stream, stream_arguments(PARTS_MAX_BYTES))
    after = await _end(connection, stream)
    for body in bodies:
        message = aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
        await channel.default_exchange.publish(message, stream, mandatory=True)
    return SnapshotIndex(offset, after, tuple(part_digest(body) for body in bodies))


async def _end(connection: AbstractConnection, stream: str) -> int:
    """An offset at or before the stream's end; -1 when it is empty."""
    end = await stream_end(connection, stream)
    return -1 if end is None else end.offset


async def read_parts(
    connection: AbstractConnection, names: Names, index: SnapshotIndex
) -> StoreState:
    """The state the parts ``index`` names hold; ``StoreError`` when one is missing (the
    stream deleted, or retention dropped it) or unreadable: read the whole log then."""
    found = await _find(connection, names.store_snapshot_parts, index)
    entries = {}
    for digest in index.parts:
        entries.update((await asyncio.to_thread(decode_state, found[digest])).entries)
    return StoreState(entries, index.offset)


async def _find(
    connection: AbstractConnection, stream: str, index: SnapshotIndex
) -> dict[str, bytes]:
    missing, found = set(index.parts), {}
    try:
        reading = read_messages(connection, stream, index.after + 1)
        async with contextlib.aclosing(reading) as messages:
            async for _, body in messages:
                digest = part_digest(body)
                if digest in missing:
                    found[digest] = body
                    missing.discard(digest)
                    if not missing:
                        break
    except ChannelNotFoundEntity:
        pass  # the stream is gone: every part is missing
    if missing:
        raise StoreError(
            f"{len(missing)} of the {len(index.parts)} parts of the schedules snapshot are "
            f"not in {stream!r} (deleted, or dropped by its retention)"
        )
    return found
