"""Replay failed tasks: back to the tasks exchange with a fresh retry plan, nothing lost.

Each matching record is published (plan declared first, persistent, mandatory, confirmed)
before it is acked from the failed queue. Up to ``WINDOW`` records are in flight at once:
reading the next record does not wait for the confirm of the last, and each record is acked
when its own confirm arrives. If the connection drops, unacked records go back to
the failed queue and the run resumes once the broker answers: a record whose publish was
confirmed but whose ack was lost is acked on the next pass without a second publish. One
whose publish was sent but never confirmed is sent again (the broker may have lost it) and
the replay says so, by run id and in its count of ``resent``: its first copy may have reached
the queue, so that task may run twice. At worst a task is in both queues; its run id tells
the copies apart.

A replay strips the broker's ``x-death`` (RabbitMQ 4.x ignores one a client sends), keeps the
record's history under ``cron-history`` and counts replays in ``cron-replays``. The worker
then counts attempts from 1 again, and the task runs its whole plan once more. Each record
moved is written to the run history as a ``replayed`` event (a dry run writes nothing); the
history never holds a replay up.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial

import structlog
from aio_pika.abc import AbstractExchange, AbstractIncomingMessage, AbstractRobustConnection
from aiormq.exceptions import ChannelInvalidStateError, DeliveryError

from warren_cron.broker.connect import connect, publish_channel
from warren_cron.broker.held import Held, holding
from warren_cron.broker.inspect import fingerprint
from warren_cron.clock import utcnow
from warren_cron.declare import PlanDeclarer, declare_topology
from warren_cron.errors import BROKER_TROUBLE, BrokerUnavailable
from warren_cron.failed.replay_message import replay_message
from warren_cron.failed.select import RecordFilter
from warren_cron.failed.tally import Progress, Tally
from warren_cron.failed.window import Window
from warren_cron.history.events import record_event
from warren_cron.history.publisher import HistoryPublisher, publishing
from warren_cron.names import Names
from warren_cron.plan import RetryPlan
from warren_cron.records import FailedRecord, read_record
from warren_cron.runtime.settings import CronSettings

log = structlog.get_logger("replay")
PUBLISH_TIMEOUT_SECONDS = 30.0
#: Records published and waiting for their confirm at any one time.
WINDOW = 200


@dataclass
class ReplayOptions:
    """How a replay runs; ``plan_for`` picks each record's plan (see ``plan.task_plan``)."""

    select: RecordFilter
    plan_for: Callable[[FailedRecord], RetryPlan]
    limit: int | None = None
    rate: float | None = None
    dry_run: bool = False
    reconnect_seconds: float = 60.0
    progress: Progress | None = None
    #: Who replays and why, for the history (default: ``user@host`` of this process).
    by: str | None = None
    reason: str | None = None


