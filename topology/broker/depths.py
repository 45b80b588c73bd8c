"""Depth, consumers and age of the oldest message of each queue of a namespace, over AMQP.

``warren queues`` prints these rows and the dashboard's overview shows them. The age is that of
the head message, counted from the latest time it carries (dead-lettering, failure, replay or
schedule time), so it is approximate. AMQP cannot list queues: the retry queues are those of
the plan keys given.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from aio_pika.abc import AbstractConnection

from warren_cron.broker.held import holding
from warren_cron.broker.inspect import age_seconds, counts, peek, plan_queues, retry_keys
from warren_cron.declare import QueueType
from warren_cron.headers import H_ROUTING_KEY, text
from warren_cron.names import DELAY_LEVELS, FINAL_KEY, Names

#: Failed records read to find the retry queues of older plans.
SCAN_LIMIT = 5000


@dataclass(frozen=True, slots=True)
class QueueRow:
    """One queue: its role (main, retry, failed, monitor, delayed), depth, consumers, age, TTL."""

    queue: str
    role: str
    messages: int | None
    consumers: int | None
    oldest_seconds: float | None
    ttl_ms: int | None


async def failed_plan_keys(connection: AbstractConnection, names: Names) -> set[str]:
    """Plans named in the history of the failed records (read, never removed)."""
    keys: set[str] = set()
    async with holding(connection, names.failed_queue) as held:
        async for message in held.messages(SCAN_LIMIT):
            keys |= retry_keys(message.headers, names)
            routing = text((message.headers or {}).get(H_ROUTING_KEY, ""))
            keys |= {routing} if routing and routing != FINAL_KEY else set()
    return keys


async def queue_row(
    connection: AbstractConnection, name: str, role: str, ttl_ms: int | None, look: bool
) -> QueueRow | None:
    """The row of one queue, or None when it does not exist."""
    found = await counts(connection, name)
    if found is None:
        return None
    age = await peek(connection, name, age_seconds) if look and found[0] else None
    return QueueRow(name, role, found[0], found[1], age, ttl_ms)


async def queue_rows(
    connection: AbstractConnection, names: Names, queue_type: QueueType, keys: Iterable[str]
) -> list[QueueRow]:
    """Rows for the main queue, the retry queues of plans ``keys`` (shortest TTL first), the
    failed and the monitor queue, those that exist, and the delay levels holding tasks."""
    # On quorum queues each look at the head counts toward CRON_DELIVERY_LIMIT, and the
    # main queue has a DLX: looking must not move a task on.
    planned: list[tuple[str, str, int | None, bool]] = [
        (names.main_queue, "main", None, queue_type == "classic")
    ]
    for key, ttl in sorted(plan_queues(keys).items(), key=lambda item: item[1]):
        planned.append((names.retry_queue(key), "retry", ttl, True))
    planned += [(names.failed_queue, "failed", None, True)]
    planned += [(names.monitor_queue, "monitor", None, True)]
    rows = [await queue_row(connection, *spec) for spec in planned]
    return [r for r in rows if r is not None] + await delay_rows(connection, names)


async def delay_rows(connection: AbstractConnection, names: Names) -> list[QueueRow]:
    """The delay levels holding tasks. Never looked into: a look at a quorum level's head
    counts as a delivery, and past the limit the broker would pass the task on early."""
    levels = [
        await queue_row(connection, names.delay_level(n), "delayed", 2**n * 1000, False)
        for n in range(DELAY_LEVELS)
    ]
    return [level for level in levels if level is not None and level.messages]
