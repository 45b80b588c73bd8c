"""Look inside queues without taking anything out: depths, consumers, the head message.

A message is read unacked and goes back in place when the reading channel closes
(``topology.broker.held``). On quorum queues each such return counts toward the delivery
limit; the queues read this way are declared with a limit nobody reaches
(``UNLIMITED_DELIVERIES`` in ``topology.declare``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson
from aio_pika.abc import AbstractConnection, AbstractIncomingMessage
from aiormq.exceptions import ChannelNotFoundEntity

from warren_cron.broker.connect import close_quietly, open_channel
from warren_cron.broker.held import holding
from warren_cron.errors import PlanError
from warren_cron.headers import (
    H_FAILED_AT,
    H_X_DEATH,
    as_utc,
    content_headers,
    jsonable,
    text,
    x_death,
)
from warren_cron.names import Names
from warren_cron.plan import RetryPlan

T = TypeVar("T")


async def counts(connection: AbstractConnection, queue_name: str) -> tuple[int, int] | None:
    """Ready messages and consumers of a queue, or None when it does not exist."""
    channel = await open_channel(connection)
    try:
        queue = await channel.declare_queue(queue_name, passive=True)
    except ChannelNotFoundEntity:
        return None
    finally:
        await close_quietly(channel)
    result = queue.declaration_result
    return result.message_count or 0, result.consumer_count or 0


async def peek(
    connection: AbstractConnection,
    queue_name: str,
    visit: Callable[[AbstractIncomingMessage], T],
) -> T | None:
    """``visit(message)`` of the head message, put back after; None if there is none."""
    try:
        async with holding(connection, queue_name) as held:
            async for message in held.messages(1):
                return visit(message)
    except ChannelNotFoundEntity:
        return None
    return None


def _body_time(body: bytes) -> datetime | None:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return as_utc(data.get("scheduled_for")) if isinstance(data, dict) else None


def last_event(message: AbstractIncomingMessage) -> datetime | None:
    """The latest time known of a message: failure, dead-lettering, replay or schedule time.

    An approximation of when it entered its current queue: RabbitMQ keeps the time of the
    first event of each ``x-death`` entry, and a NACK after a slow attempt adds none.
    """
    headers = message.headers or {}
    candidates = [as_utc(entry.get("time")) for entry in x_death(headers)]
    candidates += [as_utc(headers.get(H_FAILED_AT)), as_utc(message.timestamp)]
    candidates.append(_body_time(message.body))
    return max((c for c in candidates if c is not None), default=None)


def age_seconds(message: AbstractIncomingMessage, now: datetime | None = None) -> float | None:
    """Seconds since ``last_event``, or None when the message carries no time at all."""
    when = last_event(message)
    if when is None:
        return None
    return max(0.0, ((now or datetime.now(UTC)) - when).total_seconds())


def fingerprint(message: AbstractIncomingMessage) -> str:
    """A digest of a message's content: the same record read twice has the same one."""
    headers = content_headers(message.headers)
    digest = hashlib.sha256(message.body)
    digest.update(orjson.dumps(jsonable(headers), option=orjson.OPT_SORT_KEYS))
    digest.update(f"{message.message_id}|{message.routing_key}".encode())
    return digest.hexdigest()


def retry_keys(headers: Mapping[str, Any] | None, names: Names) -> set[str]:
    """Plan keys of the retry queues a message passed through, from its dead-letter history."""
    entries: list[Any] = list(x_death(headers))
    copied = (headers or {}).get(H_X_DEATH)
    if isinstance(copied, list):
        entries += [entry for entry in copied if isinstance(entry, Mapping)]
    queues = (text(entry.get("queue", "")) for entry in entries)
    return {q.removeprefix(names.retry_prefix) for q in queues if q.startswith(names.retry_prefix)}


def plan_queues(keys: Iterable[str]) -> dict[str, int]:
    """Every retry queue the plans ``keys`` pass through, with its TTL in milliseconds."""
    found: dict[str, int] = {}
    for key in keys:
        try:
            plan = RetryPlan.from_key(key)
        except PlanError:
            continue
        for step in plan.suffixes():
            found[step.key] = step.delays_ms[0]
    return found
