"""Publish task envelopes: plan declared first, persistent, mandatory, confirmed; now, or
through the delay levels (``topology/delay.py``)."""

from __future__ import annotations

from aio_pika.abc import AbstractChannel, AbstractExchange
from aiormq.exceptions import ChannelNotFoundEntity, PublishError

from warren_cron.clock import utcnow
from warren_cron.codec import task_message
from warren_cron.declare import PlanDeclarer, QueueType
from warren_cron.delay import DelayDeclarer, delay_key, seconds_until
from warren_cron.envelope import Envelope
from warren_cron.errors import BrokerError
from warren_cron.names import Names
from warren_cron.plan import RetryPlan


class TaskPublisher:
    """Publishes envelopes to the tasks exchange with their retry plan as routing key."""

    def __init__(
        self,
        channel: AbstractChannel,
        exchange: AbstractExchange,
        names: Names,
        queue_type: QueueType,
        delays: DelayDeclarer | None = None,
    ) -> None:
        self._channel = channel
        self._exchange = exchange
        self._names = names
        self._plans = PlanDeclarer(channel, names, queue_type)
        self._delays = delays or DelayDeclarer(channel, names, queue_type)
        self._levels: AbstractExchange | None = None

    async def publish(self, envelope: Envelope, plan: RetryPlan, delayed: bool = False) -> None:
        """Publish once, returning only after the broker confirmed it; raise otherwise.

        ``delayed``: the delay levels hold the task until its ``scheduled_for``.
        """
        await self.prepare(plan, delayed)
        await self.send(envelope, plan, delayed)

    async def prepare(self, plan: RetryPlan, delayed: bool = False) -> None:
        """Declare what a task needs before it is sent: its plan's queues, the delay levels."""
        await self._plans.declare(plan)
        if delayed:
            await self._delays.declare(plan)

    async def send(self, envelope: Envelope, plan: RetryPlan, delayed: bool = False) -> None:
        """Publish the task, ``prepare``d before; return once the broker confirmed it."""
        # Counted after the declarations: the first ones of a process take a while.
        hold = seconds_until(envelope.scheduled_for, utcnow()) if delayed else 0
        if hold == 0:
            await self._exchange.publish(task_message(envelope), plan.key, mandatory=True)
            return
        if self._levels is None:
            self._levels = await self._channel.get_exchange(
                self._names.delay_exchange, ensure=False
            )
        try:
            await self._levels.publish(
                task_message(envelope), delay_key(hold, plan.key), mandatory=True
            )
        except (ChannelNotFoundEntity, PublishError) as error:
            # No exchange, or no queue where a level routes the task: the levels were deleted.
            self._delays.forget()
            raise BrokerError(
                f"the delay levels of namespace {self._names.namespace} are missing on the "
                f"broker ({error}); they are declared again at the next delayed enqueue: retry"
            ) from error
