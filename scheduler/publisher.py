"""Publish fires: persistent, mandatory, confirmed; retried with backoff, never forgotten.

Fires go out in batches (``topology/broker/batch.py``): up to ``CHUNK`` messages a write and
``WINDOW`` confirms in flight, so a burst of thousands costs little more than the broker's
own work. Each fire has its own outcome: confirmed ones are logged, counted and written to
history as ``fired`` events; one that is nacked, returned, not confirmed in time or caught on
a closed channel is handed back to the caller, which publishes it again (on a fresh channel
when the old one died). Losing the connection means losing leadership: the fire is left to
the next leader, which finds it after the watermark and applies the schedule's catch-up
policy.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import structlog
from aio_pika.abc import AbstractChannel, AbstractConnection

from warren_cron.broker.batch import Sent, publish_batch
from warren_cron.broker.connect import publish_channel
from warren_cron.clock import utc_text, utcnow
from warren_cron.codec import Outgoing, fire_body, fire_outgoing
from warren_cron.declare import PlanDeclarer, QueueSettings, declare_topology
from warren_cron.errors import BROKER_TROUBLE, TopologyError
from warren_cron.history.publisher import HistoryPublisher
from warren_cron.names import Names
from warren_cron.runtime.metrics import FIRE_LAG, FIRES
from warren_cron.schedules.schedule import Schedule

log = structlog.get_logger("scheduler")
#: How long one publish may wait for its confirm before it counts as failed.
CONFIRM_TIMEOUT_SECONDS = 10.0
FIRST_BACKOFF_SECONDS = 0.2
MAX_BACKOFF_SECONDS = 30.0
#: Fires marshalled into one write, and fires whose confirms may be awaited at once.
CHUNK = 250
WINDOW = 1000
#: Errors after which the publish is tried again on a fresh channel; a queue found with other
#: arguments is retried too, as an operator may be deleting it to change its type.
PUBLISH_ERRORS: tuple[type[BaseException], ...] = (*BROKER_TROUBLE, TopologyError)
Fire = tuple[datetime, Schedule]
#: A chunk of fires, each one's outcome (None: confirmed), and when the confirms were in.
Settled = tuple[Sequence[Fire], list[BaseException | None], datetime]


async def wait_for_event(event: asyncio.Event, seconds: float | None) -> bool:
    """Wait until ``event`` is set or ``seconds`` pass; True if it was set."""
    try:
        await asyncio.wait_for(event.wait(), seconds)
    except TimeoutError:
        return False
    return True


def backoff(failures: int) -> float:
    """Seconds to wait before publishing a fire again after ``failures`` failed tries."""
    return min(FIRST_BACKOFF_SECONDS * 2.0 ** (failures - 1), MAX_BACKOFF_SECONDS)


class LeadershipLost(ConnectionError):
    """The connection that held the leader queue is gone: stop publishing at once."""


def fire_message(schedule: Schedule, fire: datetime, exchange: str) -> Outgoing:
    """The AMQP message of one fire (``warren_cron.codec``)."""
    run_id = schedule.run_id(fire)
    body = fire_body(schedule.spec, run_id, fire)
    return fire_outgoing(exchange, schedule.routing_key, body, run_id, schedule.name)


class FirePublisher:
    """Publishes fires on the leader's own connection, the only one it may publish on."""

    def __init__(
        self,
        connection: AbstractConnection,
        names: Names,
        settings: QueueSettings,
        history: HistoryPublisher,
    ) -> None:
        self._connection = connection
        self._history = history
        self._names = names
        self._settings = settings
        self._plans: PlanDeclarer | None = None
        self._counters: dict[str, Any] = {}
        self._lag = FIRE_LAG.labels(stage="publish")
        self.channel: AbstractChannel | None = None

    async def open(self) -> AbstractChannel:
        """Open a confirming channel and declare the topology; returns the channel."""
        channel = await publish_channel(self._connection)
        await declare_topology(channel, self._names, self._settings)
        self._plans = PlanDeclarer(channel, self._names, self._settings.queue_type)
        self.channel = channel
        return channel

    async def publish_many(self, fires: Sequence[Fire], tries: Mapping[str, int]) -> list[Fire]:
        """Publish each fire once; returns those not confirmed, to be published again.

        ``tries`` counts the failed publishes of a schedule's fire so far, for the log.
        """
        try:
            channel = await self._ready(fires)
        except PUBLISH_ERRORS as error:
            self._check_connection()
            self._not_confirmed(fires, tries, error)
            return list(fires)
        failed = await self._pipeline(channel, fires, tries)
        if failed:
            self._check_connection()
        return failed

    async def _pipeline(
        self, channel: AbstractChannel, fires: Sequence[Fire], tries: Mapping[str, int]
    ) -> list[Fire]:
        # Up to WINDOW fires in flight: the oldest chunk's confirms are awaited before more go.
        failed: list[Fire] = []
        pending: deque[tuple[Sequence[Fire], Sent, float]] = deque()
        settled: list[Settled] = []
        for start in range(0, len(fires), CHUNK):
            chunk = fires[start : start + CHUNK]
            try:
                sent = await self._send(channel, chunk)
            except PUBLISH_ERRORS as error:
                self._not_confirmed(chunk, tries, error)
                failed += chunk
                continue
            pending.append((chunk, sent, time.monotonic() + CONFIRM_TIMEOUT_SECONDS))
            if len(pending) * CHUNK >= WINDOW:
                settled.append(await _settled(*pending.popleft()))
        while pending:
            settled.append(await _settled(*pending.popleft()))
        # Told once every confirm is in: logging and recording 1,000 fires holds the loop
        # for some 25 ms, which would hold the next chunks' confirms unread (and their
        # fires later than the broker made them) and the chunks after them unsent.
        for chunk, outcomes, confirmed_at in settled:
            failed += self._tell(chunk, outcomes, confirmed_at, tries)
        return failed

    async def _ready(self, fires: Sequence[Fire]) -> AbstractChannel:
        if self.channel is None or self.channel.is_closed:
            await self.open()
        assert self.channel is not None and self._plans is not None
        # Whoever publishes declares the plan's queues first (cached per channel).
        for plan in {schedule.routing_key: schedule.plan for _, schedule in fires}.values():
            await self._plans.declare(plan)
        return self.channel

    async def _send(self, channel: AbstractChannel, chunk: Sequence[Fire]) -> Sent:
        exchange = self._names.tasks_exchange
        return await publish_batch(channel, [fire_message(s, f, exchange) for f, s in chunk])

    def _tell(
        self,
        chunk: Sequence[Fire],
        outcomes: list[BaseException | None],
        confirmed_at: datetime,
        tries: Mapping[str, int],
    ) -> list[Fire]:
        failed = []
        for fire, error in zip(chunk, outcomes, strict=True):
            if error is None:
                self._published(*fire, confirmed_at)
            else:
                self._not_confirmed([fire], tries, error)
                failed.append(fire)
        return failed

    def _published(self, fire: datetime, schedule: Schedule, confirmed_at: datetime) -> None:
        late = (confirmed_at - fire).total_seconds()  # how late the broker had it
        counter = self._counters.get(schedule.name)
        if counter is None:
            counter = self._counters[schedule.name] = FIRES.labels(schedule=schedule.name)
        counter.inc()
        self._lag.observe(late)
        run_id, scheduled_for = schedule.run_id(fire), utc_text(fire)
        log.info(
            "fire published",
            schedule=schedule.name,
            run_id=run_id,
            scheduled_for=scheduled_for,
            routing_key=schedule.routing_key,
            late_ms=round(late * 1000, 1),
        )
        self._history.emit(
            schedule.event(
                "fired", run_id, scheduled_for, at=confirmed_at, plan=schedule.routing_key
            )
        )

    def _not_confirmed(
        self, fires: Sequence[Fire], tries: Mapping[str, int], error: BaseException
    ) -> None:
        for fire, schedule in fires:
            log.warning(
                "fire not confirmed; publishing again",
                schedule=schedule.name,
                run_id=schedule.run_id(fire),
                attempt=tries.get(schedule.name, 0) + 1,
                error=f"{type(error).__name__}: {error}",
            )

    def _check_connection(self) -> None:
        if self._connection.is_closed:
            raise LeadershipLost("the leader's connection closed")


async def _settled(chunk: Sequence[Fire], sent: Sent, deadline: float) -> Settled:
    # One moment per chunk: its spelling is cached.
    return chunk, await sent.confirmed(deadline), utcnow()
