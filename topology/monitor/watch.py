"""Conditions the monitor polls: a failed queue past its threshold, a stalled retry queue.

A retry queue holds one TTL, so its head must leave within that TTL. Some broker versions
stopped expiring messages in queues without consumers (rabbitmq-server #10692, #10718): the
monitor looks at each retry queue's head every interval and calls the queue stalled when the
same message has stayed there longer than the TTL plus a margin. The time is measured by the
monitor itself, because RabbitMQ records no "entered this queue" time it could read.

AMQP cannot list queues, so the retry queues watched are those of the default plan, of each
schedule's plan, and of every plan seen in the history of a failed task.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aio_pika.abc import AbstractConnection

from warren_cron.broker.inspect import counts, fingerprint, peek, plan_queues, retry_keys
from warren_cron.monitor.alerts import Condition
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.names import Names
from warren_cron.plan import RetryPlan, is_retry_key
from warren_cron.runtime.metrics import QUEUE_DEPTH

#: Key of the condition "the failed queue holds more than its threshold".
DEEP_FAILED_QUEUE = "failed-queue"


class QueueWatch:
    """Remembers what it saw; each ``check`` returns the conditions that changed."""

    def __init__(
        self,
        settings: MonitorSettings,
        plans: Iterable[RetryPlan] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.names = Names(settings.namespace)
        self.plan_keys = {plan.key for plan in plans if not plan.spent}
        self._clock = clock
        self._firing: dict[str, bool] = {}
        self._heads: dict[str, tuple[str, float]] = {}

    def learn(self, headers: Mapping[str, Any] | None, routing_key: str | None) -> None:
        """Add the plans a failed task went through to the retry queues watched."""
        self.plan_keys |= retry_keys(headers, self.names)
        if routing_key and is_retry_key(routing_key):
            self.plan_keys.add(str(routing_key))

    async def check(self, connection: AbstractConnection) -> list[Condition]:
        """Look at the failed queue's depth and each retry queue's head once."""
        changes = await self._failed_depth(connection)
        for key, ttl_ms in sorted(plan_queues(self.plan_keys).items()):
            changes += await self._stalled(connection, self.names.retry_queue(key), ttl_ms)
        return changes

    def _change(self, key: str, firing: bool, detail: str) -> list[Condition]:
        if firing == self._firing.get(key, False):
            return []
        self._firing[key] = firing
        return [Condition(key, firing, detail)]

    async def _failed_depth(self, connection: AbstractConnection) -> list[Condition]:
        found = await counts(connection, self.names.failed_queue)
        depth = found[0] if found else 0
        QUEUE_DEPTH.labels(queue=self.names.failed_queue).set(depth)
        threshold = self.settings.failed_alert_threshold
        state = "holds" if depth > threshold else "is back to"
        detail = (
            f"failed queue {self.names.failed_queue} {state} {depth} message(s) "
            f"(threshold {threshold}); see warren failed list"
        )
        return self._change(DEEP_FAILED_QUEUE, depth > threshold, detail)

    def _head_age(self, queue: str, head: str | None) -> float:
        # How long this monitor has seen the same message at the head of ``queue``.
        now = self._clock()
        if head is None:
            self._heads.pop(queue, None)
            return 0.0
        seen, since = self._heads.get(queue, (head, now))
        if seen != head:
            since = now
        self._heads[queue] = (head, since)
        return now - since

    async def _stalled(
        self, connection: AbstractConnection, queue: str, ttl_ms: int
    ) -> list[Condition]:
        age = self._head_age(queue, await peek(connection, queue, fingerprint))
        limit = ttl_ms / 1000 + self.settings.stalled_margin_seconds
        if age > limit:
            detail = (
                f"retry queue {queue} has held the same message for {age:.0f}s, more than its "
                f"TTL of {ttl_ms / 1000:g}s plus {self.settings.stalled_margin_seconds:g}s: the "
                "broker is not expiring it (restart the queue's node or move the message)"
            )
        else:
            detail = f"retry queue {queue} is moving again"
        return self._change(f"stalled:{queue}", age > limit, detail)
