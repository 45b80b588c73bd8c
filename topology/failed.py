"""Failed tasks as people and tools see them: one record per message in the failed queue.

A message reaches the failed queue in one of two ways. The worker publishes a failure record
(``cron-reason`` and the other ``cron-*`` headers of ``topology.records``), or the broker
dead-letters it alone: a NACK at ``final`` when no record could be published, a quorum
delivery limit, or a routing key with no retry queue (caught by ``<ns>_dlx.unrouted``). The
second kind has no ``cron-reason``; ``read_record`` derives one from its routing key and
``x-death`` so every record answers the same questions.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fnmatch import fnmatchcase
from typing import Any

import aio_pika
import orjson
from aio_pika.abc import AbstractIncomingMessage

from topology.envelope import (
    H_ATTEMPTS,
    H_ERROR,
    H_FAILED_AT,
    H_REASON,
    H_REPLAYS,
    H_ROUTING_KEY,
    H_RUN_ID,
    H_SCHEDULE,
    H_X_DEATH,
)
from topology.names import FINAL_KEY
from topology.records import rejections, x_death

#: Headers a failure record adds; a replay moves them into ``cron-history``.
RECORD_HEADERS = frozenset({H_ATTEMPTS, H_ERROR, H_FAILED_AT, H_REASON, H_ROUTING_KEY, H_X_DEATH})
_RELATIVE = re.compile(r"^(\d+)([smhd])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def text(value: object) -> str:
    """A header value as text (the broker sends some strings as bytes)."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def as_utc(value: object) -> datetime | None:
    """A header timestamp (datetime or ISO text) as an aware UTC datetime, else None."""
    if isinstance(value, bytes | str):
        try:
            value = datetime.fromisoformat(text(value))
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class FailedRecord:
    """One failed task: what it was, why it failed, and the message itself."""

    run_id: str | None
    schedule: str | None
    task: str | None
    attempts: int
    reason: str
    error: str | None
    failed_at: datetime | None
    routing_key: str | None
    replays: int
    history: list[Mapping[str, Any]]
    body: bytes
    headers: Mapping[str, Any]
    properties: Mapping[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The fields of the ``list`` table, JSON-ready."""
        return {
            "run_id": self.run_id,
            "schedule": self.schedule,
            "task": self.task,
            "attempts": self.attempts,
            "reason": self.reason,
            "failed_at": self.failed_at.isoformat() if self.failed_at else None,
            "replays": self.replays,
            "error": self.error,
        }

    def to_json(self) -> dict[str, Any]:
        """The whole record as one JSON object: what ``export`` writes, ``restore`` reads."""
        exported = self.summary()
        exported["routing_key"] = self.routing_key
        exported["x_death"] = jsonable(self.history)
        exported["properties"] = jsonable(dict(self.properties))
        exported["headers"] = jsonable(dict(self.headers))
        exported.update(body_fields(self.body))
        return exported


def body_fields(body: bytes) -> dict[str, Any]:
    """The body as UTF-8 text when it is, else as base64: a lossless JSON form."""
    try:
        return {"body": body.decode()}
    except UnicodeDecodeError:
        return {"body": None, "body_base64": base64.b64encode(body).decode()}


def jsonable(value: Any) -> Any:
    """AMQP header values (datetimes, bytes, decimals, nested tables) as JSON values."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        return (value.replace(tzinfo=UTC) if value.tzinfo is None else value).isoformat()
    if isinstance(value, bytes):
        return text(value)
    if isinstance(value, Decimal):
        return str(value)
    return value


def _envelope_fields(body: bytes) -> Mapping[str, Any]:
    # The body may be anything: a decode-error record keeps the bytes that failed to parse.
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _optional_text(value: object) -> str | None:
    return None if value is None else text(value)


def _count(value: object) -> int:
    # A foreign or damaged record must still list: a count that is no number reads as 0.
    if isinstance(value, int | float | str | bytes):
        try:
            return int(value)
        except ValueError:
            return 0
    return 0


def _history(headers: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    copied = headers.get(H_X_DEATH)
    if isinstance(copied, list):
        return [entry for entry in copied if isinstance(entry, Mapping)]
    return x_death(headers)


def _latest_death(history: list[Mapping[str, Any]]) -> datetime | None:
    # An x-death entry keeps the time of its first event, so the newest time is the maximum.
    times = [t for t in (as_utc(entry.get("time")) for entry in history) if t is not None]
    return max(times, default=None)


def derived_reason(history: list[Mapping[str, Any]], routing_key: str | None) -> str:
    """Why the broker alone moved a message to the failed queue."""
    if history and text(history[0].get("reason")) == "delivery_limit":
        return "delivery-limit"
    if routing_key == FINAL_KEY:
        return "retries-exhausted"
    return "no-retry-queue"


def _derived_error(reason: str, routing_key: str | None) -> str:
    if reason == "delivery-limit":
        return "the broker's delivery limit was reached: the worker kept crashing on this task"
    if reason == "retries-exhausted":
        return "dead-lettered by the broker after the last attempt (no failure record published)"
    return f"no retry queue for routing key {routing_key!r}: publishers must declare the plan"


def _recorded(headers: Mapping[str, Any], routing_key: str | None) -> dict[str, Any]:
    return {
        "attempts": _count(headers.get(H_ATTEMPTS)),
        "reason": text(headers[H_REASON]),
        "error": _optional_text(headers.get(H_ERROR)),
        "failed_at": as_utc(headers.get(H_FAILED_AT)),
        "routing_key": _optional_text(headers.get(H_ROUTING_KEY)) or routing_key,
    }


def _derived(
    headers: Mapping[str, Any], routing_key: str | None, main_queue: str
) -> dict[str, Any]:
    history = x_death(headers)
    reason = derived_reason(history, routing_key)
    return {
        "attempts": rejections(headers, main_queue),
        "reason": reason,
        "error": _derived_error(reason, routing_key),
        "failed_at": _latest_death(history),
        "routing_key": routing_key,
    }


def record_from(
    body: bytes,
    headers: Mapping[str, Any] | None,
    routing_key: str | None,
    main_queue: str,
    properties: Mapping[str, Any] | None = None,
) -> FailedRecord:
    """Read the record of one failed-queue message from its parts."""
    headers = dict(headers or {})
    properties = dict(properties or {})
    if H_REASON in headers:
        fields = _recorded(headers, routing_key)
    else:
        fields = _derived(headers, routing_key, main_queue)
    envelope = _envelope_fields(body)
    return FailedRecord(
        run_id=_optional_text(
            properties.get("message_id") or headers.get(H_RUN_ID) or envelope.get("run_id")
        ),
        schedule=_optional_text(headers.get(H_SCHEDULE) or envelope.get("schedule")),
        task=_optional_text(envelope.get("task")),
        replays=_count(headers.get(H_REPLAYS)),
        history=_history(headers),
        body=body,
        headers=headers,
        properties=properties,
        **fields,
    )


def message_properties(message: AbstractIncomingMessage) -> dict[str, Any]:
    """The AMQP properties a record keeps (and a replay or restore publishes again)."""
    props = {
        "message_id": message.message_id,
        "content_type": message.content_type,
        "content_encoding": message.content_encoding,
        "correlation_id": message.correlation_id,
        "timestamp": message.timestamp,
        "type": message.type,
        "app_id": message.app_id,
    }
    return {k: v for k, v in props.items() if v is not None}


def read_record(message: AbstractIncomingMessage, main_queue: str) -> FailedRecord:
    """The record of a message read from the failed or the monitor queue."""
    return record_from(
        message.body,
        message.headers,
        message.routing_key,
        main_queue,
        message_properties(message),
    )


def parse_since(value: str, now: datetime | None = None) -> datetime:
    """``--since``: an age (``90s``, ``30m``, ``2h``, ``7d``) or an ISO time (UTC if bare)."""
    match = _RELATIVE.match(value.strip())
    if match:
        seconds = int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        return (now or datetime.now(UTC)) - timedelta(seconds=seconds)
    parsed = as_utc(value.strip())
    if parsed is None:
        raise ValueError(
            f"--since {value!r} is neither an age like 30m, 2h, 7d nor an ISO time "
            "like 2026-01-31T08:00:00Z"
        )
    return parsed


@dataclass(frozen=True, slots=True)
class RecordFilter:
    """Which records a command works on; name patterns may use ``*`` and ``?``."""

    schedule: str | None = None
    task: str | None = None
    reason: str | None = None
    run_id: str | None = None
    since: datetime | None = None
    #: Records that failed after this instant are left alone (they arrived during the run).
    until: datetime | None = None

    @property
    def selects_all(self) -> bool:
        """True when no filter narrows the selection."""
        return not any((self.schedule, self.task, self.reason, self.run_id, self.since))

    def matches(self, record: FailedRecord) -> bool:
        """True when ``record`` passes every filter that is set."""
        return (
            _like(self.schedule, record.schedule)
            and _like(self.task, record.task)
            and _like(self.run_id, record.run_id)
            and (self.reason is None or self.reason == record.reason)
            and _after(self.since, record.failed_at)
            and _before(self.until, record.failed_at)
        )


def _like(pattern: str | None, value: str | None) -> bool:
    return pattern is None or (value is not None and fnmatchcase(value, pattern))


def _after(since: datetime | None, when: datetime | None) -> bool:
    return since is None or (when is not None and when >= since)


def _before(until: datetime | None, when: datetime | None) -> bool:
    return until is None or when is None or when <= until


def _exported_body(data: Mapping[str, Any]) -> bytes:
    if data.get("body_base64") is not None:
        return base64.b64decode(data["body_base64"])
    return str(data.get("body") or "").encode()


def _exported_headers(data: Mapping[str, Any]) -> dict[str, Any]:
    # The record's fields are written as cron-* headers so a restored record reads the same
    # on any broker: RabbitMQ 4.x drops an x-death header that a client publishes.
    headers = {k: v for k, v in (data.get("headers") or {}).items() if not k.startswith("x-")}
    fields = {
        H_REASON: data.get("reason"),
        H_ATTEMPTS: data.get("attempts"),
        H_ERROR: data.get("error"),
        H_FAILED_AT: data.get("failed_at"),
        H_ROUTING_KEY: data.get("routing_key"),
        H_X_DEATH: data.get("x_death") or [],
    }
    headers.update({k: v for k, v in fields.items() if v is not None})
    return headers


def restored_message(data: Mapping[str, Any]) -> aio_pika.Message:
    """The failed-queue message of one exported record (a line written by ``export``)."""
    props = data.get("properties") or {}
    return aio_pika.Message(
        _exported_body(data),
        headers=_exported_headers(data),
        message_id=props.get("message_id") or data.get("run_id"),
        content_type=props.get("content_type"),
        content_encoding=props.get("content_encoding"),
        correlation_id=props.get("correlation_id"),
        type=props.get("type"),
        app_id=props.get("app_id"),
        timestamp=as_utc(props.get("timestamp")),
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
    )
