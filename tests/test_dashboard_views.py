"""What the dashboard's pages make of domain data, checked without a broker or a browser."""

from __future__ import annotations

import asyncio
import tracemalloc
from collections import Counter
from collections.abc import AsyncGenerator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase
from typing import cast

import orjson
import pytest
from aio_pika.abc import AbstractConnection
from aiohttp.test_utils import TestClient, TestServer

from warren_cron.failed.select import RecordFilter, exact
from warren_cron.failed.tally import Progress
from warren_cron.faultkit.waits import eventually
from warren_cron.history.events import Event
from warren_cron.monitor import mount
from warren_cron.monitor.console import failed_index
from warren_cron.monitor.console.activity import Activity
from warren_cron.monitor.console.offsets import OffsetIndex
from warren_cron.monitor.console.recent import RecentRuns
from warren_cron.monitor.console.views import CHART_HEIGHT, chart, page_of, shown_body
from warren_cron.monitor.mount import Dashboard
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.monitor.status_keeper import StatusKeeper
from warren_cron.monitor.web.app import create_app
from warren_cron.monitor.web.dashboard import DASHBOARD
from warren_cron.names import Names
from warren_cron.records import FailedRecord, record_from

NOW = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)


def attempt(at: datetime, outcome: str, host: str = "w1", pid: int = 7) -> Event:
    """An attempt event as the history stream holds it."""
    data = {"type": "attempt", "outcome": outcome, "host": host, "pid": pid}
    return Event("attempt", at, 0, "r@x", "s", data)


def test_a_page_number_out_of_range_or_garbled_shows_the_nearest_page() -> None:
    """Paging never fails on a hand-edited query: 0, -1 and text show page 1, 99 the last."""
    rows = list(range(120))
    assert page_of(rows, "2", size=50).rows == rows[50:100]
    assert page_of(rows, "99", size=50).number == 3
    assert page_of(rows, "x", size=50).number == page_of(rows, "-1", size=50).number == 1
    assert page_of([], None).pages == 1


