"""A snapshot: every runtime schedule at one log offset, as compressed messages.

A reader starts from the newest snapshot and folds only the changes after its offset, so
the log may drop old changes (its retention) without losing a schedule. A body is JSON
compressed with zlib: 100,000 schedules make about 1.7 MB (see docs/runtime-schedules.md),
well under the broker's largest message (16 MB by default on RabbitMQ 4, 128 MB on 3.x).
Past ``PART_ENTRIES`` schedules a snapshot is written in parts of at most that many, each
a snapshot of its share, and the snapshot queue holds their index (``SnapshotIndex``,
``topology/store/parts.py``): a million schedules make 24 MB, one message no longer.

Reading one is on the way of every new leader, so it is kept cheap: the specs a snapshot
holds were validated when written and are built without their validators
(``topology/schedules/trusted.py``), and zlib, which lets go of the GIL, runs in a thread
(``read_snapshot``/``snapshot_body``) while the event loop goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from warren_cron.clock import utc_text, utcnow
from warren_cron.errors import StoreError
from warren_cron.store.changes import Entry
from warren_cron.store.state import StoreState

FORMAT = 1
#: The format of an index: the snapshot is in parts, ``SnapshotIndex`` says where.
INDEX = 2
#: A message holds at most this many schedules: past it a snapshot is written in parts.
PART_ENTRIES = 100_000
#: A part larger than this (compressed) is split in two: the broker refuses messages past
#: 16 MB by default on RabbitMQ 4.
MAX_SNAPSHOT_BYTES = 15 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SnapshotIndex:
    """A snapshot in parts: the log offset it covers, the parts stream's offset the parts
    follow, and each part's digest (``part_digest``) in order."""

    offset: int
    after: int
    parts: tuple[str, ...]

    def body(self) -> bytes:
        """The index as the snapshot queue holds it."""
        data = {"v": INDEX, "offset": self.offset, "after": self.after, "parts": self.parts}
        return zlib.compress(orjson.dumps(data))


def part_digest(body: bytes) -> str:
    """What names a part in the index: the parts stream may hold other snapshots' parts
    (two writers at once), and a part changed on its way is no part of this one."""
    return hashlib.blake2b(body, digest_size=16).hexdigest()


def encode_snapshot(state: StoreState) -> bytes:
    """The snapshot of ``state`` as one message body, however large."""
    return zlib.compress(snapshot_json(state), 6)


async def snapshot_bodies(state: StoreState) -> list[bytes]:
    """The snapshot of ``state`` in parts of at most ``PART_ENTRIES`` schedules (one body
    when it has no more), encoded and compressed in a thread: the state's entries are
    taken before it returns (an entry is replaced by a change, never changed), so the event
    loop is held for a copy of the list, not for the encoding of every entry (half a second
    at 100,000, every 5,000 changes of a bulk write)."""
    entries, offset = list(state.entries.items()), state.offset
    chunks = [entries[at : at + PART_ENTRIES] for at in range(0, len(entries), PART_ENTRIES)]
    return await asyncio.to_thread(lambda: [b for c in chunks or [[]] for b in _parts(c, offset)])


def _parts(entries: list[tuple[str, Entry]], offset: int) -> list[bytes]:
    """``entries`` compressed in one body, or in two halves and so on while too large."""
    body = zlib.compress(_json(entries, offset), 6)
    if len(body) <= MAX_SNAPSHOT_BYTES:
        return [body]
    if len(entries) == 1:
        raise StoreError(f"schedule {entries[0][0]!r} alone makes a snapshot of {len(body)} bytes")
    half = len(entries) // 2
    return _parts(entries[:half], offset) + _parts(entries[half:], offset)


def snapshot_json(state: StoreState) -> bytes:
    """The uncompressed snapshot of ``state``."""
    return _json(list(state.entries.items()), state.offset)


def _json(entries: list[tuple[str, Entry]], offset: int) -> bytes:
    data = {
        "v": FORMAT,
        "offset": offset,
        "written_at": utc_text(utcnow()),
        "schedules": {name: entry.fragment() for name, entry in entries},
    }
    return orjson.dumps(data)


def decode_snapshot(body: bytes) -> StoreState | SnapshotIndex:
    """The state a snapshot holds, or the index of its parts; ``StoreError`` naming what is
    wrong when it cannot be read (not zlib, not JSON, another format, or an entry warren
    would not have written)."""
    return state_of(_decompressed(body))


def decode_state(body: bytes) -> StoreState:
    """The state a snapshot (or a part of one) holds; ``StoreError`` as ``decode_snapshot``,
    and for an index."""
    read = decode_snapshot(body)
    if isinstance(read, SnapshotIndex):
        raise StoreError("the schedules snapshot cannot be read (an index where a state was)")
    return read


async def read_snapshot(body: bytes) -> StoreState | SnapshotIndex:
    """``decode_snapshot`` in a thread: on the event loop, a snapshot of 1,000,000 schedules
    held it for about 15 s, past a new leader's lease and its heartbeats."""
    return await asyncio.to_thread(decode_snapshot, body)


def _decompressed(body: bytes) -> bytes:
    try:
        return zlib.decompress(body)
    except zlib.error as error:
        raise StoreError(f"the schedules snapshot cannot be read (not zlib: {error})") from None


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection inside: making 100,000 entries (millions of objects,
    none in a cycle) would otherwise run it hundreds of times, over half the decode's time."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def state_of(text: bytes) -> StoreState | SnapshotIndex:
    """The state an uncompressed snapshot holds, or its index; ``StoreError`` as
    ``decode_snapshot``."""
    with paused_gc():
        return _state_of(text)


def _state_of(text: bytes) -> StoreState | SnapshotIndex:
    name = "?"
    try:
        data: dict[str, Any] = orjson.loads(text)
        if data.get("v") == INDEX:
            parts = tuple(str(part) for part in data["parts"])
            return SnapshotIndex(int(data["offset"]), int(data["after"]), parts)
        if data.get("v") == FORMAT:
            entries = {}
            for name, raw in data["schedules"].items():
                # One copy of each name: the store's key, the leader's schedule and heap.
                entries[sys.intern(name)] = Entry.from_json(name, raw)
            return StoreState(entries, int(data["offset"]))
        problem = f"format {data.get('v')!r}, this version reads {FORMAT}"
    except orjson.JSONDecodeError as error:
        problem = f"not JSON: {error}"
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        where = "" if name == "?" else f"schedule {name!r}: "
        problem = f"{where}{type(error).__name__}: {str(error)[:500]}"
    raise StoreError(f"the schedules snapshot cannot be read ({problem})")