class Replayer:
    """Moves matching failed records back to the tasks exchange, resuming after broker trouble."""

    def __init__(self, settings: CronSettings, options: ReplayOptions) -> None:
        self.settings = settings
        self.names = Names(settings.namespace)
        # Records that fail during the run (a replayed task failing again) are not replayed
        # a second time by a later pass.
        self.options = replace(options, select=replace(options.select, until=utcnow()))
        self.tally = Tally()
        #: Records whose copy was confirmed, with the plan it went out on and when.
        self._published: dict[str, tuple[str, datetime]] = {}
        self._history: HistoryPublisher | None = None
        self._refused: set[str] = set()
        #: Records whose copy went out with no answer before the connection was lost.
        self._unsure: set[str] = set()
        self._resent: set[str] = set()
        #: Records by content: read, matched and moved, each counted once however often read.
        self._scanned: set[str] = set()
        self._matched: set[str] = set()
        self._moved_keys: set[str] = set()
        self._total = 0
        self._next_publish = 0.0
        self._connected = False

    async def run(self) -> Tally:
        """Replay until every matching record was handled or the broker stays away too long."""
        while True:
            try:
                await self._session()
            except BROKER_TROUBLE as error:
                if not self._connected:
                    raise  # never reached: a wrong URL, not a restart to wait out
                if not await self._await_broker(error):
                    return self.tally
            else:
                return self.tally

    async def _await_broker(self, error: BaseException) -> bool:
        log.warning(
            "broker connection lost; resuming when it answers",
            error=f"{type(error).__name__}: {error}",
            wait_s=self.options.reconnect_seconds,
        )
        deadline = time.monotonic() + self.options.reconnect_seconds
        while time.monotonic() < deadline:
            await asyncio.sleep(1.0)
            try:
                connection = await connect(self.settings, "warren-replay-probe")
            except BrokerUnavailable:
                continue
            await connection.close()
            self.tally.reconnects += 1
            return True
        self.tally.errors.append(f"broker unreachable for {self.options.reconnect_seconds}s")
        return False

    def _done(self, in_flight: int) -> bool:
        limit = self.options.limit
        return limit is not None and self.tally.moved + self.tally.failed + in_flight >= limit

    async def _session(self) -> None:
        # Losing the broker ends the session: _await_broker says so and opens another.
        connection = await connect(self.settings, "warren-replay", log_outages=False)
        self._connected = True
        async with connection, self._recording(connection) as self._history:
            exchange, plans = await self._publisher(connection)
            async with (
                holding(connection, self.names.failed_queue) as held,
                Window(WINDOW) as moves,
            ):
                self._total = max(self._total, held.ready_at_start)
                async for message in held.messages():
                    if self._done(len(moves)):
                        break  # this one is held and goes back in place
                    await self._one(held, message, exchange, plans, moves)
                    if self.options.progress is not None:
                        done = len(self._scanned)
                        self.options.progress(done, max(done, self._total))
                # Every move ends (copy confirmed, record acked) before the channel closes and
                # returns what was not acked.
                await moves.drain()

    def _recording(
        self, connection: AbstractRobustConnection
    ) -> AbstractAsyncContextManager[HistoryPublisher | None]:
        if self.options.dry_run:
            return nullcontext(None)
        return publishing(connection, self.names, self.settings, "replay")

    async def _publisher(
        self, connection: AbstractRobustConnection
    ) -> tuple[AbstractExchange, PlanDeclarer]:
        channel = await publish_channel(connection)
        settings = self.settings
        topology = await declare_topology(channel, self.names, settings)
        return topology.tasks, PlanDeclarer(channel, self.names, settings.queue_type)

    async def _one(
        self,
        held: Held,
        message: AbstractIncomingMessage,
        exchange: AbstractExchange,
        plans: PlanDeclarer,
        moves: Window,
    ) -> None:
        record = read_record(message, self.names.main_queue)
        key = fingerprint(message)
        self._scanned.add(key)
        self.tally.scanned = len(self._scanned)
        if not self.options.select.matches(record) or key in self._refused:
            return  # left unacked: it goes back in place when the channel closes
        self._matched.add(key)
        self.tally.matched = len(self._matched)
        if self.options.dry_run:
            self.tally.moved = len(self._matched)
        elif key in self._published:
            await held.ack(message)  # confirmed on an earlier pass whose ack was lost
            self._moved(record, key)
        else:
            if key in self._unsure:
                self._resend(record, key)
            await self._pace()
            plan = self.options.plan_for(record)
            await plans.declare(plan)
            await moves.start(partial(self._move, held, message, record, key, exchange, plan))

    async def _move(
        self,
        held: Held,
        message: AbstractIncomingMessage,
        record: FailedRecord,
        key: str,
        exchange: AbstractExchange,
        plan: RetryPlan,
    ) -> None:
        if await self._publish(record, key, exchange, plan):
            await held.ack(message)
            self._moved(record, key)

    def _moved(self, record: FailedRecord, key: str) -> None:
        if key in self._moved_keys:
            return  # a record acked before, back from a broker restart: moved once
        self._moved_keys.add(key)
        self.tally.moved = len(self._moved_keys)
        plan, at = self._published[key]
        if self._history is not None:
            replay, options = record.replays + 1, self.options
            self._history.emit(
                record_event(
                    "replayed",
                    record,
                    at=at,
                    by=options.by,
                    plan=plan,
                    replay=replay,
                    reason=options.reason,
                )
            )

    async def _publish(
        self, record: FailedRecord, key: str, exchange: AbstractExchange, plan: RetryPlan
    ) -> bool:
        # The replay's time is that of the publish: the task may run before the ack.
        at = utcnow()
        # Unsure until the broker answers: a cut (or a cancel) past this point may have left
        # the copy in the queue, and a next pass sending it again says the task may run twice.
        self._unsure.add(key)
        try:
            await exchange.publish(
                replay_message(record), plan.key, mandatory=True, timeout=PUBLISH_TIMEOUT_SECONDS
            )
        except DeliveryError as error:
            self._unsure.discard(key)
            self._refuse(record, key, f"not confirmed: {error!r}")
            return False
        except ChannelInvalidStateError:
            self._unsure.discard(key)  # aio-pika raises it before a frame is written: never sent
            raise
        self._unsure.discard(key)
        self._published[key] = (plan.key, at)
        return True

    def _resend(self, record: FailedRecord, key: str) -> None:
        if key in self._resent:
            return  # said on an earlier pass
        self._resent.add(key)
        self.tally.resent += 1
        log.warning(
            "record sent again: its first copy went out unconfirmed when the broker went away,"
            " so the task may run twice",
            run_id=record.run_id,
        )

    def _refuse(self, record: FailedRecord, key: str, why: str) -> None:
        self._refused.add(key)
        self.tally.failed += 1
        self.tally.errors.append(f"{record.run_id}: {why}")
        log.warning("record not replayed; it stays in the failed queue", run_id=record.run_id)

    async def _pace(self) -> None:
        if not self.options.rate:
            return
        now = time.monotonic()
        if self._next_publish > now:
            await asyncio.sleep(self._next_publish - now)
        self._next_publish = max(now, self._next_publish) + 1.0 / self.options.rate
