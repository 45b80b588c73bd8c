"""One delivered task message, read from aiormq's frame as it is.

aio-pika copies every property of a delivery into an ``IncomingMessage`` before the callback
runs (a sixth of the worker's CPU per task at full speed); a ``Delivery`` keeps aiormq's
``DeliveredMessage`` and reads a property only when something asks for it.
"""

from __future__ import annotations

from typing import Any

from aiormq.abc import DeliveredMessage
from pamqp.commands import Basic

from warren_cron.worker.acks import Acks


class Delivery:
    """A task message delivered to this worker, with the means to settle it."""

    __slots__ = ("_acks", "_deliver", "_message", "_tag", "headers")

    def __init__(self, message: DeliveredMessage, acks: Acks) -> None:
        self._message = message
        deliver = message.delivery
        assert isinstance(deliver, Basic.Deliver)
        self._deliver = deliver
        self._tag = deliver.delivery_tag or 0
        self._acks = acks
        #: AMQP headers: ``cron-*`` and the broker's ``x-death`` (read often: kept at hand).
        self.headers: dict[str, Any] = message.header.properties.headers or {}
        acks.delivered(self._tag)

    @property
    def body(self) -> bytes:
        """The message body, as published."""
        return self._message.body

    @property
    def routing_key(self) -> str:
        """The retry plan key the message was published with."""
        return self._deliver.routing_key or ""

    @property
    def redelivered(self) -> bool:
        """True when the broker handed this message out before (a worker died holding it)."""
        return bool(self._deliver.redelivered)

    @property
    def message_id(self) -> str | None:
        """The run id, as a message property."""
        return self._message.header.properties.message_id

    @property
    def properties(self) -> Basic.Properties:
        """All AMQP properties, as aiormq decoded them (a failure record copies some)."""
        return self._message.header.properties

    async def ack(self) -> None:
        """Acknowledge (sent at the end of this loop pass): the broker forgets the message."""
        self._acks.ack(self._tag)

    async def reject(self) -> None:
        """Reject without requeue: the broker dead-letters the message."""
        await self._acks.reject(self._tag)
