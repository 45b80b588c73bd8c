"""A long attempt's delivery, once acked and parked: the consumer settles the attempt's fate on
it as on any delivery, and the lease queue carries that out (docs/long-jobs.md)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aio_pika.abc import AbstractConnection
from pamqp.commands import Basic

from warren_cron.errors import BROKER_TROUBLE
from warren_cron.worker.delivery import Delivery
from warren_cron.worker.parking import LeaseQueue


class Parked(Delivery):
    """Reads as the delivery it stands for; ``ack`` ends the run's lease, ``reject`` sends the
    run to its next retry first. Both release the claim. An attempt that lost its claim
    (``lost``) settles nothing: its parked copy carries the run on."""

    __slots__ = ("_connection", "_dlx", "_fallback", "_lease", "_origin", "attempt", "lost")

    def __init__(
        self,
        origin: Delivery,
        attempt: int,
        lease: LeaseQueue,
        connection: AbstractConnection,
        dlx: str,
    ) -> None:  # no super().__init__: the delivery it stands for was acked already
        self._origin, self.attempt, self._lease = origin, attempt, lease
        self._connection, self._dlx = connection, dlx
        self.lost = False
        self._fallback: asyncio.TimerHandle | None = None

    @property
    def body(self) -> bytes:
        """The task's body."""
        return self._origin.body

    @property
    def headers(self) -> dict[str, Any]:
        """The task's headers, as delivered."""
        return self._origin.headers

    @headers.setter
    def headers(self, _value: dict[str, Any]) -> None:
        # Read-only in truth: a delivery's headers are never replaced. A setter keeps this
        # property a match for a delivery that holds its headers as a plain attribute.
        raise AttributeError("a parked delivery's headers are those it was delivered with")

    @property
    def routing_key(self) -> str:
        """The task's retry plan."""
        return self._origin.routing_key

    @property
    def redelivered(self) -> bool:
        """As delivered."""
        return self._origin.redelivered

    @property
    def message_id(self) -> str | None:
        """The run id, as a message property."""
        return self._origin.message_id

    @property
    def properties(self) -> Basic.Properties:
        """The task's properties."""
        return self._origin.properties

    async def ack(self) -> None:
        """The run's fate is settled: remove its parked copy, release the claim."""
        await self._end(None)

    async def reject(self) -> None:
        """Send the run to its next retry (as the broker's NACK would), then as ``ack``."""
        await self._end(self._dlx)

    async def _end(self, retry_through: str | None) -> None:
        try:
            if not self.lost:
                if retry_through is not None:
                    await self._lease.retry(retry_through)
                await self._lease.remove()
        finally:
            await self._let_go()

    def let_go_in(self, seconds: float) -> None:
        """Release the claim after ``seconds`` unless settled before (the parked copy stays)."""
        loop = asyncio.get_running_loop()
        self._fallback = loop.call_later(seconds, lambda: loop.create_task(self._let_go()))

    async def _let_go(self) -> None:
        if self._fallback is not None:
            self._fallback.cancel()
        with contextlib.suppress(*BROKER_TROUBLE, TimeoutError):
            await self._connection.close()
