"""One scenario: a namespace on the private node, its ledger, publisher and processes.

A scenario publishes ledger tasks (retrying each until the broker confirms it, as the
scheduler does), waits until the broker holds nothing in flight, collects the failed queue
into the ledger and returns the ledger's report. The chaos run drives one; each fault test
drives one of its own (``tests/faults/harness.py`` adds the test's assertions).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage, AbstractRobustConnection

from warren_cron.broker.connect import connect
from warren_cron.broker.exclusive import plain_connection
from warren_cron.broker.inspect import fingerprint
from warren_cron.declare import PlanDeclarer, QueueType, declare_topology
from warren_cron.envelope import Envelope
from warren_cron.errors import CONNECTION_ERRORS
from warren_cron.faultkit.install import BrokerNodeError
from warren_cron.faultkit.ledger import Ledger, Report
from warren_cron.faultkit.namespace import BrokerNamespace
from warren_cron.faultkit.private_broker import BrokerNode
from warren_cron.faultkit.processes import WORKER_READY, Proc, Procs
from warren_cron.headers import H_ATTEMPTS, H_ERROR, H_REASON, x_death
from warren_cron.names import Names
from warren_cron.plan import RetryPlan
from warren_cron.publish import TaskPublisher
from warren_cron.records import read_record
from warren_cron.runtime.settings import CronSettings

#: Errors a publish meets while the broker restarts: the publisher tries again.
PUBLISH_ERRORS: tuple[type[BaseException], ...] = (
    *CONNECTION_ERRORS,
    aio_pika.exceptions.AMQPError,
    RuntimeError,
    TimeoutError,
)
#: Seconds between two looks at the broker while a scenario waits for quiet.
POLL_SECONDS = 0.5


class StillInFlight(AssertionError):
    """Tasks were still in flight when a scenario's wait for quiet ran out; ``left``: the
    messages of each queue that still held some."""

    def __init__(self, message: str, left: dict[str, int]) -> None:
        super().__init__(message)
        self.left = left


def record_reason(message: AbstractIncomingMessage) -> tuple[str, bool]:
    """The record's reason; for a raw dead-letter (no record published) the broker's reason."""
    headers = message.headers or {}
    reason = headers.get(H_REASON)
    if reason is not None:
        return str(reason), False
    deaths = x_death(headers)
    broker_reason = deaths[0].get("reason") if deaths else "unknown"
    return f"dead-lettered:{broker_reason}", True


@dataclass
class Quiet:
    """Readings of the queues in flight while a scenario waits for quiet."""

    patience: float
    #: The last reading (None before the first, or while the node did not answer).
    left: dict[str, int] | None = None
    _readings: int = 0
    _since: float = 0.0
    _progress: object = None

    def moved(self, progress: object) -> bool:
        """True, and quiet starts over, when the ledger moved since the last look."""
        if progress == self._progress:
            return False
        self._progress, self._readings = progress, 0
        return True

    def read(self, left: dict[str, int] | None) -> None:
        """One reading of the queues: quiet when nothing is in them."""
        self.left = left
        if left != {}:
            self._readings = 0
            return
        if self._readings == 0:
            self._since = asyncio.get_running_loop().time()
        self._readings += 1

    def over(self, report: Report) -> bool:
        """Two quiet readings in a row, and ``patience`` seconds of quiet if tasks are
        missing."""
        if self._readings < 2:
            return False
        waited = asyncio.get_running_loop().time() - self._since
        return not report.lost or waited >= self.patience


@dataclass
class Scenario:
    """A namespace on the private node (or cluster) with everything needed to break and judge it."""

    node: BrokerNode
    broker: BrokerNamespace
    ledger: Ledger
    procs: Procs
    plan: RetryPlan = field(default_factory=lambda: RetryPlan((100, 200)))
    #: Passed to its workers as CRON_DELIVERY_LIMIT and declared with: the setting's default.
    delivery_limit: int = CronSettings.model_fields["delivery_limit"].default
    _publisher: AbstractRobustConnection | None = field(default=None, repr=False)

    @property
    def names(self) -> Names:
        """Broker object names of the scenario's namespace."""
        return self.broker.names

    @property
    def queue_type(self) -> QueueType:
        """Queue type the scenario declares and its workers use."""
        return self.broker.queue_type

    async def prepare(self) -> None:
        """Declare the topology and the plan, and make the declarations crash-proof."""
        self.broker.plan_keys.update(step.key for step in self.plan.suffixes())
        channel = await self.broker.channel()
        await declare_topology(channel, self.names, self)
        await PlanDeclarer(channel, self.names, self.queue_type).declare(self.plan)
        await channel.close()
        await self.sync_metadata()

    async def sync_metadata(self) -> None:
        """Flush the node's metadata log: a declaration under ~1 s old may not survive kill -9."""
        await asyncio.to_thread(self.node.sync_metadata)

    def worker_env(self) -> dict[str, str]:
        """Extra environment of the scenario's worker processes."""
        return {
            "CRON_QUEUE_TYPE": self.queue_type,
            "CRON_DELIVERY_LIMIT": str(self.delivery_limit),
        }

    def spawn_worker(self, **extra: str) -> Proc:
        """Start a worker process on the scenario's namespace, without waiting for it."""
        env = {**self.worker_env(), **extra}
        return self.procs.spawn(["-m", "warren_cron.worker"], WORKER_READY, **env)

    async def publish(
        self,
        envelopes: Iterable[tuple[Envelope, str]],
        parallel: int = 32,
        rate: float | None = None,
    ) -> None:
        """Publish each envelope until confirmed (at most ``rate`` a second); note each try."""
        channel = await self._publish_channel()
        exchange = await channel.get_exchange(self.names.tasks_exchange, ensure=False)
        publisher = TaskPublisher(channel, exchange, self.names, self.queue_type)
        limit = asyncio.Semaphore(parallel)

        async def one(envelope: Envelope, kind: str) -> None:
            async with limit:
                await self._publish_one(publisher, envelope, kind)

        async with asyncio.TaskGroup() as group:
            for envelope, kind in envelopes:
                group.create_task(one(envelope, kind))
                if rate:
                    await asyncio.sleep(1 / rate)

    async def _publish_one(self, publisher: TaskPublisher, envelope: Envelope, kind: str) -> None:
        while True:
            self.ledger.publishing(envelope.run_id, kind)
            try:
                async with asyncio.timeout(5):
                    await publisher.publish(envelope, self.plan)
            except PUBLISH_ERRORS:
                await asyncio.sleep(0.3)
                continue
            self.ledger.confirmed(envelope.run_id)
            return

    async def _publish_channel(self) -> AbstractChannel:
        # Right after close_all_connections the test's own connection is still reconnecting.
        async with asyncio.timeout(30):
            while True:
                connection = await self._connection()
                try:
                    return await connection.channel(publisher_confirms=True, on_return_raises=True)
                except PUBLISH_ERRORS:
                    await asyncio.sleep(0.2)

    async def _connection(self) -> AbstractRobustConnection:
        if self._publisher is None:
            self._publisher = await connect(self.settings(), "faults-publisher", log_outages=False)
        return self._publisher

    async def in_flight(self) -> dict[str, int] | None:
        """Messages (ready or unacked) in the main and retry queues; None if the node is down."""
        try:
            held = await asyncio.to_thread(self.node.depths)
        except BrokerNodeError:
            return None
        prefix, retry = self.names.main_queue, self.names.retry_prefix
        return {
            name: count
            for name, count in held.items()
            if (name == prefix or name.startswith(retry)) and count
        }

    async def wait_quiet(self, timeout: float = 60, patience: float = 15) -> Report:
        """Collect failed records until nothing is in flight and every task is accounted for;
        ``StillInFlight`` once nothing moved for ``timeout`` seconds."""
        # Two quiet readings in a row end the wait. Missing tasks get ``patience`` seconds of
        # quiet more (a queue recovering after a crash may look empty). The bound is on
        # progress, not on the whole wait: on a loaded machine the tasks of a chaos run settle
        # slower, and a wait that still sees them settle goes on (at most four times as long).
        quiet = Quiet(patience)
        report = self.ledger.report()
        clock = asyncio.get_running_loop().time
        moved_at = clock()
        try:
            async with asyncio.timeout(4 * timeout):
                while not quiet.over(report) and clock() - moved_at <= timeout:
                    await asyncio.sleep(POLL_SECONDS)
                    report = await self.collect_report()
                    # The broker is asked only once the ledger stopped moving: its queues
                    # are the slower reading.
                    if quiet.moved((self.ledger.count_attempts(), report.counts())):
                        moved_at = clock()
                        continue
                    quiet.read(await self.in_flight())
        except TimeoutError:
            pass
        if not quiet.over(report):
            left = quiet.left if quiet.left is not None else await self.in_flight()
            if left:
                raise StillInFlight(
                    f"still in flight after {timeout}s without progress: {left}\n{report.table()}",
                    left,
                )
        return report

    async def collect_report(self) -> Report:
        """Collect the failed queue if the node answers, then classify every run id."""
        with contextlib.suppress(*PUBLISH_ERRORS):
            await self.collect_failed()
        return self.ledger.report()

    async def collect_failed(self) -> list[AbstractIncomingMessage]:
        """Move everything in the failed queue into the ledger; return the messages."""
        connection = await plain_connection(self.settings(), "faults-collector", heartbeat=5)
        collected = []
        async with connection:
            channel = await connection.channel()
            queue = await channel.declare_queue(self.names.failed_queue, passive=True)
            while (message := await queue.get(fail=False)) is not None:
                run_id = str(read_record(message, self.names.main_queue).run_id)
                reason, raw = record_reason(message)
                headers = message.headers or {}
                attempts = headers.get(H_ATTEMPTS)
                attempts = attempts if isinstance(attempts, int) else None
                error = headers.get(H_ERROR)
                error = error.decode() if isinstance(error, bytes) else str(error)
                self.ledger.failed_record(
                    fingerprint(message), run_id, reason, attempts, raw, error
                )
                await message.ack()
                collected.append(message)
        return collected

    def settings(self) -> CronSettings:
        """Settings of the scenario's own connections: its broker's node(s)."""
        return CronSettings(namespace=self.names.namespace, amqp_url=self.node.url)

    async def close(self) -> None:
        """Close the publisher's connection."""
        if self._publisher is not None:
            await self._publisher.close()
