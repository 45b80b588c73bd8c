"""Task messages already on a broker keep decoding, and the builders still write them so.

``fixtures/wire_before_codec.json`` holds the frames every builder wrote before the codec
took them over; the messages below are built from the same inputs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import aio_pika
import pytest
from pamqp import frame
from pamqp.header import ContentHeader

from tests.wire import MAIN, arrived, incoming, schedules, unframed, worker_delivery
from warren_cron import codec
from warren_cron.broker.batch import encode
from warren_cron.envelope import Envelope
from warren_cron.failed.replay_message import replay_message
from warren_cron.names import FAILED_KEY
from warren_cron.records import Failure, envelope_record, failure_record, read_record
from warren_cron.scheduler.publisher import fire_message
from warren_cron.worker.adopt import adopted_message

FIXTURE = json.loads((Path(__file__).parent / "fixtures/wire_before_codec.json").read_text())
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HAND = Envelope(
    task="job", payload={"k": "v"}, run_id="by-hand-1", schedule="nightly", scheduled_for=T0
)


def fire_frames() -> bytes:
    """The batch frames of the fixture's fire."""
    fire = T0 + timedelta(microseconds=250_000)
    return encode(fire_message(schedules()[1], fire, "cron_tasks"), 1, 131064)


def failure() -> aio_pika.Message:
    """The record a worker writes when the fixture's fire spent its plan."""
    fired = unframed(fire_frames(), "final")
    held = aio_pika.Message(fired.body, headers=fired.headers, message_id=fired.message_id)
    held.content_type, held.timestamp = fired.content_type, T0
    held.delivery_mode = aio_pika.DeliveryMode.PERSISTENT
    spent = Failure("retries-exhausted", "RuntimeError: boom", 3)
    return failure_record(worker_delivery(held), spent, T0, fired.message_id)


def hand_published() -> aio_pika.Message:
    """A task published by hand, with headers and properties of its own."""
    deaths: list[Any] = [{"count": 1, "queue": "q", "reason": "rejected"}]
    return aio_pika.Message(
        codec.encode(HAND),
        headers={"trace": "t-1", "x-death": deaths},
        message_id="m-own",
        correlation_id="c-1",
        app_id="rabbitmqadmin",
        expiration=60,
        priority=4,
    )


BUILDERS: dict[str, Callable[[], aio_pika.Message]] = {
    "enqueue": lambda: codec.task_message(
        Envelope(
            task="mail", payload={"to": ["a@x"], "n": 2**40, "f": 0.1}, scheduled_for=T0,
            run_id="once:mail@2026-03-01T12:00:00.000000Z-0a1b2c3d", timeout_seconds=30,
            deadline=T0 + timedelta(hours=2),
        )
    ),
    "delayed enqueue": lambda: codec.task_message(
        Envelope(
            task="mail", run_id="key:invoice-42", scheduled_for=T0 + timedelta(seconds=90),
            deadline=T0 + timedelta(hours=1),
        )
    ),
    "enqueue at a zoned time": lambda: codec.task_message(
        Envelope(
            task="mail", run_id="key:zone",
            scheduled_for=datetime(2026, 3, 1, 13, 0, tzinfo=ZoneInfo("Europe/Berlin")),
        )
    ),
    "failure record": failure,
    "replay": lambda: replay_message(
        read_record(incoming(failure(), FAILED_KEY), MAIN), T0 + timedelta(hours=1)
    ),
    "adopted copy": lambda: adopted_message(
        worker_delivery(hand_published(), MAIN, redelivered=True), HAND
    ),
    "hand-published": hand_published,
    "envelope record": lambda: envelope_record(HAND, Failure("retries-exhausted", "e", 2), T0),
}  # fmt: skip


def header_frame(message: aio_pika.Message) -> str:
    """The content header frame of ``message``, as hex."""
    return frame.marshal(ContentHeader(0, len(message.body), message.properties), 1).hex()


def stored(entry: dict[str, Any]) -> aio_pika.abc.AbstractIncomingMessage:
    """A fixture message as a consumer receives it."""
    body = entry["body"].encode()
    if "frames" in entry:
        return unframed(bytes.fromhex(entry["frames"]), entry["routing_key"])
    _, _, header = frame.unmarshal(bytes.fromhex(entry["header_frame"]))
    assert isinstance(header, ContentHeader)
    return aio_pika.IncomingMessage(arrived(header, body, entry["routing_key"]), no_ack=True)


@pytest.mark.parametrize("entry", FIXTURE, ids=[entry["kind"] for entry in FIXTURE])
def test_a_message_written_before_the_codec_decodes_under_its_run_id(
    entry: dict[str, Any],
) -> None:
    """Body, id and headers of yesterday's messages read as today's: one run id for all."""
    message = stored(entry)
    envelope = codec.decode(message)
    headers = message.headers or {}
    run_id = codec.run_id_of(envelope.run_id, message.message_id, headers)
    assert run_id == (message.message_id or envelope.run_id)
    if entry["kind"] != "hand-published":
        assert message.message_id == headers["cron-run-id"] == run_id


@pytest.mark.parametrize("entry", FIXTURE, ids=[entry["kind"] for entry in FIXTURE])
def test_the_builders_still_write_the_same_bytes(entry: dict[str, Any]) -> None:
    """Every builder's body and properties, byte for byte, as written before the codec."""
    if "frames" in entry:
        assert fire_frames().hex() == entry["frames"]
        return
    message = BUILDERS[entry["kind"]]()
    assert message.body == entry["body"].encode()
    assert header_frame(message) == entry["header_frame"]
