"""Export and restore without a broker: a restored record reads as the exported one did."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import aio_pika
import orjson
import pytest

from tests.wire import MAIN, T0, death, incoming, task_message, worker_delivery
from warren_cron.failed.export import body_fields, exported, restored_message
from warren_cron.names import FAILED_KEY, Names
from warren_cron.records import FailedRecord, Failure, failure_record, read_record

FAILED_QUEUE = Names().failed_queue
HISTORY = [
    death("cron_scheduler_retry.1s", "expired", time=T0),
    death(MAIN, "rejected", 2, time=T0 - timedelta(seconds=1)),
]


def export_line(record: FailedRecord) -> bytes:
    """The line ``warren failed export`` writes for ``record``."""
    return orjson.dumps(exported(record))


def restored(line: bytes) -> FailedRecord:
    """The record read back after ``warren failed restore`` put ``line`` in the failed queue."""
    message = restored_message(orjson.loads(line))
    return read_record(incoming(message, FAILED_QUEUE), MAIN)


def worker_record(message: aio_pika.Message) -> FailedRecord:
    """The record a worker wrote for ``message``, as the failed queue gives it."""
    written = failure_record(worker_delivery(message), Failure("retries-exhausted", "boom", 3))
    return read_record(incoming(written, FAILED_KEY), MAIN)


def test_a_worker_record_round_trips_through_export_and_restore() -> None:
    """Every field, the history, the properties, the headers and the body come back the same."""
    record = worker_record(task_message(**{"x-death": HISTORY}))
    line = export_line(record)
    back = restored(line)
    assert exported(back) == orjson.loads(line)
    assert back.summary() == record.summary()
    assert (back.routing_key, back.body, back.properties) == (
        "final",
        record.body,
        record.properties,
    )


def test_a_record_the_broker_dead_lettered_alone_restores_with_the_same_reading() -> None:
    """Its derived reason, count and time are written as cron-* headers, x-death is not sent."""
    message = task_message(**{"x-death": HISTORY})
    record = read_record(incoming(message, "final"), MAIN)
    assert (record.reason, record.attempts) == ("retries-exhausted", 2)
    sent = restored_message(orjson.loads(export_line(record)))
    assert not any(name.startswith("x-") for name in sent.headers or {})
    back = read_record(incoming(sent, FAILED_QUEUE), MAIN)
    assert back.summary() == record.summary()
    assert back.routing_key == "final"
    assert [(d["queue"], d["count"]) for d in back.history] == [
        ("cron_scheduler_retry.1s", 1),
        (MAIN, 2),
    ]


@pytest.mark.parametrize("body", [b'{"task": "job"}', b"", b"\xc3\x28 not utf-8", b"\x00\xff"])
def test_any_body_comes_back_byte_for_byte(body: bytes) -> None:
    """UTF-8 bodies are written as text, anything else as base64."""
    fields = body_fields(body)
    assert ("body_base64" in fields) == (fields["body"] is None)
    headers: dict[str, Any] = {"cron-reason": "decode-error", "cron-attempts": 1}
    record = read_record(incoming(aio_pika.Message(body, headers=headers), FAILED_KEY), MAIN)
    assert restored(export_line(record)).body == body


def test_header_values_of_every_wire_type_export_as_json() -> None:
    """Decimals, times, nested tables and byte arrays a foreign client sent do not stop export."""
    extra: dict[str, Any] = {
        "price": Decimal("1.50"),
        "at": T0,
        "nested": {"list": [1, "two", T0]},
        "blob": bytearray(b"\x00\xff"),
        "flag": False,
    }
    record = worker_record(task_message(**extra))
    data = orjson.loads(export_line(record))
    assert data["headers"]["price"] == "1.50"
    assert data["headers"]["at"] == data["headers"]["nested"]["list"][2] == T0.isoformat()
    assert data["headers"]["flag"] is False
    assert restored(export_line(record)).summary() == record.summary()


def test_a_run_id_known_only_from_the_body_becomes_the_message_id() -> None:
    """A foreign message without a message id is restored with its run id as message id."""
    body = orjson.dumps({"run_id": "r-body", "task": "job"})
    headers: dict[str, Any] = {"cron-reason": "unknown-task", "cron-attempts": 1}
    record = read_record(incoming(aio_pika.Message(body, headers=headers), FAILED_KEY), MAIN)
    message = restored_message(orjson.loads(export_line(record)))
    assert message.message_id == "r-body"


def test_a_hand_written_line_restores_with_what_it_says() -> None:
    """A minimal line (run id, reason, body) restores; what it does not say stays unknown."""
    line = orjson.dumps({"run_id": "r1", "reason": "exception", "body": '{"task": "job"}'})
    back = restored(line)
    assert (back.run_id, back.reason, back.task) == ("r1", "exception", "job")
    assert (back.attempts, back.failed_at, back.error, back.history) == (0, None, None, [])


def test_restore_sends_no_broker_header_and_keeps_the_properties() -> None:
    """x- headers in a line (a quorum delivery count) are dropped; the timestamp is a time."""
    data = orjson.loads(export_line(worker_record(task_message())))
    data["headers"]["x-delivery-count"] = 3
    data["headers"]["x-death"] = []
    message = restored_message(data)
    assert message.delivery_mode is aio_pika.DeliveryMode.PERSISTENT
    assert not any(name.startswith("x-") for name in message.headers or {})
    assert (message.message_id, message.timestamp) == ("nightly@1", T0)
    assert message.content_type == "application/json"
