"""Message headers: the ``cron-*`` headers we own, the broker's ``x-death``, and their values.

Our headers are named ``cron-…``; ``x-…`` headers belong to the broker (RabbitMQ 4.x drops
or ignores ``x-`` headers that clients set). The broker sends some values as bytes, times as
datetimes or text, and numbers as decimals: the readers here turn them into plain values.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

H_RUN_ID = "cron-run-id"
H_SCHEDULE = "cron-schedule"
H_ATTEMPTS = "cron-attempts"
H_REASON = "cron-reason"
H_ERROR = "cron-error"
H_FAILED_AT = "cron-failed-at"
H_X_DEATH = "cron-x-death"
H_ROUTING_KEY = "cron-routing-key"
H_REPLAYS = "cron-replays"
#: The broker's own history of a message's dead-letterings.
X_DEATH = "x-death"
#: On a copy adopted from a message the broker had handed out before: its run may have begun.
H_REDELIVERED = "cron-redelivered"
H_HISTORY = "cron-history"
#: On a task the worker published again through the delay levels (a ``Retry-After`` retry, a
#: deferral): the attempts it had spent, since the copy carries no ``x-death`` of its own.
H_SPENT = "cron-spent"


def content_headers(headers: Mapping[str, Any] | None) -> dict[str, Any]:
    """A message's headers less what the broker adds at each delivery: quorum queues count
    deliveries in ``x-delivery-count`` and, from RabbitMQ 4.x, ``x-acquired-count``; of the
    broker's ``x-`` headers only ``x-death`` (where the message has been) is its content.
    Reading a message again must not change what it is."""
    return {k: v for k, v in (headers or {}).items() if not k.startswith("x-") or k == X_DEATH}


def text(value: object) -> str:
    """A header value as text (the broker sends some strings as bytes)."""
    return value.decode(errors="replace") if isinstance(value, bytes | bytearray) else str(value)


def number(value: object) -> int:
    """A header count as an int: one that is no number (a foreign or damaged header) reads as 0."""
    if isinstance(value, int | float | Decimal | str | bytes):
        try:
            return int(value)
        except (ValueError, OverflowError):
            return 0
    return 0


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


def jsonable(value: Any) -> Any:
    """AMQP header values (datetimes, bytes, decimals, nested tables) as JSON values."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        return (value.replace(tzinfo=UTC) if value.tzinfo is None else value).isoformat()
    if isinstance(value, bytes | bytearray):
        return text(value)
    if isinstance(value, Decimal):
        return str(value)
    return value


def x_death(headers: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The broker's dead-letter history of a message, newest first."""
    deaths = (headers or {}).get(X_DEATH)
    # RabbitMQ 3.x delivers an x-death header that a client set, whatever its type.
    if not isinstance(deaths, list):
        return []
    return [death for death in deaths if isinstance(death, Mapping)]


def rejections(headers: Mapping[str, Any] | None, main_queue: str) -> int:
    """Attempts this message spent: the broker's count of its rejections from ``main_queue``,
    plus those it spent before the worker published it again (``H_SPENT``)."""
    spent = number((headers or {}).get(H_SPENT, 0))
    return spent + sum(
        number(death.get("count", 0))
        for death in x_death(headers)
        if text(death.get("queue")) == main_queue and text(death.get("reason")) == "rejected"
    )


def attempt_number(headers: Mapping[str, Any] | None, main_queue: str) -> int:
    """Number of the attempt about to run: one more than the broker's rejection count."""
    if not headers or (X_DEATH not in headers and H_SPENT not in headers):
        return 1  # a first attempt, as most are: nothing to count
    return rejections(headers, main_queue) + 1
