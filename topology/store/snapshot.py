"""A snapshot: every runtime schedule at one log offset, as one compressed message.

A reader starts from the newest snapshot and folds only the changes after its offset, so
the log may drop old changes (its retention) without losing a schedule. The body is JSON
compressed with zlib: 100,000 schedules make about 1.7 MB (see docs/runtime-schedules.md),
well under the broker's largest message (16 MB by default on RabbitMQ 4, 128 MB on 3.x).

Reading one is on the way of every new leader, so it is kept cheap: the specs a snapshot
holds were validated when written and are built without their validators
(``topology/schedules/trusted.py``), and zlib, which lets go of the GIL, runs in a thread
(``read_snapshot``/``snapshot_body``) while the event loop goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
import zlib
from collections.abc import Iterator
from typing import Any

import orjson

from warren_cron.clock import utc_text, utcnow
from warren_cron.errors import StoreError
from warren_cron.store.changes import Entry
from warren_cron.store.state import StoreState

FORMAT = 1
#: A snapshot larger than this is not written (the broker would refuse it): the log keeps
#: every change, and the figure to raise is in the error.
MAX_SNAPSHOT_BYTES = 15 * 1024 * 1024


def encode_snapshot(state: StoreState) -> bytes:
    """The snapshot of ``state`` as a message body."""
    return _compressed(len(state.entries), snapshot_json(state))


async def snapshot_body(state: StoreState) -> bytes:
    """``encode_snapshot``, encoding and compressing in a thread: the state's entries are
    taken before it returns (an entry is replaced by a change, never changed), so the event
    loop is held for a copy of the list, not for the encoding of every entry (half a second
    at 100,000, every 5,000 changes of a bulk write)."""
    entries, offset = list(state.entries.items()), state.offset
    return await asyncio.to_thread(lambda: _compressed(len(entries), _json(entries, offset)))


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


def _compressed(count: int, text: bytes) -> bytes:
    body = zlib.compress(text, 6)
    if len(body) > MAX_SNAPSHOT_BYTES:
        raise StoreError(
            f"a snapshot of {count} schedules is {len(body)} bytes, over "
            f"{MAX_SNAPSHOT_BYTES}: archive unused schedules (the change log still has all)"
        )
    return body


def decode_snapshot(body: bytes) -> StoreState:
    """The state a snapshot holds; ``StoreError`` naming what is wrong when it cannot be
    read (not zlib, not JSON, another format, or an entry warren would not have written)."""
    return state_of(_decompressed(body))


async def read_snapshot(body: bytes) -> StoreState:
    """``decode_snapshot``, decompressing in a thread."""
    return state_of(await asyncio.to_thread(_decompressed, body))


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


def state_of(text: bytes) -> StoreState:
    """The state an uncompressed snapshot holds; ``StoreError`` as ``decode_snapshot``."""
    with paused_gc():
        return _state_of(text)


def _state_of(text: bytes) -> StoreState:
    name = "?"
    try:
        data: dict[str, Any] = orjson.loads(text)
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
