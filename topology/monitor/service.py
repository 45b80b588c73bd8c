"""The monitor: one ERROR line and a queued alert per failed task, the queue checks, and the
status fold of the history with its "no success" checks.

It consumes the copy queue ``<ns>_monitor``, never the failed queue, so the failed queue keeps
every record for replay. A copy is acked once its line is logged and its alert queued in
memory; sending alerts happens apart from consuming, so a webhook that is down never holds
up monitoring.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AsyncExitStack

import aiohttp
import structlog
from aio_pika.abc import AbstractIncomingMessage, AbstractRobustConnection

from warren_cron.broker.connect import connect
from warren_cron.clock import utcnow
from warren_cron.declare import declare_topology
from warren_cron.errors import BROKER_TROUBLE, being_cancelled, cuts_logged
from warren_cron.monitor.alerts import AlertSender, Condition
from warren_cron.monitor.autopause import FailurePauser
from warren_cron.monitor.configured import configured_targets
from warren_cron.monitor.mount import Dashboard
from warren_cron.monitor.scheduler_down import SchedulerWatch
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.monitor.silence import SuccessWatch
from warren_cron.monitor.status_keeper import StatusKeeper
from warren_cron.monitor.watch import QueueWatch
from warren_cron.names import Names
from warren_cron.plan import RetryPlan
from warren_cron.records import FailedRecord, read_record
from warren_cron.schedules.schedule import Schedule

log = structlog.get_logger("monitor")
#: Copies held at once; each is handled in microseconds, so a burst drains quickly.
PREFETCH = 200
#: The status fold is stored at least this often while it changes (more often with a shorter
#: CRON_MONITOR_INTERVAL_SECONDS): warren status folds only the events after it.
SAVE_SECONDS = 5.0


class Monitor:
    """Watches failed tasks and queues until ``stop()``."""

    def __init__(
        self,
        settings: MonitorSettings,
        plans: Iterable[RetryPlan] = (),
        *,
        schedules: Sequence[Schedule] = (),
        clock: Callable[[], float] = time.monotonic,
        retry_base_seconds: float = 1.0,
    ) -> None:
        self.settings = settings
        self.names = Names(settings.namespace)
        self.ready = asyncio.Event()
        #: Queue checks completed: a test or a health probe sees the watch advance.
        self.checks = 0
        plans = [settings.default_plan(), *plans, *(s.plan for s in schedules)]
        self.watch = QueueWatch(settings, plans, clock)
        self.keeper = StatusKeeper(settings, [s.name for s in schedules])
        self.silence = SuccessWatch(schedules, self.keeper)
        self.schedulers = SchedulerWatch(settings, clock)
        self.pauser = FailurePauser(settings, schedules)
        #: The web page (CRON_DASHBOARD_PORT), when one is asked for.
        self.dashboard: Dashboard | None = None
        if settings.dashboard_port:
            watched = self.watch
            self.dashboard = Dashboard(
                settings, schedules, self.keeper, lambda: watched.plan_keys, self.schedulers
            )
        #: One sender per configured alert target (none: alerts are only logged).
        self.senders: list[AlertSender] = []
        self._retry_base = retry_base_seconds
        self._stop = asyncio.Event()
        self._connection: AbstractRobustConnection | None = None

    def connected(self) -> bool:
        """True while the monitor's broker connection is open."""
        return self._connection is not None and not self._connection.is_closed

    def stop(self) -> None:
        """Ask the monitor to stop; pending alerts get one last try."""
        self._stop.set()

    async def run(self) -> None:
        """Connect, consume the monitor queue and poll the queues until stopped."""
        async with AsyncExitStack() as stack:
            connection = await connect(self.settings, "warren-monitor")
            self._connection = connection
            stack.push_async_callback(connection.close)
            # The alert webhook is the operator's own: a proxy in the environment is honoured.
            session = aiohttp.ClientSession(trust_env=True)
            stack.push_async_callback(session.close)
            self.senders = [
                AlertSender(self.settings, session, target, retry_base_seconds=self._retry_base)
                for target in configured_targets(self.settings)
            ]
            with self._stopping_anyway():
                await self._serve(connection)
        log.info("monitor stopped")

    @contextlib.contextmanager
    def _stopping_anyway(self) -> Iterator[None]:
        """Once stopped, a ``CancelledError`` that is no cancel of this task ends the block
        quietly: aiormq cancels the calls under way on a channel or connection that closes
        (a stream read at shutdown ends so), and a SIGTERM must still exit 0, not 1."""
        try:
            yield
        except asyncio.CancelledError:
            if not self._stop.is_set() or being_cancelled():
                raise
            log.warning("a broker call was cut short while stopping; stopping all the same")

    async def _serve(self, connection: AbstractRobustConnection) -> None:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=PREFETCH)
        settings = self.settings
        topology = await declare_topology(channel, self.names, settings)
        await self.keeper.start(connection)
        await self.schedulers.start(connection)
        await self.pauser.start(connection)
        tag = await topology.monitor.consume(self._on_message)
        if self.dashboard is not None:
            await self.dashboard.start(connection)
        background = [
            *(asyncio.create_task(sender.run()) for sender in self.senders),
            asyncio.create_task(self._poll(connection)),
            asyncio.create_task(self._keep_status()),
            asyncio.create_task(self._watch_schedulers(connection)),
        ]
        self.ready.set()
        log.info(
            "monitor started",
            queue=topology.monitor.name,
            alert_targets=[f"{s.target.kind} {s.target.safe}" for s in self.senders],
            threshold=settings.failed_alert_threshold,
        )
        await self._stop.wait()
        # A channel the broker closed, not yet reopened, took the consumer with it.
        with contextlib.suppress(*BROKER_TROUBLE):
            await topology.monitor.cancel(tag)
        await self._finish(background)

    async def _finish(self, background: list[asyncio.Task[None]]) -> None:
        if self.dashboard is not None:
            with self._stopping_anyway():
                await self.dashboard.stop()
        # Before the cancels: a broker call cancelled half-way can cost the connection.
        try:
            with self._stopping_anyway():
                await self.keeper.stop()
                await self.pauser.stop()
        except BROKER_TROUBLE as error:
            log.warning("status fold not stored at shutdown", error=repr(error))
        # Consuming has stopped: nothing new reaches the sender, which gets one last try.
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        await asyncio.gather(*(sender.flush() for sender in self.senders))

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        try:
            record = read_record(message, self.names.main_queue)
        except Exception as error:
            # The failed queue keeps the original: say so loudly and move on.
            log.exception(
                "unreadable failed-task copy", message_id=message.message_id, error=repr(error)
            )
        else:
            self._report_failure(record)
            self.pauser.failed(record)
            self.watch.learn(message.headers, record.routing_key)
            if self.dashboard is not None:
                self.dashboard.failed.learn(record)
        await message.ack()

    def _report_failure(self, record: FailedRecord) -> None:
        log.error("task failed", **record.summary())
        for sender in self.senders:
            sender.failure(record)

    async def _poll(self, connection: AbstractRobustConnection) -> None:
        while not self._stop.is_set():
            for change in self.silence.check(utcnow()):
                self._report_condition(change)
            with cuts_logged(log.warning, "queue check failed; trying again next interval"):
                for change in await self.watch.check(connection):
                    self._report_condition(change)
                self.checks += 1
            await self._idle(self.settings.monitor_interval_seconds)

    async def _watch_schedulers(self, connection: AbstractRobustConnection) -> None:
        # Often enough that the alert comes within a quarter of its delay after it is due.
        every = min(
            self.settings.monitor_interval_seconds, self.settings.scheduler_down_seconds / 4
        )
        while not self._stop.is_set():
            with cuts_logged(log.warning, "scheduler check failed; trying again"):
                for change in await self.schedulers.check(connection, utcnow()):
                    self._report_condition(change)
            await self._idle(every)

    async def _keep_status(self) -> None:
        while not self._stop.is_set():
            await self._idle(min(self.settings.monitor_interval_seconds, SAVE_SECONDS))
            with cuts_logged(log.warning, "status fold not stored; trying again"):
                await self.keeper.save()

    async def _idle(self, seconds: float) -> None:
        # The loops end on the stop flag too: a cancel that lands inside a broker call may
        # come out of the client library as a broker error, which the loops catch.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    def _report_condition(self, change: Condition) -> None:
        if change.firing:
            log.error("alert", condition=change.key, detail=change.detail)
        else:
            log.info("resolved", condition=change.key, detail=change.detail)
        for sender in self.senders:
            sender.condition(change)