def test_the_chart_stacks_outcomes_and_scales_the_busiest_minute_to_full_height() -> None:
    """Each minute's bars stack bottom up; the busiest minute fills the chart."""
    minutes = [(1, Counter(succeeded=3, failed=1)), (2, Counter(succeeded=2)), (3, Counter())]
    bars = chart(minutes)
    assert sum(height for _, _, height in bars[0].parts) == CHART_HEIGHT
    assert [series for series, _, _ in bars[0].parts] == ["succeeded", "failed"]
    assert bars[1].parts == (("succeeded", CHART_HEIGHT // 2, CHART_HEIGHT // 2),)
    assert bars[2].parts == ()


def test_activity_counts_a_day_of_attempts_and_failures_and_forgets_older_ones() -> None:
    """Attempts per minute by outcome, failures by reason and workers seen cover one day."""
    activity = Activity()
    old = NOW - timedelta(hours=30)
    failed = Event("failed", NOW, 0, "r@x", "s", {"type": "failed", "reason": "timeout"})
    activity.on_events([attempt(old, "succeeded", pid=1)], 0)
    activity.on_events([attempt(NOW, "succeeded"), attempt(NOW, "lock-contended"), failed], 1)
    [(_, counts)] = activity.per_minute(NOW, 1)
    assert counts == Counter(succeeded=1, other=1)
    assert activity.failures_by_reason(NOW) == [("timeout", 1)]
    assert [(w.host, w.pid, w.attempts) for w in activity.workers_seen(NOW)] == [("w1", 7, 2)]
    assert sum(sum(c.values()) for c in activity.attempts.values()) == 2


def test_a_long_attempts_hand_over_is_no_attempt_on_the_chart() -> None:
    """An attempt event of a hand-over (claim-lost) charts nothing; its worker is seen."""
    activity = Activity()
    handed = attempt(NOW, "replaced", pid=9)
    handed.data["reason"] = "claim-lost"
    activity.on_events([handed], 0)
    [(_, counts)] = activity.per_minute(NOW, 1)
    assert counts == Counter()
    assert [w.pid for w in activity.workers_seen(NOW)] == [9]


def test_a_record_body_is_shown_with_its_secret_headers_hidden() -> None:
    """An http task's Authorization header is hidden; a reference to a secret is kept."""
    body = orjson.dumps(
        {
            "task": "http",
            "payload": {
                "url": "https://svc/hook",
                "headers": {"Authorization": "Bearer hunter2", "X-Token": {"env": "TOKEN"}},
            },
        }
    )
    shown = shown_body(body)
    assert "hunter2" not in shown and "***" in shown and '"env": "TOKEN"' in shown
    assert shown_body(b"\xff<b>") == "\ufffd<b>"  # text is text; the page escapes it


def test_the_text_filter_finds_any_field_and_an_exact_run_id_matches_only_itself() -> None:
    """``text`` looks in run id, schedule, task, reason and error, in any case; ``exact``
    takes pattern characters literally."""
    record = record_from(
        b'{"task": "report", "schedule": "nightly"}',
        {"cron-reason": "handler-error", "cron-error": "DB Timeout", "cron-attempts": 2},
        "final",
        "main",
        {"message_id": "nightly@[1]*"},
    )
    assert RecordFilter(text="db timeout").matches(record)
    assert not RecordFilter(text="disk").matches(record)
    assert RecordFilter(run_id=exact("nightly@[1]*")).matches(record)
    assert not fnmatchcase("nightly@1-later", exact("nightly@1*"))


def failed_record(number: int, body_bytes: int) -> FailedRecord:
    """A failed record of a run of its own whose payload is ``body_bytes`` long."""
    body = orjson.dumps({"task": "report", "schedule": "nightly", "payload": "x" * body_bytes})
    headers = {"cron-reason": "handler-error", "cron-error": "DB Timeout", "cron-attempts": 2}
    return record_from(body, headers, "final", "main", {"message_id": f"nightly@{number}"})


def test_the_failed_index_keeps_a_few_hundred_bytes_a_record_not_its_body() -> None:
    """2,000 records of 9 KB learned: the index grows by under 2 KB a record, and still
    lists, filters and counts every one of them (about 0.7 KB a record, 130 KB whole)."""
    index = failed_index.FailedIndex(Names("memory-test"), 60)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for number in range(2000):
            index.learn(failed_record(number, 9_000))
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 2000 * 2_000, f"{grown / 2000:.0f} bytes a record"
    assert len(index.select(RecordFilter(text="db timeout"))) == 2000
    assert [r.run_id for r in index.select(RecordFilter(run_id=exact("nightly@7")))] == [
        "nightly@7"
    ]
    assert index.reasons() == ["handler-error"]


def test_recent_runs_keep_the_last_of_each_schedule_and_the_notable_ones() -> None:
    """Old plain successes leave; a failed run stays; a run seen without its start is no
    whole story (the page reads that one from the stream)."""
    recent = RecentRuns(per_schedule=2, notable=10)

    def event(kind: str, run_id: str, **data: object) -> Event:
        return Event(kind, NOW, 0, run_id, "s", {"type": kind, **data})

    recent.on_events([event("fired", "s@1"), event("attempt", "s@1", outcome="failed")], 0)
    for n in range(2, 6):
        recent.on_events(
            [event("fired", f"s@{n}"), event("attempt", f"s@{n}", outcome="succeeded")], n
        )
    recent.on_events([event("attempt", "s@0", outcome="succeeded")], 9)
    assert set(recent.runs) == {"s@1", "s@5", "s@0"}
    whole = recent.whole("s@1")
    assert whole is not None and whole.outcome == "failed"
    assert recent.whole("s@0") is None
    assert [r.run_id for r in recent.newest(lambda run: run.outcome == "failed", 5)] == ["s@1"]


def test_an_attempts_started_mark_does_not_make_a_plain_success_notable() -> None:
    """Fire, start, success: the run leaves with its schedule's older runs, as before workers
    marked each attempt's start."""
    recent = RecentRuns(per_schedule=1, notable=10)
    for n in range(1, 3):
        kinds: list[tuple[str, dict[str, object]]] = [
            ("fired", {}),
            ("started", {"attempt": 1}),
            ("attempt", {"outcome": "succeeded"}),
        ]
        recent.on_events([Event(k, NOW, 0, f"s@{n}", "s", {"type": k, **d}) for k, d in kinds], n)
    assert set(recent.runs) == {"s@2"}


def test_the_offset_index_finds_where_a_time_begins_and_covers_only_what_it_followed() -> None:
    """A time's start is the first message holding an event of its minute or later (a writer
    whose clock runs ahead moves it back); a time before following began, or after every
    event seen, is not known; minutes older than the index keeps are forgotten."""
    index = OffsetIndex(keep=timedelta(hours=1))

    def at(minutes: float) -> Event:
        return Event("attempt", NOW + timedelta(minutes=minutes), 0, "r@x", "s", {})

    index.on_events([at(0), at(0.5)], 10)
    index.on_events([at(1), at(4)], 11)
    index.on_events([at(2), at(3)], 12)
    index.on_events([at(-5), at(5)], 13)
    assert index.offset_at(NOW + timedelta(minutes=1, seconds=30)) == 11
    assert index.offset_at(NOW + timedelta(minutes=5)) == 13
    assert index.offset_at(NOW) is None, "following began within that minute"
    assert index.offset_at(NOW - timedelta(minutes=5)) is None
    assert index.offset_at(NOW + timedelta(minutes=6)) is None
    index.on_events([at(62)], 14)
    assert index.offset_at(NOW + timedelta(minutes=1, seconds=30)) is None
    assert index.offset_at(NOW + timedelta(minutes=3)) == 11


def no_records_after(
    monkeypatch: pytest.MonkeyPatch, before: Callable[[Progress], Awaitable[None]]
) -> None:
    """Make the failed queue's read run ``before`` (given its progress callback), then find
    no record."""

    async def read(
        connection: AbstractConnection,
        names: Names,
        select: RecordFilter,
        limit: int | None,
        progress: Progress,
    ) -> AsyncGenerator[FailedRecord]:
        await before(progress)
        found: tuple[FailedRecord, ...] = ()
        for record in found:
            yield record

    monkeypatch.setattr(failed_index, "each_record", read)


async def test_the_failed_page_says_the_queue_is_still_being_read_until_its_first_read_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While the index's first read runs, /failed says how far it got, not that the queue is
    empty; once it ends, an empty queue is called empty."""
    done = asyncio.Event()

    async def slow_read(progress: Progress) -> None:
        progress(120, 10_000)
        await done.wait()

    no_records_after(monkeypatch, slow_read)
    settings = MonitorSettings(namespace="reading-test")
    dashboard = Dashboard(settings, [], StatusKeeper(settings), set)
    app = create_app(mount.ROUTES)
    app[DASHBOARD] = dashboard
    async with TestClient(TestServer(app)) as client:
        reading = asyncio.create_task(dashboard.failed.refresh(cast(AbstractConnection, None)))
        await eventually(lambda: dashboard.failed.reading[0] == 120, 5, what="the read started")
        page = await (await client.get("/failed")).text()
        assert "still being read: 120 of 10000 records so far" in page
        assert "is empty" not in page
        done.set()
        await reading
        page = await (await client.get("/failed")).text()
        assert "the failed queue is empty" in page and "still being read" not in page


async def test_a_read_cut_by_a_stuck_connection_does_not_end_the_failed_indexs_reading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read of the failed queue that fails with the CancelledError aiormq gives the calls
    under way on a connection it dropped as stuck (no cancel of the reading task) is tried
    again at the next round, where it ended the index's reading for good."""
    reads = [0]

    async def cut_once(progress: Progress) -> None:
        reads[0] += 1
        if reads[0] == 1:
            raise asyncio.CancelledError  # what aiormq raised; the task is not cancelled

    no_records_after(monkeypatch, cut_once)
    index, stop = failed_index.FailedIndex(Names("cut-test"), 0.01), asyncio.Event()
    reading = asyncio.create_task(index.run(cast(AbstractConnection, None), stop))
    try:
        await eventually(lambda: index.read_at is not None, 5, what="a read after the cut one")
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(reading, return_exceptions=True), 5)
    assert reads[0] >= 2
