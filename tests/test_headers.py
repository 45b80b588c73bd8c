"""Header readers, without a broker: the values RabbitMQ and foreign clients send, read plainly."""

from __future__ import annotations

from datetime import timedelta, timezone
from decimal import Decimal
from typing import Any

import orjson
import pytest

from tests.wire import MAIN, T0, death
from warren_cron.headers import (
    as_utc,
    attempt_number,
    content_headers,
    jsonable,
    rejections,
    text,
    x_death,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("retries-exhausted", "retries-exhausted"),
        (b"retries-exhausted", "retries-exhausted"),
        (bytearray(b"retries-exhausted"), "retries-exhausted"),
        (b"caf\xe9", "caf\ufffd"),
        (4, "4"),
    ],
)
def test_a_header_value_reads_as_text_whether_str_bytes_or_a_number(
    value: object, expected: str
) -> None:
    """Strings the broker sends as bytes read the same as str; bad UTF-8 does not raise."""
    assert text(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        T0,
        T0.replace(tzinfo=None),
        T0.astimezone(timezone(timedelta(hours=2))),
        "2026-01-31T08:00:00+00:00",
        "2026-01-31T08:00:00Z",
        "2026-01-31T10:00:00+02:00",
        "2026-01-31T08:00:00",
        b"2026-01-31T08:00:00Z",
    ],
)
def test_a_header_time_reads_as_aware_utc_and_a_bare_one_is_utc(value: object) -> None:
    """Datetimes and ISO text, aware or naive, read as the same UTC instant."""
    read = as_utc(value)
    assert read == T0 and read is not None and read.utcoffset() == timedelta(0)


@pytest.mark.parametrize("value", [None, "", "yesterday", b"\xff", 1769846400, ["2026-01-31"]])
def test_a_header_that_is_no_time_reads_as_none(value: object) -> None:
    """Text that is no ISO time, numbers and missing values give None, never an error."""
    assert as_utc(value) is None


def test_header_values_turn_into_json_that_orjson_can_write() -> None:
    """Datetimes (bare ones as UTC), bytes, byte arrays, decimals and nested tables convert."""
    headers: dict[str, Any] = {
        "at": T0,
        "bare": T0.replace(tzinfo=None),
        "raw": b"abc",
        "blob": bytearray(b"\x00\xff"),
        "price": Decimal("1.50"),
        "nested": {"x-death": [death(MAIN, "rejected")], "n": (1, 2)},
        "flag": True,
        "none": None,
    }
    data = orjson.loads(orjson.dumps(jsonable(headers)))
    assert data["at"] == data["bare"] == "2026-01-31T08:00:00+00:00"
    assert (data["raw"], data["blob"], data["price"]) == ("abc", "\x00\ufffd", "1.50")
    assert data["nested"]["x-death"][0]["time"] == "2026-01-31T08:00:00+00:00"
    assert (data["nested"]["n"], data["flag"], data["none"]) == ([1, 2], True, None)


def test_x_death_lists_the_broker_history_and_skips_what_is_no_entry() -> None:
    """The entries keep their order (newest first); anything but a table is left out."""
    first, second = death(MAIN, "rejected", 2), death("cron_scheduler_retry.1s", "expired")
    assert x_death({"x-death": [first, "junk", 7, second]}) == [first, second]
    assert x_death({"x-death": []}) == x_death({}) == x_death(None) == []


@pytest.mark.parametrize("value", [5, "oops", b"oops", {"count": 1}, None, True])
def test_an_x_death_header_that_is_no_list_is_an_empty_history(value: object) -> None:
    """RabbitMQ 3.x delivers a client's own x-death as sent: a non-list means no history."""
    assert x_death({"x-death": value}) == []


def test_rejections_count_only_rejections_from_the_main_queue() -> None:
    """Expiries from retry queues and rejections elsewhere are not attempts of this task."""
    headers = {
        "x-death": [
            death("cron_scheduler_retry.2s", "expired"),
            death(MAIN, "rejected", 3),
            death("other_queue", "rejected", 5),
            death(MAIN, "delivery_limit", 1),
        ]
    }
    assert rejections(headers, MAIN) == 3
    assert attempt_number(headers, MAIN) == 4


def test_rejections_read_bytes_queue_names_and_numbers_sent_as_text() -> None:
    """A foreign history with bytes names and a count as text still counts."""
    entry = {"queue": MAIN.encode(), "reason": b"rejected", "count": "2"}
    assert rejections({"x-death": [entry]}, MAIN) == 2


@pytest.mark.parametrize("count", ["abc", None, [1], float("inf"), Decimal("NaN")])
def test_a_damaged_rejection_count_counts_as_none(count: object) -> None:
    """A count that is no number reads as 0: the task still gets an attempt number."""
    entry = {"queue": MAIN, "reason": "rejected", "count": count}
    assert rejections({"x-death": [entry, death(MAIN, "rejected", 1)]}, MAIN) == 1


def test_the_first_delivery_is_attempt_one() -> None:
    """No history, a missing header mapping or an empty one: attempt 1."""
    assert attempt_number(None, MAIN) == attempt_number({}, MAIN) == 1
    assert attempt_number({"x-death": 5}, MAIN) == 1


def test_the_counts_a_broker_adds_at_each_delivery_are_not_a_messages_content() -> None:
    """A record read again on RabbitMQ 4.x (x-delivery-count, x-acquired-count) is the same
    record: replay counts it once; x-death and every header of ours stay."""
    first = {"cron-run-id": "r", "x-death": [{"count": 1}], "a": 1}
    again = {**first, "x-delivery-count": 2, "x-acquired-count": 3}
    assert content_headers(again) == content_headers(first) == first
    assert content_headers(None) == {}
