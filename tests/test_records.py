"""Failure records without a broker: what the worker writes is what every tool reads back."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import aio_pika
import orjson
from pamqp.commands import Basic

from tests.wire import ENVELOPE, MAIN, T0, death, incoming, task_message, worker_delivery
from warren_cron import codec
from warren_cron.codec import kept_properties, persistent_message, task_headers
from warren_cron.envelope import CONTENT_TYPE
from warren_cron.headers import H_REASON
from warren_cron.names import FAILED_KEY
from warren_cron.records import (
    ERROR_CHARS,
    Failure,
    failure_headers,
    failure_record,
    read_record,
    record_from,
)

TASK_HEADERS = task_headers(ENVELOPE.run_id, ENVELOPE.schedule)
#: The broker's history of a task that failed its plan of one retry.
HISTORY = [
    death("cron_scheduler_retry.1s", "expired", time=T0 - timedelta(seconds=1)),
    death(MAIN, "rejected", 2, time=T0 - timedelta(seconds=2)),
]


def test_kept_properties_read_the_same_from_a_mapping_pamqp_and_aio_pika() -> None:
    """Ids, content type, time, type and app id are kept, whichever form carries them."""
    props = {"message_id": "r1", "content_type": CONTENT_TYPE, "timestamp": T0, "type": "cron"}
    pamqp = Basic.Properties(
        message_id="r1", content_type=CONTENT_TYPE, timestamp=T0, message_type="cron"
    )
    message = aio_pika.Message(
        b"", message_id="r1", content_type=CONTENT_TYPE, timestamp=T0, type="cron"
    )
    read = kept_properties(incoming(message, "failed"))
    assert kept_properties(props) == kept_properties(pamqp) == read == props


def test_unset_and_unkept_properties_are_left_out() -> None:
    """Properties that are None, and those a record does not carry (expiry, priority), go."""
    message = aio_pika.Message(b"", message_id="r1", expiration=5, priority=9, reply_to="q")
    assert kept_properties(incoming(message, "failed")) == {"message_id": "r1"}
    assert kept_properties({"message_id": None, "app_id": "warren"}) == {"app_id": "warren"}


def test_a_persistent_message_carries_body_headers_and_kept_properties_only() -> None:
    """The copy survives a broker restart, and carries no expiry that could drop it."""
    message = persistent_message(b"body", {"a": 1}, {"message_id": "r1", "expiration": 5})
    assert message.delivery_mode is aio_pika.DeliveryMode.PERSISTENT
    assert (message.body, message.headers, message.message_id) == (b"body", {"a": 1}, "r1")
    assert message.expiration is None


def test_failure_headers_keep_the_task_headers_and_copy_the_broker_history() -> None:
    """cron-* headers say why; x-death is copied under cron-x-death, no x- header is kept."""
    headers = {**TASK_HEADERS, "x-death": HISTORY, "x-delivery-count": 2, "custom": "v"}
    written = failure_headers(headers, "final", Failure("retries-exhausted", "boom", 3), T0)
    assert written == {
        **TASK_HEADERS,
        "custom": "v",
        "cron-attempts": 3,
        "cron-reason": "retries-exhausted",
        "cron-failed-at": "2026-01-31T08:00:00+00:00",
        "cron-x-death": HISTORY,
        "cron-error": "boom",
        "cron-routing-key": "final",
    }


def test_failure_headers_of_a_message_without_headers_error_or_key() -> None:
    """No headers, no error text, no routing key: only the headers that have a value."""
    written = failure_headers(None, None, Failure("decode-error", None, 1), T0)
    assert set(written) == {"cron-attempts", "cron-reason", "cron-failed-at", "cron-x-death"}
    assert written["cron-x-death"] == []


def test_a_long_error_is_cut_so_the_headers_fit_in_one_frame() -> None:
    """The error text is kept to its first ERROR_CHARS characters."""
    written = failure_headers({}, "final", Failure("exception", "x" * 50_000, 1), T0)
    assert written["cron-error"] == "x" * ERROR_CHARS


def test_a_failure_record_reads_back_as_the_worker_wrote_it() -> None:
    """Run id, schedule, task, attempts, reason, error, time, key and history survive the wire."""
    delivery = worker_delivery(task_message(**{"x-death": HISTORY}))
    written = failure_record(delivery, Failure("retries-exhausted", "RuntimeError: boom", 3))
    record = read_record(incoming(written, FAILED_KEY), MAIN)
    assert (record.run_id, record.schedule, record.task) == ("nightly@1", "nightly", "report")
    assert (record.attempts, record.reason) == (3, "retries-exhausted")
    assert record.error == "RuntimeError: boom"
    assert record.routing_key == "final" and record.replays == 0
    assert record.failed_at is not None and record.failed_at.tzinfo is not None
    assert [(d["queue"], d["reason"], d["count"]) for d in record.history] == [
        ("cron_scheduler_retry.1s", "expired", 1),
        (MAIN, "rejected", 2),
    ]
    assert record.body == codec.encode(ENVELOPE)


def test_a_failure_record_keeps_the_task_properties_but_not_its_expiry() -> None:
    """Message id, content type and timestamp are kept; expiry and priority are not."""
    written = failure_record(worker_delivery(task_message()), Failure("exception", "e", 1))
    assert written.delivery_mode is aio_pika.DeliveryMode.PERSISTENT
    record = read_record(incoming(written, FAILED_KEY), MAIN)
    assert record.properties == {
        "message_id": "nightly@1",
        "content_type": CONTENT_TYPE,
        "timestamp": T0,
    }


def test_a_delivery_is_recorded_under_the_run_id_the_worker_logged() -> None:
    """rabbitmqadmin sends no message id, a foreign client another one: the record gets the
    run id the log lines used (not the random one aiormq would stamp), as id and header."""
    bare = task_message()
    bare.message_id = None
    written = failure_record(worker_delivery(bare), Failure("exception", "e", 1), run_id="r-1")
    assert (written.message_id, (written.headers or {})["cron-run-id"]) == ("r-1", "r-1")
    own = failure_record(worker_delivery(task_message()), Failure("exception", "e", 1), None, "r-1")
    assert own.message_id == "r-1"


def test_a_record_stamped_with_a_naive_time_reads_it_as_utc() -> None:
    """A cron-failed-at without an offset is a UTC time, not the reader's local time."""
    headers = failure_headers({}, "final", Failure("exception", "e", 1), T0.replace(tzinfo=None))
    record = read_record(incoming(aio_pika.Message(b"{}", headers=headers), FAILED_KEY), MAIN)
    assert record.failed_at == T0


