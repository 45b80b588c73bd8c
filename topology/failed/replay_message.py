"""The message a replay publishes: the record's body and run id, its failures kept under
``cron-history`` and one more replay counted in ``cron-replays``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import aio_pika

from warren_cron.clock import utcnow
from warren_cron.codec import persistent_message, task_headers
from warren_cron.headers import H_HISTORY, H_REPLAYS
from warren_cron.records import ERROR_CHARS, RECORD_HEADERS, FailedRecord

#: Failures kept in ``cron-history``: AMQP headers must fit in one frame.
HISTORY_LIMIT = 5


def history_entry(record: FailedRecord) -> dict[str, Any]:
    """One failure of a task, as kept under ``cron-history`` after a replay."""
    entry: dict[str, Any] = {
        "reason": record.reason,
        "attempts": record.attempts,
        "replay": record.replays,
        "x-death": list(record.history),
    }
    if record.error is not None:
        entry["error"] = record.error[:ERROR_CHARS]
    if record.failed_at is not None:
        entry["failed-at"] = record.failed_at.isoformat()
    if record.routing_key is not None:
        entry["routing-key"] = record.routing_key
    return entry


def replay_headers(record: FailedRecord) -> dict[str, Any]:
    """The task's own headers, the history of its failures, and one more replay counted."""
    headers = {
        k: v
        for k, v in record.headers.items()
        if not k.startswith("x-") and k not in RECORD_HEADERS and k != H_HISTORY
    }
    previous = record.headers.get(H_HISTORY)
    earlier = list(previous) if isinstance(previous, list) else []
    headers[H_HISTORY] = [history_entry(record), *earlier][:HISTORY_LIMIT]
    headers[H_REPLAYS] = record.replays + 1
    return task_headers(record.run_id, extra=headers)


def replay_message(record: FailedRecord, now: datetime | None = None) -> aio_pika.Message:
    """The task message a replay publishes: same body and run id, fresh history, stamped now."""
    props = {**record.properties, "timestamp": now or utcnow()}
    return persistent_message(record.body, replay_headers(record), props)
