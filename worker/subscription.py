"""The worker's consumer on the main queue, on aiormq's channel, kept alive until stopped.

aio-pika's ``queue.consume`` runs each delivery through a wrapper that builds an
``IncomingMessage`` and starts a second task for the callback: at thousands of tasks a
second that is as much CPU as the worker's own work. Consuming on the channel underneath
gives one task and one ``Delivery`` per message. In exchange, what aio-pika's robust queue
does for its own consumers is done here: consume again when the channel is reopened after a
reconnect, and when the broker cancels the consumer (its queue was deleted), declare the
topology again and consume again, retrying until that works.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Any

import structlog
from aio_pika.abc import AbstractRobustChannel
from aiormq.abc import DeliveredMessage
from pamqp.commands import Basic

from warren_cron.broker.underlay import RawChannel, consuming, underlay
from warren_cron.errors import FAILED_OR_CUT, being_cancelled
from warren_cron.worker.acks import Acks

log = structlog.get_logger("worker")
#: Pause between two tries to consume again after the broker cancelled the consumer.
RETRY_SECONDS = 1.0
#: How long stopping waits for the broker to confirm the consumer's cancel.
CANCEL_TIMEOUT_SECONDS = 10.0

OnDelivery = Callable[[Acks, DeliveredMessage], Coroutine[Any, Any, None]]
Redeclare = Callable[[], Awaitable[object]]


class Subscription:
    """One consumer on ``queue``, restored after reconnects and broker-side cancels."""

    def __init__(self, channel: AbstractRobustChannel, queue: str, on_delivery: OnDelivery) -> None:
        self._channel = channel
        self._queue = queue
        self._on_delivery = on_delivery
        self._tag = f"warren-{uuid.uuid4().hex}"
        self._wake = asyncio.Event()
        self._cancelled = False
        self._keeper: asyncio.Task[None] | None = None
        self._acks: Acks | None = None
        #: The aiormq channel consumed on last; a reopened channel has a new one.
        self._raw: RawChannel | None = None

    async def start(self, redeclare: Redeclare) -> None:
        """Consume now, and again whenever the consumer is lost, until ``stop``."""
        await self._consume(await underlay(self._channel))
        self._channel.reopen_callbacks.add(self._on_reopen)
        self._keeper = asyncio.create_task(self._keep(redeclare))

    async def stop(self) -> None:
        """Stop consuming: deliveries already here run on, no new ones arrive."""
        self._channel.reopen_callbacks.discard(self._on_reopen)
        if self._keeper is not None:
            self._keeper.cancel()
            await asyncio.gather(self._keeper, return_exceptions=True)
        raw = self._raw
        if raw is None or not consuming(raw, self._tag):
            return
        try:
            await raw.basic_cancel(self._tag, timeout=CANCEL_TIMEOUT_SECONDS)
        except Exception as error:
            # Deliveries that still arrive go back unacked when the connection closes.
            log.warning("consumer not cancelled", queue=self._queue, error=repr(error))

    async def flush_acks(self) -> None:
        """Hand every ack decided so far to the writer, before the connection closes."""
        if self._acks is not None:
            await self._acks.flush()

    def active(self) -> bool:
        """True while the broker delivers to this consumer."""
        return self._raw is not None and consuming(self._raw, self._tag)

    async def _consume(self, raw: RawChannel) -> None:
        raw.on_consumer_cancel_callbacks.add(self._on_cancel)
        # One Acks per channel: delivery tags count from 1 again on a reopened channel.
        self._acks = Acks(raw)
        self._raw = raw
        deliver = partial(self._on_delivery, self._acks)
        await raw.basic_consume(self._queue, deliver, consumer_tag=self._tag)

    def _on_cancel(self, frame: Basic.Cancel) -> None:
        if frame.consumer_tag == self._tag:
            self._cancelled = True
            self._wake.set()

    def _on_reopen(self, _channel: object) -> None:
        self._wake.set()

    async def _keep(self, redeclare: Redeclare) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._restore(redeclare)
            except FAILED_OR_CUT as error:
                # aiormq fails a call under way on a connection it dropped as stuck with a
                # CancelledError that is no cancel of this task: the keeper must live on.
                if being_cancelled():
                    raise
                log.warning("consumer not restored; retrying", queue=self._queue, error=repr(error))
                await asyncio.sleep(RETRY_SECONDS)
                self._wake.set()

    async def _restore(self, redeclare: Redeclare) -> None:
        raw = await underlay(self._channel)
        if consuming(raw, self._tag):
            return
        if self._cancelled:
            # The queue may be gone: declare it (and its bindings) before consuming.
            await redeclare()
            self._cancelled = False
        await self._consume(raw)
        log.info("consuming again", queue=self._queue)
