"""Publish task envelopes: plan declared first, persistent, mandatory, confirmed."""

from __future__ import annotations

from datetime import datetime

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractExchange

from topology.declare import PlanDeclarer, QueueType
from topology.envelope import CONTENT_TYPE, Envelope
from topology.names import Names
from topology.plan import RetryPlan


def task_message(envelope: Envelope, now: datetime | None = None) -> aio_pika.Message:
    """The AMQP message of an envelope: run id as ``message_id``, persistent, JSON."""
    return aio_pika.Message(
        envelope.encode(),
        message_id=envelope.run_id,
        content_type=CONTENT_TYPE,
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        headers=envelope.headers(),
        timestamp=now,
    )


class TaskPublisher:
    """Publishes envelopes to the tasks exchange with their retry plan as routing key."""

    def __init__(
        self,
        channel: AbstractChannel,
        exchange: AbstractExchange,
        names: Names,
        queue_type: QueueType,
    ) -> None:
        self._exchange = exchange
        self._plans = PlanDeclarer(channel, names, queue_type)

    async def publish(self, envelope: Envelope, plan: RetryPlan) -> None:
        """Publish once, returning only after the broker confirmed it; raise otherwise."""
        await self._plans.declare(plan)
        await self._exchange.publish(task_message(envelope), plan.key, mandatory=True)
