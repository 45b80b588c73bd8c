"""Messages as the broker delivers them, made without one.

A message's properties go through pamqp's frame encoding and back, as they do on their way
through RabbitMQ: header values come out as the broker would send them (times as aware UTC
datetimes, second resolution; ``bytearray`` for byte arrays; strings as str).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

import aio_pika
from aiormq.abc import AbstractChannel, DeliveredMessage
from pamqp import frame
from pamqp.commands import Basic
from pamqp.header import ContentHeader

from warren_cron.envelope import CONTENT_TYPE, Envelope
from warren_cron.names import Names
from warren_cron.worker.acks import Acks
from warren_cron.worker.delivery import Delivery

#: A time with no sub-second part: AMQP timestamps carry whole seconds.
T0 = datetime(2026, 1, 31, 8, 0, 0, tzinfo=UTC)
MAIN = Names().main_queue
ENVELOPE = Envelope(task="report", run_id="nightly@1", schedule="nightly", scheduled_for=T0)


def delivered(
    message: aio_pika.Message, routing_key: str, *, redelivered: bool = False
) -> DeliveredMessage:
    """``message`` as aiormq hands it over: its properties encoded for the wire and read back."""
    encoded = frame.marshal(ContentHeader(0, len(message.body), message.properties), 1)
    _, _, header = frame.unmarshal(encoded)
    assert isinstance(header, ContentHeader)
    deliver = Basic.Deliver(
        consumer_tag="test", delivery_tag=1, redelivered=redelivered, routing_key=routing_key
    )
    # No channel: nothing here settles a message.
    return DeliveredMessage(deliver, header, message.body, cast(AbstractChannel, None))


def task_message(**headers: Any) -> aio_pika.Message:
    """The task message of ``ENVELOPE`` as the scheduler publishes it, with extra headers."""
    return aio_pika.Message(
        ENVELOPE.encode(),
        headers={**ENVELOPE.headers(), **headers},
        message_id=ENVELOPE.run_id,
        content_type=CONTENT_TYPE,
        timestamp=T0,
        expiration=60,
        priority=3,
    )


def worker_delivery(
    message: aio_pika.Message, routing_key: str = "final", *, redelivered: bool = False
) -> Delivery:
    """``message`` as the worker holds it while it runs an attempt (nothing is settled)."""
    held = delivered(message, routing_key, redelivered=redelivered)
    return Delivery(held, Acks(cast(AbstractChannel, None)))


def incoming(message: aio_pika.Message, routing_key: str) -> aio_pika.IncomingMessage:
    """``message`` as aio-pika gives it to a reader of the failed or monitor queue."""
    return aio_pika.IncomingMessage(delivered(message, routing_key), no_ack=True)


def death(
    queue: str,
    reason: str | bytes,
    count: int = 1,
    *,
    time: datetime = T0,
    routing_keys: Sequence[str] = ("final",),
) -> dict[str, Any]:
    """One ``x-death`` entry, with the fields RabbitMQ writes."""
    return {
        "count": count,
        "reason": reason,
        "queue": queue,
        "time": time,
        "exchange": "cron_tasks",
        "routing-keys": list(routing_keys),
    }
