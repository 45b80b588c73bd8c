"""Keeps a long attempt's lease: renews its parked copy and looks at its claim every eighth of
a lease, and says the attempt must stop when the claim may be lost (docs/long-jobs.md).

The claim is lost when its connection closes, or when the broker has not answered for half a
lease: a worker that takes the run over waits that long before it starts, so two attempts of
one run never overlap.
"""

from __future__ import annotations

import asyncio
import contextlib

from aio_pika.abc import AbstractChannel, AbstractConnection

from warren_cron.errors import BROKER_TROUBLE
from warren_cron.history.outcomes import CLAIM_LOST
from warren_cron.worker.attempt import Outcome, Result
from warren_cron.worker.parking import LeaseQueue


class Keeper:
    """Renews one lease until ``end``; ``stop`` is set when the claim may be lost."""

    def __init__(
        self,
        connection: AbstractConnection,
        channel: AbstractChannel,
        lease: LeaseQueue,
        claim: str,
        seconds: float,
    ) -> None:
        self._channel, self._lease, self._claim, self._seconds = channel, lease, claim, seconds
        self.stop: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._ended = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        connection.close_callbacks.add(self._closed)

    def start(self) -> None:
        """Renew from now on."""
        self._task = asyncio.create_task(self._keep())

    async def end(self) -> None:
        """Stop renewing (at once, or when the renewal in flight is answered)."""
        self._ended.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    def _closed(self, *_: object) -> None:
        self._lost("the claim's connection closed")

    def _lost(self, why: str) -> None:
        if not self.stop.done() and not self._ended.is_set():
            self.stop.set_result(Result(Outcome.REPLACED, CLAIM_LOST, why))

    async def _keep(self) -> None:
        loop = asyncio.get_running_loop()
        answered = loop.time()
        with contextlib.suppress(TimeoutError, *BROKER_TROUBLE):
            # Each look has three eighths of a lease to be answered before the half is over.
            while not await self._ended_within(self._seconds / 8):
                async with asyncio.timeout_at(answered + self._seconds / 2):
                    await self._lease.renew()
                    await self._channel.declare_queue(self._claim, passive=True)
                answered = loop.time()
            return
        self._lost(f"the broker did not renew the lease for {self._seconds / 2:g} s")

    async def _ended_within(self, seconds: float) -> bool:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._ended.wait()
        return self._ended.is_set() or self.stop.done()
