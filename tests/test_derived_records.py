"""Records the broker dead-lettered alone, without a broker: each gets a reason, a count, a time.

A NACK at ``final`` with no record published, a quorum delivery limit, or a routing key with no
retry queue put the task message itself in the failed queue, with no ``cron-*`` headers.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import orjson
import pytest

from tests.wire import MAIN, T0, death, incoming, task_message
from warren_cron.records import FailedRecord, derived_reason, read_record, record_from


def dead_lettered(routing_key: str, *history: dict[str, Any]) -> FailedRecord:
    """The record read from a task message the broker moved to the failed queue by itself."""
    return read_record(incoming(task_message(**{"x-death": list(history)}), routing_key), MAIN)


@pytest.mark.parametrize(
    ("history", "routing_key", "reason"),
    [
        ([death(MAIN, "delivery_limit")], "final", "delivery-limit"),
        ([death(MAIN, b"delivery_limit")], "30s", "delivery-limit"),
        ([death(MAIN, "rejected")], "final", "retries-exhausted"),
        ([death("cron_scheduler_retry.1s", "expired"), death(MAIN, "rejected")], "final",
         "retries-exhausted"),
        ([death(MAIN, "rejected"), death(MAIN, "delivery_limit")], "final", "retries-exhausted"),
        ([death(MAIN, "rejected")], "7s-9s", "no-retry-queue"),
        ([death("cron_scheduler_retry.1s", "expired")], "1s", "no-retry-queue"),
        ([], "final", "retries-exhausted"),
        ([], "unknown", "no-retry-queue"),
        ([], None, "no-retry-queue"),
    ],
)  # fmt: skip
def test_the_derived_reason_comes_from_the_newest_death_then_the_routing_key(
    history: list[Mapping[str, Any]], routing_key: str | None, reason: str
) -> None:
    """The broker's delivery limit wins; else a NACK at final spent the plan; else no queue."""
    assert derived_reason(history, routing_key) == reason


def test_a_task_past_the_quorum_delivery_limit_is_listed_with_reason_delivery_limit() -> None:
    """The broker's delivery_limit death names the worker's crashes and counts no attempts."""
    record = dead_lettered("final", death(MAIN, "delivery_limit", time=T0))
    assert (record.reason, record.attempts, record.failed_at) == ("delivery-limit", 0, T0)
    assert record.error is not None and "delivery limit" in record.error
    assert (record.run_id, record.schedule, record.task) == ("nightly@1", "nightly", "report")


def test_a_nack_at_final_without_a_record_reads_as_retries_exhausted() -> None:
    """Attempts are the rejections from the main queue; the time is the latest death."""
    record = dead_lettered(
        "final",
        death(MAIN, "rejected", 3, time=T0 - timedelta(minutes=5)),
        death("cron_scheduler_retry.1m", "expired", 2, time=T0),
        death("elsewhere", "rejected", 7, time=T0 - timedelta(hours=1)),
    )
    assert (record.reason, record.attempts, record.failed_at) == ("retries-exhausted", 3, T0)
    assert record.error is not None and "no failure record" in record.error
    assert record.routing_key == "final" and len(record.history) == 3


def test_a_key_with_no_retry_queue_reads_as_no_retry_queue_naming_the_key() -> None:
    """The error names the routing key and what publishers must do about it."""
    record = dead_lettered("7s-9s", death(MAIN, "rejected", time=T0))
    assert (record.reason, record.attempts, record.routing_key) == ("no-retry-queue", 1, "7s-9s")
    assert record.error is not None and "'7s-9s'" in record.error
    assert "declare the plan" in record.error


def test_a_message_with_no_history_at_all_still_lists() -> None:
    """No x-death: no attempts counted and no time known, but a reason and an error."""
    record = dead_lettered("final")
    assert (record.reason, record.attempts, record.failed_at) == ("retries-exhausted", 0, None)
    assert record.history == [] and record.summary()["failed_at"] is None


def test_a_record_prefers_its_copied_history_to_the_broker_one() -> None:
    """cron-x-death is the task's history; the failed queue's own x-death is not."""
    copied, own = [death(MAIN, "rejected", 4)], [death("cron_monitor", "expired")]
    headers = {"cron-reason": "exception", "cron-x-death": copied, "x-death": own}
    assert record_from(b"", headers, "failed", MAIN).history == copied
    damaged = {"cron-reason": "exception", "cron-x-death": "oops", "x-death": own}
    assert record_from(b"", damaged, "failed", MAIN).history == own


@pytest.mark.parametrize(
    ("properties", "headers", "body", "run_id"),
    [
        ({"message_id": "from-id"}, {"cron-run-id": "h"}, {"run_id": "b"}, "from-id"),
        ({}, {"cron-run-id": "h"}, {"run_id": "from-body"}, "from-body"),
        ({"message_id": "from-property"}, {"cron-run-id": "h"}, {"task": "t"}, "from-property"),
        ({}, {"cron-run-id": "from-header"}, {"run_id": ""}, "from-header"),
        ({}, {}, {"run_id": "from-body"}, "from-body"),
        ({}, {}, {"run_id": 42}, "42"),
        ({}, {}, {}, None),
    ],
)
def test_the_run_id_is_the_message_id_else_the_envelopes_else_the_header(
    properties: dict[str, Any], headers: dict[str, Any], body: dict[str, Any], run_id: str | None
) -> None:
    """A record is listed under its publisher's message id, as the worker logged it; a foreign
    message without one is still found by its envelope's run id or the header."""
    record = record_from(orjson.dumps(body), headers, "final", MAIN, properties)
    assert record.run_id == run_id


@pytest.mark.parametrize("body", [b"", b"{oops", b"\xc3\x28", b"[1, 2]", b"null", b'"text"'])
def test_a_body_that_is_no_envelope_still_lists_with_what_the_headers_say(body: bytes) -> None:
    """A decode-error record keeps its bytes; task is unknown, schedule comes from the header."""
    headers = {"cron-reason": "decode-error", "cron-schedule": "nightly", "cron-attempts": 1}
    record = record_from(body, headers, "failed", MAIN)
    assert (record.task, record.schedule, record.reason) == (None, "nightly", "decode-error")
    assert record.body == body


def test_the_summary_has_the_fields_of_the_list_table_as_json() -> None:
    """run id, schedule, task, attempts, reason, time (ISO), replays and error, in that order."""
    record = dead_lettered("final", death(MAIN, "rejected", 2, time=T0))
    summary = record.summary()
    assert list(summary) == [
        "run_id",
        "schedule",
        "task",
        "attempts",
        "reason",
        "failed_at",
        "replays",
        "error",
    ]
    assert orjson.loads(orjson.dumps(summary)) == {
        **summary,
        "failed_at": "2026-01-31T08:00:00+00:00",
    }


def test_a_record_whose_x_death_a_client_damaged_still_lists() -> None:
    """RabbitMQ 3.x keeps a client's x-death as sent: one that is no list is no history."""
    record = record_from(b"{}", {"x-death": 5}, "final", MAIN)
    assert (record.reason, record.attempts, record.history) == ("retries-exhausted", 0, [])
