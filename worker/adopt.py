"""Adoption: a task published by hand gets a retry plan before it runs.

The scheduler and ``warren enqueue`` publish each task with its retry plan as the routing key, and
the broker's dead-lettering walks that plan. A message published another way (the old
runbook's ``rabbitmqadmin publish`` to the main queue through the default exchange, the
management UI's "Publish message", or the tasks exchange with any other key) has none. Before
it runs, the worker publishes a copy to the tasks exchange with the plan of its schedule (when
the worker knows that schedule) or the default plan, waits for the broker's confirm, and only
then acks the original. A worker that dies in between leaves the original in the queue, to be
adopted again: the copy carries the same run id, so a repeat can be told apart.
"""

from __future__ import annotations

from typing import Any

import aio_pika
import structlog
from aio_pika.abc import AbstractChannel, AbstractExchange

from warren_cron.declare import PlanDeclarer
from warren_cron.envelope import Envelope
from warren_cron.errors import WarrenError
from warren_cron.headers import H_REDELIVERED, X_DEATH
from warren_cron.names import FINAL_KEY, Names
from warren_cron.plan import RetryPlan, is_retry_key, task_plan
from warren_cron.records import kept_properties, persistent_message
from warren_cron.schedules.load import schedule_plans
from warren_cron.worker.delivery import Delivery
from warren_cron.worker.settings import WorkerSettings

log = structlog.get_logger("worker")
#: How long the copy may wait for its confirm; past it the original is left to the broker.
CONFIRM_TIMEOUT_SECONDS = 10.0


def needs_plan(routing_key: str) -> bool:
    """True for a message published without a retry plan as its routing key."""
    return routing_key != FINAL_KEY and not is_retry_key(routing_key)


def adopted_message(message: Delivery, envelope: Envelope) -> aio_pika.Message:
    """The copy: same body, properties and headers, the envelope's run id as ``message_id``,
    and no death history (one a client sent would count attempts that never ran)."""
    kept = {k: v for k, v in message.headers.items() if k != X_DEATH}
    headers: dict[str, Any] = envelope.headers() | kept  # a header the sender set wins
    if message.redelivered:
        # A worker died holding the original, maybe after publishing a copy: this one may be
        # a repeat, and its first attempt says so as a redelivery would.
        headers[H_REDELIVERED] = True
    # The envelope's run id is the one every log line uses: the record and replays use it too.
    properties = kept_properties(message.properties) | {"message_id": envelope.run_id}
    return persistent_message(message.body, headers, properties)


class Adopter:
    """Publishes confirmed, planned copies of hand-published tasks."""

    def __init__(
        self, channel: AbstractChannel, exchange: AbstractExchange, settings: WorkerSettings
    ) -> None:
        self._exchange = exchange
        self._plans = PlanDeclarer(channel, Names(settings.namespace), settings.queue_type)
        self._settings = settings
        self._default = settings.default_plan()
        self._schedules: dict[str, RetryPlan] | None = None

    def plan_for(self, envelope: Envelope) -> RetryPlan:
        """The schedule's own plan when this worker knows the schedule, else the default."""
        if self._schedules is None:
            self._schedules = self._load_schedules()
        return task_plan(envelope.schedule, default=self._default, schedule_plans=self._schedules)

    def _load_schedules(self) -> dict[str, RetryPlan]:
        # Read when first needed: a worker never refuses to start over a file only adoption
        # would use, and a broken one costs the schedule's plan, not the task.
        try:
            return schedule_plans(self._settings) or {}
        except WarrenError as error:
            log.warning(
                "schedules file unreadable; adopting with the default plan", error=str(error)
            )
            return {}

    async def adopt(self, message: Delivery, envelope: Envelope) -> RetryPlan:
        """Publish the planned copy and wait for its confirm; the caller then acks."""
        plan = self.plan_for(envelope)
        await self._plans.declare(plan)
        await self._exchange.publish(
            adopted_message(message, envelope),
            plan.key,
            mandatory=True,
            timeout=CONFIRM_TIMEOUT_SECONDS,
        )
        return plan
