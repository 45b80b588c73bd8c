"""A snapshot: every runtime schedule at one log offset, as one compressed message.

A reader starts from the newest snapshot and folds only the changes after its offset, so
the log may drop old changes (its retention) without losing a schedule. The body is JSON
compressed with zlib: 100,000 schedules make about 3.5 MB (see docs/runtime-schedules.md),
well under the broker's largest message (16 MB by default on RabbitMQ 4, 128 MB on 3.x).
"""

from __future__ import annotations

import zlib
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
    data = {
        "v": FORMAT,
        "offset": state.offset,
        "written_at": utc_text(utcnow()),
        "schedules": {name: entry.to_json() for name, entry in state.entries.items()},
    }
    body = zlib.compress(orjson.dumps(data), 6)
    if len(body) > MAX_SNAPSHOT_BYTES:
        raise StoreError(
            f"a snapshot of {len(state.entries)} schedules is {len(body)} bytes, over "
            f"{MAX_SNAPSHOT_BYTES}: archive unused schedules (the change log still has all)"
        )
    return body


def decode_snapshot(body: bytes) -> StoreState:
    """The state a snapshot holds; ``StoreError`` when it cannot be read."""
    try:
        data: dict[str, Any] = orjson.loads(zlib.decompress(body))
        if data.get("v") == FORMAT:
            entries = {name: Entry.from_json(raw) for name, raw in data["schedules"].items()}
            return StoreState(entries, int(data["offset"]))
        problem = f"format {data.get('v')!r}, this version reads {FORMAT}"
    except (zlib.error, orjson.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        problem = str(error)
    raise StoreError(f"the schedules snapshot cannot be read ({problem})")
