"""The worker: consume the main queue, run each attempt, hand the result to the fate.

Consuming and publishing use separate connections, because a broker memory alarm blocks
publishing connections only: acks and NACKs must keep flowing while records wait.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import AsyncExitStack

import structlog
from aio_pika.abc import AbstractChannel, AbstractRobustConnection
from aiormq.abc import DeliveredMessage

import warren_cron.tracing as tracing
from warren_cron.broker.connect import briefly, connect, publish_channel
from warren_cron.broker.underlay import underlay
from warren_cron.clock import now_text
from warren_cron.codec import run_id_of
from warren_cron.declare import declare_topology
from warren_cron.envelope import Envelope
from warren_cron.headers import attempt_number
from warren_cron.history.publisher import HistoryPublisher
from warren_cron.names import Names
from warren_cron.worker.acks import Acks
from warren_cron.worker.adopt import Adopter, needs_plan
from warren_cron.worker.announce import Announcer
from warren_cron.worker.attempt import Result
from warren_cron.worker.cancels import Cancels
from warren_cron.worker.crashloop import UNMARKED, CrashGuard, Mark
from warren_cron.worker.delivery import Delivery
from warren_cron.worker.fate import Action, Settler, Verdict, decide
from warren_cron.worker.flow import HTTP_TASK, Flow, wanted
from warren_cron.worker.handlers import LazyHttp, builtin_registry
from warren_cron.worker.later import Later
from warren_cron.worker.longrun import LongRuns
from warren_cron.worker.metrics import WorkerMetrics
from warren_cron.worker.pipeline import Pipeline
from warren_cron.worker.registry import Registry
from warren_cron.worker.report import Ended, Reporter
from warren_cron.worker.settings import WorkerSettings
from warren_cron.worker.subscription import Subscription

log = structlog.get_logger("worker")
#: While the main queue still holds ready messages, ``join`` looks again this often.
JOIN_POLL_SECONDS = 0.02


class Worker:
    """Consumes tasks until ``stop()``; unfinished attempts are left for redelivery."""

    def __init__(self, settings: WorkerSettings, registry: Registry | None = None) -> None:
        self.settings = settings
        self.names = Names(settings.namespace)
        self.ready = asyncio.Event()
        #: Set when ``run`` has returned: every attempt settled or handed back, connections closed.
        self.stopped = asyncio.Event()
        self._extra = registry or Registry()
        self._registry = Registry()
        self._settler: Settler | None = None
        self._adopter: Adopter | None = None
        self._crashes = CrashGuard(settings)
        self._stop = asyncio.Event()
        self._running: set[asyncio.Task[object]] = set()
        self._settling: set[asyncio.Task[object]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._channel: AbstractChannel | None = None
        self._metrics = WorkerMetrics(settings.metrics_port != 0)
        #: The run history's publisher; its ``published`` and ``dropped`` counts are public.
        self.history = HistoryPublisher(
            self.names, settings, "worker", metrics=self._metrics.enabled
        )
        self._report = Reporter(self._metrics, self.history)
        self._connection: AbstractRobustConnection | None = None
        self._subscription: Subscription | None = None
        self._flow = Flow(settings, self._metrics) if wanted(settings) else None
        self._cancels = Cancels(self.names)
        self._pipeline = Pipeline(settings, self._metrics, self._report, self._flow, self._cancels)
        self._pipeline.long = LongRuns(settings, self.history.emit)

    def connected(self) -> bool:
        """True while the consuming connection is open (health check)."""
        return self._connection is not None and not self._connection.is_closed

    def consuming(self) -> bool:
        """True while the broker delivers to this worker: a cancelled consumer is unhealthy."""
        return self._subscription is not None and self._subscription.active()

    def stop(self) -> None:
        """Ask the worker to stop taking tasks and shut down gracefully."""
        self._stop.set()

    async def join(self) -> None:
        """Wait until nothing is left to do: the main queue holds nothing ready, and every
        delivery this worker took has run, been settled and its ack sent (dramatiq's ``join``).

        Messages waiting in retry queues are not counted: they are the broker's, not yet due.
        """
        while True:
            await self._idle.wait()
            assert self._subscription is not None and self._channel is not None
            await self._subscription.flush_acks()
            # Asked on the consuming channel: the answer comes after any delivery the queue
            # sent before it, so a delivery on its way has cleared ``_idle`` by then.
            raw = await underlay(self._channel)
            declared = await raw.queue_declare(self.names.main_queue, passive=True)
            if not declared.message_count and self._idle.is_set():
                return
            await asyncio.sleep(JOIN_POLL_SECONDS)

    async def run(self) -> None:
        """Connect, declare, consume until stopped, then drain and close."""
        try:
            await self._run()
        finally:
            self.stopped.set()

    async def _run(self) -> None:
        async with AsyncExitStack() as stack:
            subscription = await self._start(stack)
            await subscription.start(self._redeclare)
            self.ready.set()
            log.info(
                "worker started",
                queue=self.names.main_queue,
                prefetch=self.settings.prefetch,
                tasks=self._registry.names(),
                broker=self.settings.safe_url,
            )
            await self._stop.wait()
            await subscription.stop()
            await self._drain()
            await subscription.flush_acks()
        log.info("worker stopped")

    async def _start(self, stack: AsyncExitStack) -> Subscription:
        consume_conn = await connect(self.settings, "warren-worker-consume")
        stack.push_async_callback(consume_conn.close)
        publish_conn = await connect(self.settings, "warren-worker-publish")
        stack.push_async_callback(publish_conn.close)
        await self._crashes.open(publish_conn)
        await self.history.start(publish_conn)
        stack.push_async_callback(self.history.close)
        if self._flow is not None:
            await self._flow.start(consume_conn, publish_conn)
            stack.push_async_callback(self._flow.close)
        # Every cancel stored so far is known before the first task is taken.
        await self._cancels.start(self.settings)
        stack.push_async_callback(self._cancels.close)
        self._pipeline.gate.start(consume_conn)
        http = LazyHttp(self.settings)
        stack.push_async_callback(http.aclose)
        self._registry = builtin_registry(http).merged(self._extra)
        self._pipeline.registry = self._registry
        self._pipeline.long.use(self._registry)
        # The monitor's API refuses runs of tasks no live worker registered (known_tasks.py).
        # On a connection of its own: under a memory alarm its publishes block that connection
        # alone, and the failure records' publishes still time out and dead-letter.
        announcing = await connect(self.settings, "warren-worker-announce")
        stack.push_async_callback(announcing.close)
        announcer = Announcer(self.names, self._registry)
        await announcer.start(announcing)
        stack.push_async_callback(announcer.close)
        self._connection = consume_conn
        channel = await consume_conn.channel()
        await channel.set_qos(prefetch_count=self.settings.prefetch)
        await self._declare(channel)
        self._channel = channel
        publisher = await publish_channel(publish_conn)
        later = Later(publisher, self.names, self.settings.queue_type, publisher.ready)
        dlx = await publisher.get_exchange(self.names.dlx, ensure=False)
        self._settler = Settler(dlx, later, publisher.ready)
        tasks = await publisher.get_exchange(self.names.tasks_exchange, ensure=False)
        self._adopter = Adopter(publisher, tasks, self.settings, self._settler)
        self._subscription = Subscription(channel, self.names.main_queue, self._on_delivery)
        return self._subscription

    async def _declare(self, channel: AbstractChannel) -> None:
        settings = self.settings
        await declare_topology(channel, self.names, settings)

    async def _redeclare(self) -> None:
        # On a channel of its own: a conflicting declaration closes the channel it ran on.
        # Through ``briefly``: a robust connection reopens a channel whose open an outage
        # cut, with no owner (a channel more after every unlucky restore).
        assert self._connection is not None
        async with briefly(self._connection) as channel:
            await self._declare(channel)

    async def _drain(self) -> None:
        grace = self.settings.shutdown_grace_seconds
        if self._running:
            log.info("waiting for running attempts", count=len(self._running), grace_s=grace)
            await asyncio.wait(self._running, timeout=grace or None)
        for task in self._running:
            # Cancelled attempts are neither acked nor NACKed: closing the channel hands
            # them back to the broker, which redelivers them without spending a retry.
            task.cancel()
        await asyncio.gather(*self._running, *self._settling, return_exceptions=True)

    async def _on_delivery(self, acks: Acks, delivered: DeliveredMessage) -> None:
        message = Delivery(delivered, acks)
        task = asyncio.current_task()
        assert task is not None
        self._running.add(task)
        self._idle.clear()
        mark, settled = UNMARKED, False
        try:
            if needs_plan(message.routing_key) and await self._adopted(message):
                return
            attempt = attempt_number(message.headers, self.names.main_queue)
            if self._crashes.watching(message):
                mark = await self._crashes.enter(message, attempt)
            # The attempt's span (docs/tracing.md) is current until its report is written.
            span = tracing.attempt(message.headers, message.message_id, attempt)
            if span is tracing.NO_ATTEMPT:  # tracing off: no span to enter and leave
                settled = await self._attempt(message, attempt, mark, task, span)
            else:
                with span:
                    settled = await self._attempt(message, attempt, mark, task, span)
        finally:
            # Also after a cancel at shutdown: a handed-back attempt is no worker death.
            if mark.queue is not None:
                await self._crashes.leave(mark, settled)
            self._running.discard(task)
            self._settling.discard(task)
            if not self._running and not self._settling:
                self._idle.set()

    async def _attempt(
        self,
        message: Delivery,
        attempt: int,
        mark: Mark,
        task: asyncio.Task[object],
        span: tracing.Attempt,
    ) -> bool:
        """Run one attempt, settle its message and report it; True when settled."""
        started = time.monotonic()
        envelope, result = await self._pipeline.run(message, attempt, mark)
        # The attempt ends here, before its fate is settled: a failure record confirmed
        # now can be replayed before the report, and the replay must come after it in time.
        seconds, ended_at = time.monotonic() - started, now_text()
        self._running.discard(task)
        self._settling.add(task)
        verdict = self._verdict(message, envelope, result)
        body_run_id = envelope.run_id if envelope else None
        run_id = run_id_of(body_run_id, message.message_id, message.headers)
        settle_on = message
        if self._pipeline.long.parked:  # a long attempt acked its delivery at start
            settle_on, attempt = self._pipeline.long.settling(message, attempt)
        settled = await self._settle(settle_on, verdict, attempt, run_id)
        failed = settled and verdict.action is Action.FAIL
        status, value = result.http_status, result.value
        ended = Ended(message, envelope, attempt, verdict, seconds, ended_at, failed, status, value)
        span.ended(envelope, verdict.action.value, verdict.reason, status)
        self._report.ended(ended)
        return settled

    def _verdict(self, message: Delivery, envelope: Envelope | None, result: Result) -> Verdict:
        """What to do with the message after ``result`` (its plan, deadline and budget)."""
        deadline = envelope.deadline if envelope else None
        verdict = decide(result, message.routing_key, deadline, self.settings.retry_max_delay_ms)
        if self._flow is not None and envelope is not None and envelope.task == HTTP_TASK:
            verdict = self._flow.judged(envelope, verdict)
        return verdict

    async def _adopted(self, message: Delivery) -> bool:
        """True when a hand-published task was adopted or failed (see ``Adopter.take``)."""
        assert self._adopter is not None
        return await self._adopter.take(message)

    async def _settle(
        self, message: Delivery, verdict: Verdict, attempt: int, run_id: str | None
    ) -> bool:
        assert self._settler is not None
        try:
            await self._settler.settle(message, verdict, attempt, run_id)
        except Exception as error:
            # The channel is gone: the broker redelivers the unsettled message.
            log.warning(
                "could not settle; the broker will redeliver",
                run_id=run_id,
                error=repr(error),
            )
            return False
        return True
