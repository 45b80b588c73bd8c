"""History events: small JSON objects with a schema version, built and read in one place.

Every event has ``v`` (the schema), ``type``, ``at`` (ISO 8601 UTC) and, when it belongs to a
run, ``run_id``, ``schedule`` and ``task``. The fields of each type:

| type        | fields                                                                        |
| ----------- | ----------------------------------------------------------------------------- |
| `fired`     | `scheduled_for`, `plan`; a backfilled fire also `by`, `backfill` (true)       |
| `triggered` | `scheduled_for`, `plan`, `by`, `reason`                                       |
| `skipped`   | `scheduled_for`, `reason`; the fires of one pause, folded: `count`, `last`    |
| `started`   | `attempt`, `host`, `pid`, `replay`                                            |
| `attempt`   | `attempt`, `outcome`, `reason`, `duration_ms`, `error`, `http_status`,        |
|             | `result` (the handler's return value, JSON), `host`, `pid`, `replay`,         |
|             | `started` (when it began, for an attempt whose `started` was not written)     |
| `progress`  | `attempt`, `progress` (a long attempt's last, any JSON), `heartbeats`,        |
|             | `host`, `pid` (a summary of its heartbeats: ``worker/heartbeat.py``)          |
| `failed`    | `reason`, `attempts`, `error`, `replay`                                       |
| `replayed`  | `by`, `plan`, `replay`, `reason`                                              |
| `purged`    | `by`, `reason`                                                                |
| `cancelled` | `by`, `reason`, `until` (a cancel asked for: `topology/cancel/`)              |
| `paused`    | `by`, `reason`                                                                |
| `resumed`   | `by`, `catch_up`, `reason`                                                    |
| `changed`   | `by`, `change` (create, update, archive), `version`, `reason`                 |
| `dropped`   | `count`, `process`, `host`, `pid`, `since`, `until`                           |

A worker writes an attempt's ``started`` only if the attempt still runs when its next batch
of events goes out (a tenth of a second); a quicker attempt's ``attempt`` event says when it
began instead (``worker/report.py``).
With tracing on (docs/tracing.md), ``started``, ``attempt`` and ``failed`` also carry
``trace_id``, the run's trace id in hex.
``replay`` is the number of the replay an event belongs to (1 for the first); it is left out
before any replay. ``by`` names who acted (``user@host``, or a dashboard user), ``reason`` why
(given on every dashboard action; optional on the command line but for a pause).
``dropped`` belongs to no run: a publisher's report of the ``count`` events it could not
write between ``since`` and ``until`` (``topology/history/losses.py``). A reader skips the
types it does not know, so older readers pass over types added since.
"""

from __future__ import annotations

import getpass
import os
import socket
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import orjson

from warren_cron.clock import now_text, utc_text
from warren_cron.runtime.settings import redact_urls

if TYPE_CHECKING:
    from warren_cron.records import FailedRecord

SCHEMA = 1
EventType = Literal[
    "fired",
    "triggered",
    "skipped",
    "started",
    "attempt",
    "progress",
    "failed",
    "replayed",
    "purged",
    "cancelled",
    "paused",
    "resumed",
    "changed",
    "dropped",
]
TYPES: frozenset[str] = frozenset(EventType.__args__)  # type: ignore[attr-defined]
#: Error texts are cut to this many characters: history holds excerpts, not response bodies.
ERROR_CHARS = 500


def excerpt(text: str | None, limit: int = ERROR_CHARS) -> str | None:
    """The start of an error text, with every URL's password hidden."""
    if text is None:
        return None
    text = redact_urls(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def who() -> str:
    """``user@host`` of the person running a command, for events they cause."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


def event(kind: EventType, *, at: datetime | str | None = None, **fields: Any) -> dict[str, Any]:
    """One event as the dict that goes on the wire (``run_id``, ``schedule`` and ``task`` among
    ``fields`` where it belongs to a run; ``at`` a time or its text, ``now_text``'s); ``None``
    fields are left out."""
    when = now_text() if at is None else at if isinstance(at, str) else utc_text(at)
    data: dict[str, Any] = {"v": SCHEMA, "type": kind, "at": when}
    for key, value in fields.items():
        if value is not None:
            data[key] = value
    return data


def record_event(
    kind: EventType,
    record: FailedRecord,
    at: datetime | None = None,
    by: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """An event about a failed record's run (a replay, a purge), done by ``by`` (else by
    whoever runs this)."""
    ids = {"run_id": record.run_id, "schedule": record.schedule, "task": record.task}
    return event(kind, at=at, **ids, by=by or who(), **fields)


def encode(events: list[dict[str, Any]]) -> bytes:
    """The body of one stream message: a JSON array of events."""
    return orjson.dumps(events)


def join(encoded: list[bytes]) -> bytes:
    """The body of one stream message from events already encoded one by one."""
    return b"[" + b",".join(encoded) + b"]"


@dataclass(frozen=True, slots=True)
class Event:
    """An event read back from the stream, with the offset of the message that held it."""

    type: str
    at: datetime
    offset: int
    run_id: str | None = None
    schedule: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        """A field of the event."""
        return self.data.get(key, default)

    def time(self, key: str) -> datetime | None:
        """A field holding a time (ISO 8601); None when missing or no time."""
        value = self.data.get(key)
        try:
            return datetime.fromisoformat(value) if isinstance(value, str) else None
        except ValueError:
            return None


def mention(run_id: str) -> bytes:
    """What the body of a message holding an event of ``run_id`` contains: its id as every
    writer encodes it (orjson), for a reader to pass over other messages without decoding
    them."""
    return orjson.dumps(run_id)


def last_time(body: bytes) -> datetime | None:
    """The time of the last event of one stream message, the latest of its writer's batch,
    without building the others; None when it holds none."""
    try:
        items = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    last = items[-1] if isinstance(items, list) and items else items
    event = _event(last, 0)
    return None if event is None else event.at


def decode(body: bytes, offset: int) -> list[Event]:
    """The events of one stream message; what is no event of a schema this code knows is left
    out (a newer writer's events, or anything else published to the stream)."""
    try:
        items = orjson.loads(body)
    except orjson.JSONDecodeError:
        return []
    if not isinstance(items, list):
        items = [items]
    events = (_event(item, offset) for item in items)
    return [item for item in events if item is not None]


def _event(data: Any, offset: int) -> Event | None:
    if not isinstance(data, dict) or data.get("v") != SCHEMA or data.get("type") not in TYPES:
        return None
    try:
        at = datetime.fromisoformat(data["at"])
    except (KeyError, TypeError, ValueError):
        return None
    return Event(data["type"], at, offset, data.get("run_id"), data.get("schedule"), data)
