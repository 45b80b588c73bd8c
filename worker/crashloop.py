"""Crash-loop detection: a task that keeps killing its worker ends in the failed queue.

Classic queues (RabbitMQ 3.10) count no deliveries, and the ``redelivered`` flag cannot tell
a worker that died mid-attempt from one that shut down gracefully (it hands running tasks
back on purpose, spending no retry) or lost its connection. So a worker leaves a trace in the
broker while it runs a redelivered attempt, and removes it whenever its process survives:

- Before running a redelivered message, the worker declares the durable queue
  ``<ns>_crash.<digest>`` (digest of the run id and the attempt number) and publishes one
  persistent marker into it, confirmed. The declare answers how many markers are already
  there: earlier deliveries of this same attempt whose process died before removing theirs.
- When the attempt ends in any way its process survives (settled, handed back at shutdown,
  or left unsettled because the connection dropped) the worker takes one marker back. Once
  the message is settled it deletes the queue: no later delivery of that attempt can come.
- When ``CRON_CRASH_LOOP_LIMIT`` markers are found, the task is not run: it gets a failure
  record with reason ``crash-loop`` and is acked, like any terminal failure.

First deliveries carry no marker, so the common path costs nothing, and a handler that kills
its process runs at most limit + 1 times per attempt. Only the broker is needed, so it works
across hosts; the message itself is never republished, so its ``x-death`` stays the broker's.
Markers go over the publishing connection with a timeout: if the broker cannot take one (a
memory alarm blocks publishers) the attempt runs unmarked rather than waiting. A delivery
that is still running on a worker whose connection dropped counts until it ends, so rapid
connection losses can end a slow task early as ``crash-loop``; it stays replayable. Marker
queues expire after a day unused, so a message purged by hand leaves nothing behind for long.

Quorum queues count deliveries themselves (``x-delivery-count``; on 3.x graceful hand-backs
count too). The broker's own answer, dead-lettering past ``x-delivery-limit``, is a trap
here: the message goes to its next retry queue with reason ``delivery_limit``, and when that
queue sends it back, RabbitMQ sees a dead-letter cycle without a rejection in it and refuses
to route it, so it would sit in the retry queue for good. The worker therefore settles the
last delivery the broker allows itself: a failure record with reason ``delivery-limit``,
then ack. The broker's limit stays as the backstop for a worker that dies before it can.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass

import aio_pika
import structlog
from aio_pika.abc import AbstractRobustChannel, AbstractRobustConnection

from warren_cron.declare import queue_arguments
from warren_cron.errors import BROKER_TROUBLE
from warren_cron.names import Names
from warren_cron.worker.attempt import Outcome, Result
from warren_cron.worker.delivery import Delivery
from warren_cron.worker.settings import WorkerSettings

log = structlog.get_logger("warren_cron.worker.crashloop")
#: Seconds any marker operation may take before the attempt goes on without it.
MARKER_TIMEOUT_SECONDS = 5.0
#: A marker queue unused this long is deleted by the broker.
MARKER_EXPIRES_MS = 24 * 3_600_000
#: aio-pika raises a bare RuntimeError on a closed channel; a marker must never fail an attempt.
MARKER_ERRORS: tuple[type[BaseException], ...] = (*BROKER_TROUBLE, RuntimeError)


@dataclass(frozen=True, slots=True)
class Mark:
    """What a worker left in the broker for one delivery."""

    queue: str | None = None
    placed: bool = False
    looping: Result | None = None


UNMARKED = Mark()


def marker_key(message_id: str | None, body: bytes, attempt: int) -> str:
    """Digest naming one attempt of one message: its run id (or body) and attempt number."""
    identity = message_id.encode() if message_id else body
    return hashlib.sha256(identity + b"|" + str(attempt).encode()).hexdigest()[:32]


def crash_loop(deaths: int, attempt: int, limit: int) -> Result:
    """The terminal result of an attempt whose worker died ``deaths`` times."""
    return Result(
        Outcome.TERMINAL,
        "crash-loop",
        f"the worker process died {deaths} times running attempt {attempt} "
        f"(CRON_CRASH_LOOP_LIMIT={limit}); the handler probably kills or exhausts its "
        "process: fix it, then replay the task",
    )


def delivery_limit(returns: int, limit: int) -> Result:
    """The terminal result of a quorum-queue message on the last delivery the broker allows."""
    return Result(
        Outcome.TERMINAL,
        "delivery-limit",
        f"handed back unsettled {returns} times (CRON_DELIVERY_LIMIT={limit}): each time the "
        "worker died or was stopped mid-attempt; fix the handler, then replay the task",
    )


class CrashGuard:
    """Ends crash loops: marker queues on classic queues, the delivery count on quorum ones."""

    def __init__(self, settings: WorkerSettings) -> None:
        self._names = Names(settings.namespace)
        self._quorum = settings.queue_type == "quorum"
        self._limit = settings.crash_loop_limit
        self._delivery_limit = settings.delivery_limit
        self._channel: AbstractRobustChannel | None = None

    async def open(self, connection: AbstractRobustConnection) -> None:
        """Open the guard's own channel on the publishing connection."""
        if not self._quorum:
            self._channel = await connection.channel(publisher_confirms=True)

    def watching(self, message: Delivery) -> bool:
        """True when ``enter`` has anything to do for ``message``: on quorum queues always
        (a look at its delivery count), on classic ones for a redelivered message."""
        return self._quorum or (self._channel is not None and message.redelivered)

    async def enter(self, message: Delivery, attempt: int) -> Mark:
        """Before an attempt: mark a redelivered one, or say it is crash-looping."""
        if self._quorum:
            return self._counted(message)
        if self._channel is None or not message.redelivered:
            return UNMARKED
        name = self._names.crash_queue(marker_key(message.message_id, message.body, attempt))
        try:
            async with asyncio.timeout(MARKER_TIMEOUT_SECONDS):
                return await self._mark(self._channel, name, attempt)
        except MARKER_ERRORS as error:
            log.warning("crash marker not placed; running unmarked", queue=name, error=repr(error))
            return Mark(queue=name)

    def _counted(self, message: Delivery) -> Mark:
        count = message.headers.get("x-delivery-count")
        returns = count if isinstance(count, int) else 0
        if returns < self._delivery_limit:
            return UNMARKED
        return Mark(looping=delivery_limit(returns, self._delivery_limit))

    async def _mark(self, channel: AbstractRobustChannel, name: str, attempt: int) -> Mark:
        args = queue_arguments("classic", expires_ms=MARKER_EXPIRES_MS)
        queue = await channel.declare_queue(name, durable=True, arguments=args, robust=False)
        deaths = queue.declaration_result.message_count or 0
        if deaths >= self._limit:
            return Mark(queue=name, looping=crash_loop(deaths, attempt, self._limit))
        marker = aio_pika.Message(b"", delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
        await channel.default_exchange.publish(marker, name)
        return Mark(queue=name, placed=True)

    async def leave(self, mark: Mark, settled: bool) -> None:
        """After an attempt the process survived: take its marker back, or drop the queue."""
        if self._channel is None or mark.queue is None:
            return
        try:
            async with asyncio.timeout(MARKER_TIMEOUT_SECONDS):
                await self._unmark(self._channel, mark, settled)
        except MARKER_ERRORS as error:
            log.warning("crash marker not removed", queue=mark.queue, error=repr(error))

    async def _unmark(self, channel: AbstractRobustChannel, mark: Mark, settled: bool) -> None:
        assert mark.queue is not None
        if settled:
            await channel.queue_delete(mark.queue)
        elif mark.placed:
            queue = await channel.get_queue(mark.queue, ensure=False)
            await queue.get(no_ack=True, fail=False)
