"""Failure records: written by the worker, read by every tool, in this one module.

A failure record is the original message (body, headers, properties) plus ``cron-*`` headers
saying why it failed. The broker's ``x-death`` list is copied to ``cron-x-death`` because
RabbitMQ 4.x ignores an ``x-death`` header that a client publishes.

A message reaches the failed queue in one of two ways. The worker publishes a failure record,
or the broker dead-letters it alone: a NACK at ``final`` when no record could be published, a
quorum delivery limit, or a routing key with no retry queue (caught by ``<ns>_dlx.unrouted``).
The second kind has no ``cron-reason``; ``record_from`` derives one from its routing key and
``x-death`` so every record answers the same questions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import aio_pika
import orjson
from aio_pika.abc import AbstractIncomingMessage
from pamqp.commands import Basic

from warren_cron.clock import utcnow
from warren_cron.codec import (
    kept_properties,
    persistent_message,
    run_id_of,
    task_headers,
    task_message,
)
from warren_cron.envelope import Envelope
from warren_cron.headers import (
    H_ATTEMPTS,
    H_ERROR,
    H_FAILED_AT,
    H_REASON,
    H_REPLAYS,
    H_ROUTING_KEY,
    H_SCHEDULE,
    H_X_DEATH,
    as_utc,
    number,
    rejections,
    text,
    x_death,
)
from warren_cron.names import FINAL_KEY

ERROR_CHARS = 1000
#: Headers a failure record adds; a replay moves them into ``cron-history``.
RECORD_HEADERS = frozenset({H_ATTEMPTS, H_ERROR, H_FAILED_AT, H_REASON, H_ROUTING_KEY, H_X_DEATH})


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a task ended in the failed queue."""

    reason: str
    error: str | None
    attempts: int


def _kept_headers(headers: Mapping[str, Any] | None) -> dict[str, Any]:
    # x- headers are the broker's: the history is copied under cron-x-death instead.
    return {k: v for k, v in (headers or {}).items() if not k.startswith("x-")}


def failure_headers(
    headers: Mapping[str, Any] | None,
    routing_key: str | None,
    failure: Failure,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Original headers plus the ``cron-*`` headers of a failure record."""
    record = _kept_headers(headers)
    record[H_ATTEMPTS] = failure.attempts
    record[H_REASON] = failure.reason
    record[H_FAILED_AT] = (now or utcnow()).isoformat()
    record[H_X_DEATH] = x_death(headers)
    if failure.error is not None:
        record[H_ERROR] = failure.error[:ERROR_CHARS]
    if routing_key is not None:
        record[H_ROUTING_KEY] = routing_key
    return record


class Received(Protocol):
    """What a failure record copies from the message it stands for."""

    @property
    def body(self) -> bytes: ...  # noqa: D102 - a property of the protocol
    @property
    def headers(self) -> Mapping[str, Any]: ...  # noqa: D102
    @property
    def routing_key(self) -> str | None: ...  # noqa: D102
    @property
    def properties(self) -> Basic.Properties: ...  # noqa: D102


def failure_record(
    message: Received, failure: Failure, now: datetime | None = None, run_id: str | None = None
) -> aio_pika.Message:
    """The message published to the failed queue for ``message``, whose run id is ``run_id``
    (``codec.run_id_of``; None when it has none)."""
    # Without a run id aiormq would stamp a random message id for its confirm bookkeeping, and
    # the record would be listed under that instead of the run id every log line used.
    headers = failure_headers(message.headers, message.routing_key, failure, now)
    return persistent_message(message.body, task_headers(run_id, extra=headers), message.properties)


def envelope_record(
    envelope: Envelope, failure: Failure, now: datetime | None = None
) -> aio_pika.Message:
    """The record of a task the scheduler published (``task_message``) whose plan ran out:
    what the worker writes, for benchmarks and tests that fill a failed queue."""
    message = task_message(envelope)
    headers = failure_headers(message.headers, FINAL_KEY, failure, now)
    return persistent_message(message.body, headers, message.properties)


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
        """The fields of the ``list`` table and of an alert, JSON-ready."""
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


def _envelope_fields(body: bytes) -> Mapping[str, Any]:
    # The body may be anything: a decode-error record keeps the bytes that failed to parse.
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _optional_text(value: object) -> str | None:
    return None if value is None else text(value)


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
        "attempts": number(headers.get(H_ATTEMPTS)),
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
        run_id=run_id_of(envelope.get("run_id"), properties.get("message_id"), headers),
        schedule=_optional_text(headers.get(H_SCHEDULE) or envelope.get("schedule")),
        task=_optional_text(envelope.get("task")),
        replays=number(headers.get(H_REPLAYS)),
        history=_history(headers),
        body=body,
        headers=headers,
        properties=properties,
        **fields,
    )


def read_record(message: AbstractIncomingMessage, main_queue: str) -> FailedRecord:
    """The record of a message read from the failed or the monitor queue."""
    properties = kept_properties(message)
    return record_from(message.body, message.headers, message.routing_key, main_queue, properties)
