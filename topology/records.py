"""Failure records and the broker's ``x-death`` history.

A failure record is the original message (body and headers) plus ``cron-*`` headers saying
why it failed. The broker's ``x-death`` list is copied to ``cron-x-death`` because RabbitMQ
4.x ignores an ``x-death`` header that a client publishes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import aio_pika
from pamqp.commands import Basic

from topology.envelope import (
    H_ATTEMPTS,
    H_ERROR,
    H_FAILED_AT,
    H_REASON,
    H_ROUTING_KEY,
    H_X_DEATH,
    utcnow,
)

ERROR_CHARS = 1000


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def x_death(headers: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The broker's dead-letter history of a message, newest first."""
    deaths = (headers or {}).get("x-death") or []
    return [death for death in deaths if isinstance(death, Mapping)]


def rejections(headers: Mapping[str, Any] | None, main_queue: str) -> int:
    """How often the broker saw this message rejected from ``main_queue``."""
    return sum(
        int(death.get("count", 0))
        for death in x_death(headers)
        if _text(death.get("queue")) == main_queue and _text(death.get("reason")) == "rejected"
    )


def attempt_number(headers: Mapping[str, Any] | None, main_queue: str) -> int:
    """Number of the attempt about to run: one more than the broker's rejection count."""
    return rejections(headers, main_queue) + 1


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


def failure_record(message: Received, failure: Failure) -> aio_pika.Message:
    """The message published to the failed queue for ``message``."""
    props = message.properties
    return aio_pika.Message(
        message.body,
        headers=failure_headers(message.headers, message.routing_key, failure),
        message_id=props.message_id,
        content_type=props.content_type,
        content_encoding=props.content_encoding,
        correlation_id=props.correlation_id,
        timestamp=props.timestamp,
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
    )
