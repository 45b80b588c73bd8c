"""Delayed delivery held by the broker alone: 28 levels of exchange and queue.

NServiceBus's design, which kombu 5.5 adopted for Celery. A delay of ``d`` whole seconds is
written in binary, most significant bit first, as the first 28 words of the routing key, and
the task's retry plan follows as the last word: 5 s with plan ``30s-1m`` is
``0.0.(…).0.1.0.1.30s-1m``. Level ``n`` looks at bit ``n``: a 1 routes the message into the
level's queue, whose TTL of 2^n s dead-letters it to the next level's exchange; a 0 passes it
on at once by an exchange-to-exchange binding. Each queue has one TTL, so nothing waits behind
a longer message at a queue's head, and any delay takes at most 28 hops::

    publish ──▶ [delay.27] ─bit 27 = 1─▶ (delay.27, ttl 2^27 s) ─┐
                    │ bit 27 = 0                                 │ expired
                    ▼                                            ▼
                [delay.26] ─bit 26 = 1─▶ (delay.26, ttl 2^26 s) ─▶ [delay.25] ─▶ …
                    ⋮
                [delay.0]  ─bit 0 = 1──▶ (delay.0, ttl 1 s) ──┐
                    │ bit 0 = 0                               ▼
                    └──────────────────────────────────▶ [delay.deliver] ─#.<plan>─▶
    (delay.land.<plan>, ttl 0, dead-letter key <plan>) ──▶ [tasks] ──#──▶ (main queue)

A landing queue per plan gives the task its plan back as its routing key (RabbitMQ rewrites a
key only when it dead-letters), so the worker sees the message as if it had been published
now. Its ``x-death`` then lists the levels it waited in and the landing queue, all
``expired``: attempts count rejections from the main queue only, so the first is attempt 1.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable
from datetime import datetime

import aio_pika
from aio_pika.abc import AbstractChannel

from warren_cron.declare import QueueType, durable_queue, queue_arguments
from warren_cron.errors import PlanError
from warren_cron.names import DELAY_LEVELS, Names
from warren_cron.names import MAX_DELAY_SECONDS as MAX_DELAY_SECONDS
from warren_cron.plan import RetryPlan

#: Namespaces whose levels this process declared, each with the plans whose landing queues
#: it declared: 57 declarations and 56 bindings are done once per process, not per enqueue
#: (they are durable and their arguments never change). A publish that finds them gone
#: forgets its namespace (``DelayDeclarer.forget``), so the next one declares it all again.
_DECLARED: dict[str, set[str]] = {}


def delay_key(seconds: int, plan_key: str) -> str:
    """Routing key of a task delayed ``seconds`` whose retry plan is ``plan_key``."""
    if not 0 <= seconds <= MAX_DELAY_SECONDS:
        raise PlanError(f"a delay of {seconds} s is outside 0..{MAX_DELAY_SECONDS} s (~8.5 years)")
    return ".".join(f"{seconds:0{DELAY_LEVELS}b}") + f".{plan_key}"


def held_seconds(key: str) -> int:
    """The delay a routing key of ``delay_key`` spells: what the levels add up to hold."""
    bits = key.split(".")[:DELAY_LEVELS]
    return sum(2**level for level, bit in enumerate(reversed(bits)) if bit == "1")


def seconds_until(due: datetime, now: datetime) -> int:
    """Whole seconds to hold a task due at ``due``: rounded up, so it never starts early."""
    return max(0, math.ceil((due - now).total_seconds()))


def level_pattern(level: int, bit: str) -> str:
    """Binding key matching keys whose bit ``level`` is ``bit`` (bit 27 is the first word)."""
    return "*." * (DELAY_LEVELS - 1 - level) + f"{bit}.#"


class DelayDeclarer:
    """Declares the 28 levels, and a landing queue per plan, once per process."""

    def __init__(self, channel: AbstractChannel, names: Names, queue_type: QueueType) -> None:
        self._channel = channel
        self._names = names
        self._queue_type = queue_type
        # Concurrent first enqueues wait for one declaration instead of racing through theirs.
        self._lock = asyncio.Lock()

    async def declare(self, plan: RetryPlan) -> None:
        """Make sure the levels and ``plan``'s landing queue exist before a delayed publish."""
        async with self._lock:
            landed = _DECLARED.get(self._names.namespace)
            if landed is None:
                await self._levels()
                landed = _DECLARED[self._names.namespace] = set()
            if plan.key not in landed:
                await self._landing(plan.key)
                landed.add(plan.key)

    def forget(self) -> None:
        """The levels were found missing (deleted while the process ran): declare them, and
        every landing queue, again at the next delayed publish."""
        _DECLARED.pop(self._names.namespace, None)

    async def _exchange(self, name: str) -> None:
        await self._channel.declare_exchange(name, aio_pika.ExchangeType.TOPIC, durable=True)

    async def _levels(self) -> None:
        names = self._names
        await self._exchange(names.delay_deliver_exchange)
        for level in range(DELAY_LEVELS):
            await self._exchange(names.delay_level(level))
        for level in range(DELAY_LEVELS):
            await self._level(level)

    async def _level(self, level: int) -> None:
        names = self._names
        below = names.delay_level(level - 1) if level else names.delay_deliver_exchange
        args = queue_arguments(self._queue_type, ttl_ms=2**level * 1000, dead_letter_exchange=below)
        queue = await durable_queue(self._channel, names.delay_level(level), args)
        await queue.bind(names.delay_level(level), level_pattern(level, "1"))
        here = await self._channel.get_exchange(names.delay_level(level), ensure=False)
        below_exchange = await self._channel.get_exchange(below, ensure=False)
        await below_exchange.bind(here, level_pattern(level, "0"))

    async def _landing(self, plan_key: str) -> None:
        names = self._names
        args = queue_arguments(
            self._queue_type,
            ttl_ms=0,
            dead_letter_exchange=names.tasks_exchange,
            dead_letter_key=plan_key,
        )
        queue = await durable_queue(self._channel, names.delay_landing(plan_key), args)
        await queue.bind(names.delay_deliver_exchange, f"#.{plan_key}")


def delay_objects(names: Names, plan_keys: Iterable[str]) -> tuple[list[str], list[str]]:
    """Queues and exchanges of the levels and of the landing queues of ``plan_keys``, for
    whoever deletes a namespace."""
    levels = [names.delay_level(level) for level in range(DELAY_LEVELS)]
    queues = levels + [names.delay_landing(key) for key in plan_keys]
    return queues, [*levels, names.delay_deliver_exchange]
