"""Messages as the broker delivers them, made without one.

A message's properties go through pamqp's frame encoding and back, as they do on their way
through RabbitMQ: header values come out as the broker would send them (times as aware UTC
datetimes, second resolution; ``bytearray`` for byte arrays; strings as str).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import aio_pika
from aiormq.abc import AbstractChannel, DeliveredMessage
from pamqp import frame
from pamqp.commands import Basic
from pamqp.header import ContentHeader

from warren_cron import codec
from warren_cron.envelope import Envelope
from warren_cron.names import Names
from warren_cron.scheduler.settings import SchedulerSettings
from warren_cron.schedules.load import parse_schedules
from warren_cron.schedules.schedule import Schedule
from warren_cron.worker.acks import Acks
from warren_cron.worker.delivery import Delivery

#: A time with no sub-second part: AMQP timestamps carry whole seconds.
T0 = datetime(2026, 1, 31, 8, 0, 0, tzinfo=UTC)
MAIN = Names().main_queue
ENVELOPE = Envelope(task="report", run_id="nightly@1", schedule="nightly", scheduled_for=T0)


SCHEDULES = """
[[schedule]]
name = "plain"
every = "5m"
task = "noop"

[[schedule]]
name = "full"
cron = "30 2 * * *"
timezone = "Europe/Berlin"
task = "http"
payload = { url = "https://svc.example/hook", json = { n = 1.5, tags = ["a", "é"] } }
timeout_seconds = 12.5
concurrency = "Replace"
retry = { max_retries = 2, delay_ms = 1000 }
"""


def schedules() -> tuple[Schedule, ...]:
    """A bare schedule, and one with every field a fire's envelope carries and a plan."""
    settings = SchedulerSettings(schedules_file=Path("schedules.toml"))
    return parse_schedules(SCHEDULES, settings).schedules


def delivered(
    message: aio_pika.Message, routing_key: str, *, redelivered: bool = False
) -> DeliveredMessage:
    """``message`` as aiormq hands it over: its properties encoded for the wire and read back."""
    encoded = frame.marshal(ContentHeader(0, len(message.body), message.properties), 1)
    _, _, header = frame.unmarshal(encoded)
    assert isinstance(header, ContentHeader)
    return arrived(header, message.body, routing_key, redelivered=redelivered)


def arrived(
    header: ContentHeader, body: bytes, routing_key: str, *, redelivered: bool = False
) -> DeliveredMessage:
    """A delivery of ``body`` with the properties of a content ``header`` read off the wire."""
    deliver = Basic.Deliver(
        consumer_tag="test", delivery_tag=1, redelivered=redelivered, routing_key=routing_key
    )
    # No channel: nothing here settles a message.
    return DeliveredMessage(deliver, header, body, cast(AbstractChannel, None))


def unframed(data: bytes, routing_key: str) -> aio_pika.IncomingMessage:
    """The message of one ``basic.publish``'s frames (``broker/batch.py``), as delivered."""
    parts: list[Any] = []
    while data:
        used, _, part = frame.unmarshal(data)
        parts.append(part)
        data = data[used:]
    _, header, *bodies = parts
    assert isinstance(header, ContentHeader)
    body = b"".join(part.value for part in bodies)
    return aio_pika.IncomingMessage(arrived(header, body, routing_key), no_ack=True)


def task_message(**headers: Any) -> aio_pika.Message:
    """The task message of ``ENVELOPE`` as the scheduler publishes it, with extra headers."""
    message = codec.task_message(ENVELOPE, headers)
    # Properties a record keeps (timestamp) and ones it must not (expiry, priority).
    message.timestamp, message.expiration, message.priority = T0, 60, 3
    return message


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
