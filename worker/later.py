"""Publish a task again through the delay levels (``topology/delay.py``), then ack it.

Used where a retry queue's one TTL does not fit: a retry at the time the endpoint asked for
(``Retry-After``), and a deferral that spends no attempt. The copy keeps the body, properties
and headers, but not the broker's ``x-death``: the attempts spent so far ride in
``cron-spent`` instead (RabbitMQ 4 drops an ``x-death`` a client sets, 3.x would add to it).
The original is acked only once the broker confirmed the copy; a copy that cannot be
published leaves the caller to NACK the original into its retry plan, so nothing is lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aio_pika
import structlog
from aio_pika.abc import AbstractChannel, AbstractExchange

from warren_cron.codec import kept_properties, persistent_message
from warren_cron.declare import QueueType
from warren_cron.delay import DelayDeclarer, delay_key
from warren_cron.errors import BROKER_TROUBLE, FAILED_OR_CUT, being_cancelled
from warren_cron.headers import H_SPENT, X_DEATH
from warren_cron.names import Names
from warren_cron.plan import RetryPlan
from warren_cron.worker.delivery import Delivery

log = structlog.get_logger("worker")
#: How long the copy may wait for its confirm; past it the original is NACKed instead.
CONFIRM_TIMEOUT_SECONDS = 10.0
#: Tries of the delay levels' declaration on a channel the broker closed under it, the wait
#: for that channel to be reopened, and the pause before the next try.
DECLARE_TRIES = 3
REOPEN_WAIT_SECONDS = 5.0
DECLARE_RETRY_SECONDS = 0.1


def later_message(message: Delivery, spent: int) -> aio_pika.Message:
    """The copy of ``message`` that has spent ``spent`` attempts, without ``x-death``."""
    headers: dict[str, Any] = {k: v for k, v in message.headers.items() if k != X_DEATH}
    headers[H_SPENT] = spent
    return persistent_message(message.body, headers, kept_properties(message.properties))


class Later:
    """Sends confirmed copies of tasks into the delay levels."""

    def __init__(
        self,
        channel: AbstractChannel,
        names: Names,
        queue_type: QueueType,
        restored: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._channel = channel
        self._restored = restored  # a robust channel's ``ready``: it reopens when closed
        self._names = names
        self._delays = DelayDeclarer(channel, names, queue_type)
        self._levels: AbstractExchange | None = None

    async def send(
        self, message: Delivery, hold: int, plan_key: str, spent: int, run_id: str | None
    ) -> bool:
        """Publish the copy, due in ``hold`` s with plan ``plan_key``; False if not confirmed."""
        try:
            await self._publish(later_message(message, spent), hold, plan_key)
        except FAILED_OR_CUT as error:
            if being_cancelled():  # aiormq's own CancelledError (a stuck drop) is a failure
                raise
            self._delays.forget()  # the levels may have been deleted: declare them again
            log.warning("delayed copy not confirmed", run_id=run_id, error=repr(error))
            return False
        return True

    async def _publish(self, copy: aio_pika.Message, hold: int, plan_key: str) -> None:
        await self._declared(RetryPlan.from_key(plan_key))
        if self._levels is None:
            self._levels = await self._channel.get_exchange(
                self._names.delay_exchange, ensure=False
            )
        key = delay_key(hold, plan_key)
        await self._levels.publish(copy, key, mandatory=True, timeout=CONFIRM_TIMEOUT_SECONDS)

    async def _declared(self, plan: RetryPlan) -> None:
        """Declare the levels of ``plan``; again on the reopened channel when the broker
        closed it under the declaration (nothing is published yet: a second try doubles
        nothing). RabbitMQ 3.10 refuses a declaration of a durable queue another channel is
        declaring at that moment (NOT_FOUND, its "home node ... down or inaccessible")."""
        for tries_left in reversed(range(DECLARE_TRIES)):
            try:
                await self._delays.declare(plan)
            except BROKER_TROUBLE:
                if not tries_left or self._restored is None:
                    raise
                self._delays.forget()
            else:
                return
            await asyncio.wait_for(self._restored(), REOPEN_WAIT_SECONDS)
            await asyncio.sleep(DECLARE_RETRY_SECONDS)  # ready() can return before the reopen
