"""Publish fires: persistent, mandatory, confirmed; retried with backoff, never forgotten.

A fire whose publish is not confirmed (nacked, returned, timed out, channel closed) is
retried on the same connection, with a fresh channel when the old one died. Losing the
connection means losing leadership: the fire is left to the next leader, which finds it
after the watermark and applies the schedule's catch-up policy.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

import structlog
from aio_pika.abc import AbstractChannel, AbstractConnection
from aiormq.exceptions import AMQPError, ChannelInvalidStateError

from scheduler.schedules import Schedule
from scheduler.timing import utc_text
from topology.amqp import CONNECTION_ERRORS
from topology.declare import QueueType, TopologyError, declare_topology
from topology.envelope import utcnow
from topology.metrics import FIRE_LAG, FIRES
from topology.names import Names
from topology.publish import TaskPublisher

log = structlog.get_logger("scheduler")
#: How long one publish may wait for its confirm before it counts as failed.
CONFIRM_TIMEOUT_SECONDS = 10.0
FIRST_BACKOFF_SECONDS = 0.2
MAX_BACKOFF_SECONDS = 30.0
#: Errors after which the publish is tried again on a fresh channel.
PUBLISH_ERRORS: tuple[type[BaseException], ...] = (
    AMQPError,
    ChannelInvalidStateError,
    TopologyError,
    *CONNECTION_ERRORS,
)


async def wait_for_event(event: asyncio.Event, seconds: float | None) -> bool:
    """Wait until ``event`` is set or ``seconds`` pass; True if it was set."""
    try:
        await asyncio.wait_for(event.wait(), seconds)
    except TimeoutError:
        return False
    return True


class LeadershipLost(ConnectionError):
    """The connection that held the leader queue is gone: stop publishing at once."""


class FirePublisher:
    """Publishes fires on the leader's own connection, the only one it may publish on."""

    def __init__(self, connection: AbstractConnection, names: Names, queue_type: QueueType) -> None:
        self._connection = connection
        self._names = names
        self._queue_type = queue_type
        self._tasks: TaskPublisher | None = None
        self.channel: AbstractChannel | None = None

    async def open(self) -> AbstractChannel:
        """Open a confirming channel and declare the topology; returns the channel."""
        channel = await self._connection.channel(publisher_confirms=True, on_return_raises=True)
        topology = await declare_topology(channel, self._names, self._queue_type, 10)
        self._tasks = TaskPublisher(channel, topology.tasks, self._names, self._queue_type)
        self.channel = channel
        return channel

    async def publish(self, schedule: Schedule, fire: datetime, stop: asyncio.Event) -> bool:
        """Publish one fire until confirmed; False only when ``stop`` is set first."""
        delay = FIRST_BACKOFF_SECONDS
        attempt = 1
        while not await self._try(schedule, fire, attempt):
            self._check_connection()
            if await wait_for_event(stop, delay):
                return False
            delay = min(delay * 2, MAX_BACKOFF_SECONDS)
            attempt += 1
        return True

    async def _try(self, schedule: Schedule, fire: datetime, attempt: int) -> bool:
        envelope = schedule.envelope(fire)
        try:
            if self.channel is None or self.channel.is_closed:
                await self.open()
            assert self._tasks is not None
            async with asyncio.timeout(CONFIRM_TIMEOUT_SECONDS):
                await self._tasks.publish(envelope, schedule.plan)
        except PUBLISH_ERRORS as error:
            self._check_connection()
            log.warning(
                "fire not confirmed; publishing again",
                schedule=schedule.name,
                run_id=envelope.run_id,
                attempt=attempt,
                error=f"{type(error).__name__}: {error}",
            )
            return False
        late = (utcnow() - fire).total_seconds()
        FIRES.labels(schedule=schedule.name).inc()
        FIRE_LAG.labels(stage="publish").observe(late)
        log.info(
            "fire published",
            schedule=schedule.name,
            run_id=envelope.run_id,
            scheduled_for=utc_text(fire),
            routing_key=schedule.plan.key,
            late_ms=round(late * 1000, 1),
        )
        return True

    def _check_connection(self) -> None:
        if self._connection.is_closed:
            raise LeadershipLost("the leader's connection closed")
