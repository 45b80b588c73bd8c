"""Publish history events in the background: buffered, batched, confirmed, never blocking.

``emit`` only appends to a bounded buffer. A background task sends what gathered every
``LINGER_SECONDS`` (or as soon as ``CHUNK`` events wait) as one stream message holding a JSON
array of events, with a publisher confirm, one batch in flight: a few messages a second
instead of one per event, for the broker to store and for readers to go through.

Whatever the stream cannot take (buffer full, the stream deleted, the broker slow or gone,
a memory alarm) is dropped and counted in ``cron_history_events_dropped_total``: an
attempt's fate never waits for its history. Once the stream takes a batch again, that batch
carries a ``dropped`` event reporting the loss (``topology/history/losses.py``); an idle
publisher with a loss to report tries every ``REPORT_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
import structlog
from aio_pika.abc import AbstractChannel, AbstractConnection

from warren_cron.broker.batch import publish_batch
from warren_cron.broker.connect import drop, owned_publish_channel
from warren_cron.codec import Outgoing
from warren_cron.history.events import join
from warren_cron.history.losses import Losses, Report
from warren_cron.history.stream import HistorySettings, declare_history
from warren_cron.names import Names

log = structlog.get_logger("history")
CHUNK = 500
LINGER_SECONDS = 0.1
#: Events held while the stream cannot take them; more are dropped.
CAPACITY = 20_000
CONFIRM_SECONDS = 5.0
#: After events were returned (the stream is gone), declare it again at most this often.
REDECLARE_SECONDS = 10.0
#: How often a publisher with no events to send tries to send its report of a loss.
REPORT_SECONDS = 1.0


class HistoryPublisher:
    """Sends events to ``<ns>_history``; ``dropped`` counts those it could not."""

    def __init__(
        self, names: Names, settings: HistorySettings, process: str, *, metrics: bool = True
    ) -> None:
        self._names = names
        self._settings = settings
        # Encoded at once: bytes are no work for the garbage collector, while thousands of
        # waiting dicts would be promoted through its generations and scanned again and again.
        self._buffer: deque[bytes] = deque()
        self._wake = asyncio.Event()
        #: Set while events wait: an idle publisher sleeps instead of polling its buffer.
        self._queued = asyncio.Event()
        self._ids = (f"h{os.getpid()}-{n}" for n in itertools.count())
        self._dropped_metric: Any = None
        self._sent_metric: Any = None
        if metrics:
            # Imported only when served: prometheus-client adds a tenth of a second to start-up.
            from warren_cron.runtime.metrics import HISTORY_DROPPED, HISTORY_EVENTS

            self._dropped_metric = HISTORY_DROPPED.labels(process=process)
            self._sent_metric = HISTORY_EVENTS.labels(process=process)
        self._connection: AbstractConnection | None = None
        self._channel: AbstractChannel | None = None
        self._task: asyncio.Task[None] | None = None
        self._declared_at = 0.0
        self._failing: str | None = None
        self._losses = Losses(process)
        self._closing = False
        self.published = 0
        self.dropped = 0
        #: Called before each batch is taken from the buffer: a writer that holds events back
        #: until they are due (the worker's ``started``) emits them there.
        self.before_batch: Callable[[], None] | None = None
        self._expected = False

    def emit(self, data: dict[str, Any]) -> None:
        """Queue one event (``topology.history.events.event``); never blocks or raises."""
        waiting = len(self._buffer)
        if waiting >= CAPACITY:
            self._drop(1, "history buffer full: the stream cannot keep up")
            return
        self._buffer.append(orjson.dumps(data))
        if not waiting:
            # The sender sleeps only once it found the buffer empty: the first event since
            # wakes it, the others need not.
            self._queued.set()
        elif waiting + 1 >= CHUNK:
            self._wake.set()

    def expect(self) -> None:
        """Say that events will be emitted at the next batch (``before_batch``): the sender
        wakes for it as for an event."""
        self._expected = True
        self._queued.set()

    async def start(self, connection: AbstractConnection) -> None:
        """Declare the stream and start sending in the background."""
        self._connection = connection
        await self._declare()
        self._task = asyncio.create_task(self._run(), name="history")

    async def close(self, grace: float = 2.0) -> None:
        """Send what is buffered (for at most ``grace`` seconds), then stop."""
        self._closing = True
        self._queued.set()
        self._wake.set()
        if self._task is not None:
            # Not cancelled at once: a batch cut off between popped and confirmed is lost.
            done, _ = await asyncio.wait({self._task}, timeout=grace)
            if not done:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
        if self._buffer:
            self._drop(len(self._buffer), "not sent before shutdown")
            self._buffer.clear()

    async def _run(self) -> None:
        # One batch per linger, or at once while full chunks wait: a busy worker sends a few
        # large batches a second rather than a small one per round trip.
        while not self._closing:
            await self._queued.wait()  # idle: asleep until an event is emitted, or closing
            await self._nap(LINGER_SECONDS)
            self._wake.clear()
            await self._flush(time.monotonic() + CONFIRM_SECONDS)
            await self._settle()
        while self._buffer:
            await self._flush(time.monotonic() + CONFIRM_SECONDS)
        if self._losses.count:
            await self._flush(time.monotonic() + CONFIRM_SECONDS)

    async def _settle(self) -> None:
        """After a flush: on at once while a full chunk waits, asleep when nothing does."""
        if len(self._buffer) >= CHUNK:
            self._wake.set()
        elif self._buffer or self._expected:
            return
        elif self._losses.count:
            await self._nap(REPORT_SECONDS)  # a report alone: no hurry
        else:
            self._queued.clear()  # no await since the buffer was found empty

    async def _nap(self, seconds: float) -> None:
        """Wait ``seconds``, or less when woken (a full chunk waits, or closing)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)

    async def _flush(self, deadline: float) -> None:
        if self.before_batch is not None:
            self._expected = False
            self.before_batch()
        report = self._losses.take()  # None but after a loss: no work per event
        if not self._buffer and report is None:
            return
        batch = [self._buffer.popleft() for _ in range(min(CHUNK, len(self._buffer)))]
        try:
            channel = await self._ready()
            body = join(batch if report is None else [*batch, report.body])
            message = Outgoing("", self._names.history_stream, body, next(self._ids), {})
            (error,) = await (await publish_batch(channel, [message])).confirmed(deadline)
        except Exception as trouble:
            # Whatever goes wrong (a robust connection mid-reconnect raises RuntimeError), the
            # batch is dropped and counted, and the publisher lives on for the next one.
            self._unsent(len(batch), report, f"{type(trouble).__name__}: {trouble}")
            self._forget()
            return
        if error is not None:
            self._unsent(len(batch), report, f"{type(error).__name__}: {error}")
            await self._maybe_redeclare()
        else:
            self._sent(len(batch))

    def _unsent(self, count: int, report: Report | None, why: str) -> None:
        # A report the stream did not take is no loss of its own: it goes with the next batch.
        # One whose confirm came too late may have been stored, and is then counted twice.
        if report is not None:
            self._losses.keep(report)
        self._drop(count, why)

    async def _ready(self) -> AbstractChannel:
        if self._channel is None or self._channel.is_closed:
            assert self._connection is not None, "start() first"
            self._forget()
            self._channel = await owned_publish_channel(self._connection)
        return self._channel

    def _forget(self) -> None:
        """Close the channel a failed write leaves behind (in the background: the node may not
        answer). It is a channel of its own (``owned_publish_channel``): a robust connection
        never reopens it, so no outage and no channel error leaves one more behind."""
        channel, self._channel = self._channel, None
        if channel is not None:
            drop(channel)

    async def _declare(self) -> None:
        assert self._connection is not None
        self._declared_at = time.monotonic()
        try:
            await declare_history(self._connection, self._names, self._settings)
        except Exception as error:
            log.warning("history stream not declared", error=repr(error))

    async def _maybe_redeclare(self) -> None:
        # Returned events mean the stream is gone; someone deleting it by mistake is the
        # likely cause, so it comes back, but not on every batch.
        if time.monotonic() - self._declared_at >= REDECLARE_SECONDS:
            await self._declare()

    def _drop(self, count: int, why: str) -> None:
        self.dropped += count
        self._losses.add(count)
        if self._dropped_metric is not None:
            self._dropped_metric.inc(count)
        if self._failing is None:
            log.warning("history events dropped; attempts go on", count=count, error=why)
        self._failing = why

    def _sent(self, count: int) -> None:
        self.published += count
        if self._sent_metric is not None:
            self._sent_metric.inc(count)
        if self._failing is not None:
            log.info("history events published again", dropped_so_far=self.dropped)
            self._failing = None


@contextlib.asynccontextmanager
async def publishing(
    connection: AbstractConnection, names: Names, settings: HistorySettings, process: str
) -> AsyncIterator[HistoryPublisher]:
    """A publisher started on ``connection`` for the block, and flushed when it ends."""
    publisher = HistoryPublisher(names, settings, process)
    await publisher.start(connection)
    try:
        yield publisher
    finally:
        await publisher.close()
