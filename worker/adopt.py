"""Adoption: a task published by hand gets a retry plan before it runs.

The scheduler and ``warren enqueue`` publish each task with its retry plan as the routing
key, and the broker's dead-lettering walks that plan. A message published another way (the old
runbook's ``rabbitmqadmin publish`` to the main queue through the default exchange, the
management UI's "Publish message", or the tasks exchange with any other key) has none. Before
it runs, the worker publishes a copy to the tasks exchange with the plan of its schedule (when
the worker knows that schedule) or the default plan, waits for the broker's confirm, and only
then acks the original. A worker that dies in between leaves the original in the queue, to be
adopted again: the copy carries the same run id, so a repeat can be told apart.

Nothing is copied that cannot run or cannot be sent: a body above ``CRON_MAX_BODY_BYTES`` or
no envelope at all is left to the attempt, which refuses it at once; a copy whose properties
and headers would not fit in one frame (the broker closes the connection of such a publish)
fails as ``too-large-to-adopt``, its record without the headers that made it so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aio_pika
import structlog
from aio_pika.abc import AbstractChannel, AbstractExchange
from pamqp.commands import Basic
from pamqp.header import ContentHeader

from warren_cron.broker.underlay import max_body, underlay
from warren_cron.codec import decode, persistent_message, task_headers
from warren_cron.declare import PlanDeclarer
from warren_cron.envelope import Envelope
from warren_cron.errors import MessageDecodeError, WarrenError
from warren_cron.headers import H_REDELIVERED, X_DEATH, attempt_number
from warren_cron.names import FINAL_KEY, Names
from warren_cron.plan import RetryPlan, is_retry_key, task_plan
from warren_cron.records import Failure
from warren_cron.schedules.load import schedule_plans
from warren_cron.worker.delivery import Delivery
from warren_cron.worker.fate import Settler
from warren_cron.worker.limits import body_too_large
from warren_cron.worker.settings import WorkerSettings

log = structlog.get_logger("worker")
#: How long the copy may wait for its confirm; past it the original is left to the broker.
CONFIRM_TIMEOUT_SECONDS = 10.0
#: The reason of a hand-published task whose copy would be too large to publish.
TOO_LARGE = "too-large-to-adopt"


class CopyTooLarge(WarrenError):
    """The planned copy's properties and headers would not fit in one frame."""


@dataclass(frozen=True, slots=True)
class Headless:
    """A message as its failure record copies it, without its headers."""

    body: bytes
    routing_key: str | None
    properties: Basic.Properties
    headers: Mapping[str, Any] = field(default_factory=dict)


def needs_plan(routing_key: str) -> bool:
    """True for a message published without a retry plan as its routing key."""
    return routing_key != FINAL_KEY and not is_retry_key(routing_key)


def adopted_message(message: Delivery, envelope: Envelope) -> aio_pika.Message:
    """The copy: same body, properties and headers (a sender's schedule header wins), the
    envelope's run id, and no death history (one a client sent would count attempts that never
    ran)."""
    kept = {k: v for k, v in message.headers.items() if k != X_DEATH}
    if message.redelivered:
        # A worker died holding the original, maybe after publishing a copy: this one may be
        # a repeat, and its first attempt says so as a redelivery would.
        kept[H_REDELIVERED] = True
    # The envelope's run id is the one every log line uses: the record and replays use it too.
    headers = task_headers(envelope.run_id, envelope.schedule, kept)
    return persistent_message(message.body, headers, message.properties)


def too_large(copy: aio_pika.Message, limit: int) -> str | None:
    """Why ``copy`` cannot be published when its content header exceeds ``limit`` bytes (one
    frame's payload), else None."""
    size = len(ContentHeader(0, len(copy.body), copy.properties).marshal())
    if size <= limit:
        return None
    return (
        f"a copy with a retry plan would carry {size} bytes of properties and headers, above "
        f"the {limit} one frame holds (the broker's frame_max less 8): its headers are left "
        "out of this record; replay it, or publish the task again with smaller headers "
        "(the envelope in the body is all it needs), e.g. with warren enqueue"
    )


class Adopter:
    """Publishes confirmed, planned copies of hand-published tasks."""

    def __init__(
        self,
        channel: AbstractChannel,
        exchange: AbstractExchange,
        settings: WorkerSettings,
        settler: Settler,
    ) -> None:
        self._channel = channel
        self._exchange = exchange
        self._settler = settler
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

    async def take(self, message: Delivery) -> bool:
        """Adopt a hand-published task, or fail it when it cannot be; False when the attempt
        is to refuse it as it is (a body too large, or no envelope)."""
        if body_too_large(message.body, self._settings.max_body_bytes) is not None:
            return False
        try:
            envelope = decode(message)
        except MessageDecodeError:
            return False
        await self._adopt_or_fail(message, envelope)
        return True

    async def _adopt_or_fail(self, message: Delivery, envelope: Envelope) -> None:
        try:
            plan = await self.adopt(message, envelope)
        except CopyTooLarge as error:
            await self._fail_too_large(message, envelope, str(error))
            return
        except Exception as error:
            # Its key routes nowhere in the DLX, so the broker moves it to the failed queue,
            # where ``warren failed replay`` gives it a plan: lost neither way.
            log.warning(
                "not adopted; to the failed queue", run_id=envelope.run_id, error=repr(error)
            )
            await message.reject()
            return
        await message.ack()
        log.info("adopted", run_id=envelope.run_id, routing_key=message.routing_key, plan=plan.key)

    async def adopt(self, message: Delivery, envelope: Envelope) -> RetryPlan:
        """Publish the planned copy and wait for its confirm; the caller then acks.
        ``CopyTooLarge`` when the copy would not fit in one frame: nothing is published."""
        copy = adopted_message(message, envelope)
        problem = too_large(copy, max_body(await underlay(self._channel)))
        if problem is not None:
            raise CopyTooLarge(problem)
        plan = self.plan_for(envelope)
        await self._plans.declare(plan)
        await self._exchange.publish(
            copy, plan.key, mandatory=True, timeout=CONFIRM_TIMEOUT_SECONDS
        )
        return plan

    async def _fail_too_large(self, message: Delivery, envelope: Envelope, error: str) -> None:
        # Its own headers are what does not fit: a record keeping them would not fit either.
        log.warning("not adopted: too large; to the failed queue", run_id=envelope.run_id)
        attempt = attempt_number(message.headers, Names(self._settings.namespace).main_queue)
        recorded = Headless(message.body, message.routing_key, message.properties)
        await self._settler.fail(
            message, Failure(TOO_LARGE, error, attempt), envelope.run_id, recorded
        )
