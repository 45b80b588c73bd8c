"""Fire times: cron across DST changes, anchored intervals, bounds, and catch-up choices."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from warren_cron.clock import utc_text
from warren_cron.runtime.settings import CronSettings
from warren_cron.scheduler.firing import FireHeap, keep
from warren_cron.schedules.load import ScheduleSet, parse_schedules
from warren_cron.schedules.schedule import Schedule
from warren_cron.schedules.timing import CronTiming, IntervalTiming, format_duration, parse_interval


def utc(text: str) -> datetime:
    """A UTC instant from ``2024-03-10T07:00``."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def fires(expression: str, zone: str, after: str, count: int) -> list[str]:
    """The next ``count`` fires as ``HH:MM`` UTC strings with their date."""
    timing = CronTiming(expression, zone)
    result, moment = [], utc(after)
    for _ in range(count):
        fire = timing.next_after(moment)
        assert fire is not None
        result.append(fire.strftime("%m-%d %H:%M"))
        moment = fire
    return result


NY = "America/New_York"
BERLIN = "Europe/Berlin"


@pytest.mark.parametrize(
    ("expression", "zone", "after", "expected"),
    [
        # New York springs forward at 2024-03-10 02:00 EST (07:00 UTC): 02:30 does not exist
        # and fires once when the clock jumps, at 03:00 EDT.
        ("30 2 * * *", NY, "2024-03-09T00:00", "03-09 07:30, 03-10 07:00, 03-11 06:30"),
        # Every 15 minutes stays every 15 minutes: 01:45 EST, then 03:00 EDT.
        ("*/15 * * * *", NY, "2024-03-10T06:30", "03-10 06:45, 03-10 07:00, 03-10 07:15"),
        # It falls back at 2024-11-03 02:00 EDT (06:00 UTC): 02:30 exists once (EST).
        ("30 2 * * *", NY, "2024-11-02T00:00", "11-02 06:30, 11-03 07:30, 11-04 07:30"),
        # 01:30 happens twice that night and fires once, the first time (EDT).
        ("30 1 * * *", NY, "2024-11-02T00:00", "11-02 05:30, 11-03 05:30, 11-04 06:30"),
        # Every 15 minutes runs through both passes of the repeated hour.
        ("*/15 * * * *", NY, "2024-11-03T05:30", "11-03 05:45, 11-03 06:00, 11-03 06:15"),
        # Berlin springs forward at 2024-03-31 02:00 CET (01:00 UTC): 02:30 fires at 03:00 CEST.
        ("30 2 * * *", BERLIN, "2024-03-30T00:00", "03-30 01:30, 03-31 01:00, 04-01 00:30"),
        ("*/15 * * * *", BERLIN, "2024-03-31T00:30", "03-31 00:45, 03-31 01:00, 03-31 01:15"),
        # Berlin falls back at 2024-10-27 03:00 CEST (01:00 UTC): 02:30 repeats, fires once.
        ("30 2 * * *", BERLIN, "2024-10-26T00:00", "10-26 00:30, 10-27 00:30, 10-28 01:30"),
        ("*/15 * * * *", BERLIN, "2024-10-27T00:30", "10-27 00:45, 10-27 01:00, 10-27 01:15"),
        # Two skipped times of one night collapse into the single fire at the jump.
        ("0,30 2 * * *", BERLIN, "2024-03-30T12:00", "03-31 01:00, 04-01 00:00, 04-01 00:30"),
    ],
)
def test_cron_follows_cron_rules_across_dst_changes(
    expression: str, zone: str, after: str, expected: str
) -> None:
    """Skipped local times fire once at the jump, repeated ones once; */15 keeps real time."""
    assert ", ".join(fires(expression, zone, after, 3)) == expected


def test_a_cron_without_timezone_runs_in_utc() -> None:
    """The default zone is UTC, whatever the machine's."""
    assert fires("0 9 * * 1", "UTC", "2024-03-10T00:00", 2) == ["03-11 09:00", "03-18 09:00"]


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        ("2024-01-01T00:00:00", "2024-01-01T00:00:05Z"),
        ("2024-01-01T00:00:04.999", "2024-01-01T00:00:05Z"),
        ("2024-01-01T00:00:05", "2024-01-01T00:00:10Z"),
        ("2024-01-01T00:00:07.300", "2024-01-01T00:00:10Z"),
    ],
)
def test_intervals_are_anchored_not_counted_from_the_last_run(moment: str, expected: str) -> None:
    """Whenever it is asked, every 5s falls on the anchor's grid: a late run never drifts it."""
    timing = IntervalTiming(parse_interval("5s"))
    fire = timing.next_after(utc(moment))
    assert fire is not None and utc_text(fire) == expected


