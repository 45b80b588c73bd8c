"""Which failed records a command works on, without a broker: filters and ``--since``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.wire import T0
from warren_cron.failed.select import RecordFilter, parse_since
from warren_cron.records import FailedRecord


def failed(
    run_id: str | None = "nightly@2026-01-31T02:30:00Z",
    schedule: str | None = "nightly",
    task: str | None = "report",
    reason: str = "retries-exhausted",
    failed_at: datetime | None = T0,
) -> FailedRecord:
    """A failed record with the fields the filters look at."""
    return FailedRecord(
        run_id=run_id,
        schedule=schedule,
        task=task,
        attempts=4,
        reason=reason,
        error="RuntimeError: boom",
        failed_at=failed_at,
        routing_key="final",
        replays=0,
        history=[],
        body=b"{}",
        headers={},
    )


@pytest.mark.parametrize(
    ("value", "age"),
    [
        ("90s", timedelta(seconds=90)),
        ("30m", timedelta(minutes=30)),
        ("2h", timedelta(hours=2)),
        ("7d", timedelta(days=7)),
        ("0s", timedelta(0)),
        (" 2h ", timedelta(hours=2)),
    ],
)
def test_since_an_age_means_that_long_before_now(value: str, age: timedelta) -> None:
    """``--since 2h`` selects what failed in the last two hours."""
    assert parse_since(value, now=T0) == T0 - age


def test_since_an_age_counts_back_from_the_current_time_by_default() -> None:
    """Without ``now`` the age is counted from the clock, in UTC."""
    before = datetime.now(UTC)
    since = parse_since("1h")
    assert before - timedelta(hours=1) <= since <= datetime.now(UTC) - timedelta(hours=1)


@pytest.mark.parametrize(
    "value",
    [
        "2026-01-31T08:00:00Z",
        "2026-01-31T08:00:00+00:00",
        "2026-01-31T09:00:00+01:00",
        "2026-01-31T08:00:00",
        "2026-01-31 08:00:00",
    ],
)
def test_since_an_iso_time_is_that_instant_and_a_bare_one_is_utc(value: str) -> None:
    """An ISO time with an offset is converted to UTC; one without is read as UTC."""
    assert parse_since(value, now=T0 + timedelta(days=3)) == T0


def test_since_a_date_alone_is_its_midnight_utc() -> None:
    """``--since 2026-01-31`` selects what failed from the start of that day, UTC."""
    assert parse_since("2026-01-31") == datetime(2026, 1, 31, tzinfo=UTC)


@pytest.mark.parametrize(
    "value", ["", "yesterday", "500ms", "1h30m", "-2h", "2 h", "1w", "2026-13-01", "h2"]
)
def test_a_bad_since_is_an_error_that_shows_both_spellings(value: str) -> None:
    """Milliseconds, compound ages, weeks and bad dates are refused with an example of each."""
    with pytest.raises(ValueError, match="neither an age") as caught:
        parse_since(value, now=T0)
    assert repr(value) in str(caught.value)
    assert "30m" in str(caught.value) and "2026-01-31T08:00:00Z" in str(caught.value)


def test_no_filter_selects_every_record_even_one_with_nothing_known() -> None:
    """An empty filter is ``--all``: records without run id, schedule, task or time match."""
    empty = RecordFilter()
    assert empty.selects_all
    assert empty.matches(failed())
    assert empty.matches(failed(run_id=None, schedule=None, task=None, failed_at=None))


@pytest.mark.parametrize(
    ("select", "schedules"),
    [
        (RecordFilter(schedule="billing-*"), {"billing-eu", "billing-us"}),
        (RecordFilter(schedule="billing-??"), {"billing-eu", "billing-us"}),
        (RecordFilter(schedule="billing-eu"), {"billing-eu"}),
        (RecordFilter(schedule="Billing-*"), set()),
        (RecordFilter(schedule="*"), {"billing-eu", "billing-us", "cleanup"}),
    ],
)
def test_the_schedule_filter_is_a_case_sensitive_name_pattern(
    select: RecordFilter, schedules: set[str]
) -> None:
    """``*`` and ``?`` match as in a shell; a record without a schedule never matches."""
    records = [failed(schedule=name) for name in ("billing-eu", "billing-us", "cleanup", None)]
    assert {r.schedule for r in records if select.matches(r)} == schedules


def test_the_task_and_run_id_filters_are_name_patterns_too() -> None:
    """``--task http`` and ``--run-id 'nightly@2026-01-*'`` pick by name."""
    assert RecordFilter(task="http").matches(failed(task="http"))
    assert not RecordFilter(task="http").matches(failed(task="https"))
    assert not RecordFilter(task="*").matches(failed(task=None))
    by_month = RecordFilter(run_id="nightly@2026-01-*")
    assert by_month.matches(failed())
    assert not by_month.matches(failed(run_id="nightly@2026-02-01T02:30:00Z"))
    assert not by_month.matches(failed(run_id=None))


def test_the_reason_filter_is_an_exact_name() -> None:
    """``--reason`` names one reason; it is no pattern."""
    assert RecordFilter(reason="unknown-task").matches(failed(reason="unknown-task"))
    assert not RecordFilter(reason="unknown-task").matches(failed())
    assert not RecordFilter(reason="retries-*").matches(failed())


def test_since_keeps_records_from_that_instant_on_and_none_of_unknown_time() -> None:
    """The bound is inclusive; a record whose failure time is unknown is not recent."""
    since = RecordFilter(since=T0)
    assert since.matches(failed(failed_at=T0))
    assert since.matches(failed(failed_at=T0 + timedelta(seconds=1)))
    assert not since.matches(failed(failed_at=T0 - timedelta(seconds=1)))
    assert not since.matches(failed(failed_at=None))


def test_until_leaves_records_that_arrived_during_the_run_alone() -> None:
    """A record that failed after the run began is left; one of unknown time is not."""
    until = RecordFilter(until=T0)
    assert until.matches(failed(failed_at=T0))
    assert not until.matches(failed(failed_at=T0 + timedelta(seconds=1)))
    assert until.matches(failed(failed_at=None))
    assert until.selects_all  # a run's own bound narrows nothing the user asked for


def test_filters_combine_and_a_record_must_pass_every_one() -> None:
    """Schedule, task, reason, run id and time together: one mismatch leaves a record out."""
    select = RecordFilter(
        schedule="night*", task="report", reason="retries-exhausted", run_id="*@2026-*", since=T0
    )
    assert not select.selects_all
    assert select.matches(failed())
    assert not select.matches(failed(schedule="daily"))
    assert not select.matches(failed(task="export"))
    assert not select.matches(failed(reason="exception"))
    assert not select.matches(failed(run_id="nightly@2025-12-31"))
    assert not select.matches(failed(failed_at=T0 - timedelta(days=1)))


@pytest.mark.parametrize(
    "select",
    [
        RecordFilter(schedule="x"),
        RecordFilter(task="x"),
        RecordFilter(reason="x"),
        RecordFilter(run_id="x"),
        RecordFilter(since=T0),
    ],
)
def test_any_user_filter_means_not_all(select: RecordFilter) -> None:
    """Replay and purge demand ``--all`` only when no filter narrows the selection."""
    assert not select.selects_all
