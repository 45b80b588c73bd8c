"""Look inside queues without taking anything out: depths, consumers, the head message.

AMQP 0-9-1 has no "peek": a message is read with ``basic.get`` and left unacked, and closing
the channel (or a NACK with requeue) puts it back where it was, in order. On quorum queues
each such return counts toward the delivery limit; the queues read this way are declared with
a limit nobody reaches (``UNLIMITED_DELIVERIES`` in ``topology.declare``).
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage, AbstractQueue
from aiormq.exceptions import ChannelNotFoundEntity

from warren_cron.errors import PlanError
from warren_cron.headers import H_FAILED_AT, H_X_DEATH, as_utc, jsonable, text, x_death
from warren_cron.names import Names
from warren_cron.plan import RetryPlan

T = TypeVar("T")
#: How long one ``basic.get`` may take before the broker is taken for gone.
GET_TIMEOUT_SECONDS = 15.0


async def close_quietly(channel: AbstractChannel) -> None:
    """Close a channel that the broker may already have closed."""
    with suppress(Exception):
        await channel.close()


@dataclass(slots=True)
class Held:
    """A queue being read: every message taken and not acked goes back when the block ends."""

    queue: AbstractQueue
    seen: int = 0

    async def messages(self, limit: int | None = None) -> AsyncIterator[AbstractIncomingMessage]:
        """Messages from the head until none is ready (or ``limit`` were read).

        The count of a passive declare is no bound: on quorum queues it lags by the messages
        another reader returned a moment ago. Reading ends anyway, because every message read
        stays held (unacked) by this channel until the block ends.
        """
        while limit is None or self.seen < limit:
            message = await self.queue.get(fail=False, timeout=GET_TIMEOUT_SECONDS)
            if message is None:
                return
            self.seen += 1
            yield message

    def progress(self, message: AbstractIncomingMessage) -> tuple[int, int]:
        """Messages read so far, and that plus those still ready behind ``message``."""
        return self.seen, self.seen + (message.message_count or 0)


@asynccontextmanager
async def holding(connection: AbstractConnection, queue_name: str) -> AsyncIterator[Held]:
    """Read ``queue_name`` on a channel of its own; closing it returns what was not acked."""
    channel = await connection.channel()
    try:
        yield Held(await channel.declare_queue(queue_name, passive=True))
    finally:
        await close_quietly(channel)


async def counts(connection: AbstractConnection, queue_name: str) -> tuple[int, int] | None:
    """Ready messages and consumers of a queue, or None when it does not exist."""
    channel = await connection.channel()
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
    channel = await connection.channel()
    try:
        queue = await channel.declare_queue(queue_name, passive=True)
        message = await queue.get(fail=False, timeout=GET_TIMEOUT_SECONDS)
        if message is None:
            return None
        result = visit(message)
        await message.nack(requeue=True)
    except ChannelNotFoundEntity:
        return None
    else:
        return result
    finally:
        await close_quietly(channel)


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
    # Quorum queues count each delivery in x-delivery-count: reading must not change identity.
    headers = {k: v for k, v in (message.headers or {}).items() if k != "x-delivery-count"}
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