def test_an_interval_starts_at_its_start_at() -> None:
    """With start_at the grid starts there, and start_at itself is the first fire."""
    timing = IntervalTiming(parse_interval("1h30m"), utc("2024-01-01T00:10"))
    first = timing.next_after(utc("2023-06-01T00:00"))
    assert first == utc("2024-01-01T00:10")
    assert timing.next_after(first) == utc("2024-01-01T01:40")


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("5m", 300), ("1h30m", 5400), ("1d", 86400)]
)
def test_interval_spellings(text: str, seconds: int) -> None:
    """Intervals combine d, h, m and s."""
    assert parse_interval(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(("seconds", "text"), [(3.5, "3.5s"), (90, "1m30s"), (7200, "2h")])
def test_durations_read_like_people_write_them(seconds: float, text: str) -> None:
    """--check prints durations in the units an operator uses."""
    assert format_duration(seconds) == text


def schedule(body: str) -> Schedule:
    """One schedule from the body of a [[schedule]] table."""
    text = f'[[schedule]]\nname = "job"\ntask = "noop"\n{body}'
    return parse_schedules(text, CronSettings()).schedules[0]


def test_start_at_and_stop_at_bound_the_fires() -> None:
    """No fire before start_at or after stop_at; local times use the schedule's zone."""
    job = schedule(
        'cron = "0 12 * * *"\ntimezone = "Europe/Berlin"\n'
        "start_at = 2024-06-03T00:00:00\nstop_at = 2024-06-05T12:00:00"
    )
    assert job.fires(utc("2024-06-01T00:00"), 5) == [
        utc("2024-06-03T10:00"),
        utc("2024-06-04T10:00"),
        utc("2024-06-05T10:00"),
    ]


def test_a_disabled_schedule_never_fires() -> None:
    """enabled = false keeps the schedule in the file but out of the heap."""
    job = schedule('every = "1m"\nenabled = false')
    assert job.fires(utc("2024-01-01T00:00"), 3) == []
    assert FireHeap(ScheduleSet("t", (job,)), utc("2024-01-01T00:00")).next_time() is None


NOW = utc("2024-05-01T12:00")
MISSED = [NOW - timedelta(hours=2), NOW - timedelta(minutes=30), NOW - timedelta(seconds=1)]


@pytest.mark.parametrize(
    ("policy", "grace", "due", "kept"),
    [
        ("all", 10_800, MISSED, MISSED),
        ("all", 3_600, MISSED, MISSED[1:]),
        ("latest", 10_800, MISSED, MISSED[2:]),
        ("latest", 0, MISSED[:2], []),
        ("skip", 10_800, MISSED, MISSED[2:]),  # one second late is still on time
        ("skip", 10_800, MISSED[:2], []),
    ],
)
def test_catch_up_policy_decides_which_due_fires_are_published(
    policy: str, grace: int, due: list[datetime], kept: list[datetime]
) -> None:
    """all: every fire within grace; latest: the newest within grace; skip: only on-time ones."""
    job = schedule(f'every = "1s"\ncatch_up = "{policy}"\nmisfire_grace_seconds = {grace}')
    assert keep(job, due, NOW) == kept


def test_the_heap_wakes_only_for_due_schedules_and_queues_their_next_fire() -> None:
    """Popping at a time takes due schedules only; each comes back with its next fire."""
    text = (
        '[[schedule]]\nname = "fast"\nevery = "10s"\ntask = "noop"\n'
        '[[schedule]]\nname = "slow"\nevery = "1h"\ntask = "noop"\n'
    )
    heap = FireHeap(parse_schedules(text, CronSettings()), utc("2024-01-01T00:00:01"))
    batch = heap.pop_due(utc("2024-01-01T00:00:10"))
    assert [(utc_text(f), s.name) for f, s in batch.publish] == [("2024-01-01T00:00:10Z", "fast")]
    assert heap.next_time() == utc("2024-01-01T00:00:20")