def test_a_record_written_by_a_foreign_tool_with_bytes_values_reads_as_text() -> None:
    """Values sent as bytes (not UTF-8 on the wire) read as text, counts as numbers."""
    headers = {
        H_REASON: b"permanent-error",
        "cron-error": b"ValueError: bad",
        "cron-routing-key": b"30s",
        "cron-schedule": b"nightly",
        "cron-attempts": b"2",
        "cron-replays": "1",
        "cron-failed-at": b"2026-01-31T08:00:00Z",
        "cron-run-id": b"r-bytes",
    }
    record = record_from(b"", headers, FAILED_KEY, MAIN)
    assert record.summary() == {
        "run_id": "r-bytes",
        "schedule": "nightly",
        "task": None,
        "attempts": 2,
        "reason": "permanent-error",
        "failed_at": "2026-01-31T08:00:00+00:00",
        "replays": 1,
        "error": "ValueError: bad",
    }
    assert record.routing_key == "30s"


def test_a_record_with_damaged_counts_and_time_still_lists() -> None:
    """Counts that are no number read as 0, a time that is no time as none: nothing raises."""
    for attempts in ("many", None, [3], float("inf"), {"n": 1}):
        headers: dict[str, Any] = {H_REASON: "exception", "cron-attempts": attempts}
        headers["cron-failed-at"] = "soon"
        record = read_record(incoming(aio_pika.Message(b"\xff", headers=headers), "failed"), MAIN)
        assert (record.attempts, record.failed_at, record.task) == (0, None, None)
        assert orjson.loads(orjson.dumps(record.summary()))["reason"] == "exception"
