"""When a schedule's fires are first owed (``since``), and ``runs`` counted from its creation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from warren_cron.runtime.settings import CronSettings
from warren_cron.scheduler.firing import FireHeap, first_seen
from warren_cron.schedules.load import ScheduleSet, parse_schedules
from warren_cron.schedules.schedule import build_schedule
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store.changes import Change, Entry, spec_json
from warren_cron.store.state import StoreState

SECOND = timedelta(seconds=1)
MADE = datetime(2026, 3, 1, 3, 3, 30, tzinfo=UTC)


def spec(**fields: Any) -> ScheduleSpec:
    """A ``noop`` schedule named m1 with ``fields``."""
    return ScheduleSpec.model_validate({"name": "m1", "task": "noop", **fields})


def test_a_new_schedule_is_not_due_for_a_time_before_it_existed() -> None:
    """A leader idle since 03:01 builds its heap from there: the minute cron created at
    03:03:30 is first due at 03:04, not at 03:03 (nor 03:02), whatever the catch-up."""
    schedule = build_schedule(spec(cron="* * * * *", catch_up="all"), CronSettings(), since=MADE)
    heap = FireHeap(ScheduleSet("t", (schedule,)), MADE - 150 * SECOND)
    assert not heap.pop_due(MADE + SECOND)
    assert heap.next_time() == datetime(2026, 3, 1, 3, 4, tzinfo=UTC)
    daily = build_schedule(spec(cron="52 2 * * *"), CronSettings(), since=MADE)
    assert daily.next_fire(MADE - 3600 * SECOND) == datetime(2026, 3, 2, 2, 52, tzinfo=UTC)


def test_runs_without_start_at_counts_from_the_creation() -> None:
    """runs = 3 alone is valid (file and store); the three fires are the first three owed
    after the creation, then the schedule is completed."""
    [loaded] = parse_schedules(
        '[[schedule]]\nname = "m1"\nevery = "10s"\ntask = "noop"\nruns = 3\n', CronSettings()
    ).schedules
    schedule = loaded.owed_from(MADE + 2 * SECOND)
    fires = schedule.fires(MADE - 3600 * SECOND, 10)
    assert [f.second for f in fires] == [40, 50, 0]
    assert not schedule.completed(fires[-1] - SECOND) and schedule.completed(fires[-1])
    assert loaded.fires(MADE, 5) == [MADE + n * 10 * SECOND for n in range(1, 6)]


def test_the_store_keeps_the_creation_and_the_last_change_of_timing() -> None:
    """A create sets ``since``; a payload change keeps it; a timing change moves it; a
    snapshot keeps it; a record written before ``since`` was kept reads its creation from
    its history."""
    state = StoreState()
    made = spec(every="10s", runs=3)
    state.apply(Change("create", "m1", 0, "ops", spec=spec_json(made), at=MADE))
    later = MADE + 60 * SECOND
    payload = spec(every="10s", runs=3, payload={"a": 1})
    state.apply(Change("update", "m1", 1, "ops", spec=spec_json(payload), at=later))
    assert state.entries["m1"].since == MADE
    retimed = spec(every="20s", runs=3)
    state.apply(Change("update", "m1", 2, "ops", spec=spec_json(retimed), at=later + SECOND))
    entry = state.entries["m1"]
    assert entry.since == later + SECOND
    assert Entry.from_json("m1", entry.to_json()).since == later + SECOND
    old = {key: value for key, value in entry.to_json().items() if key != "since"}
    assert Entry.from_json("m1", old).since == MADE


def test_a_reload_owes_the_added_and_retimed_schedules_from_its_moment() -> None:
    """A schedule the file gains, or whose timing it changes, is owed from the reload; one
    unchanged keeps its moment."""
    settings = CronSettings()
    table = '[[schedule]]\nname = "{}"\nevery = "{}"\ntask = "noop"\n'
    old = parse_schedules(table.format("kept", "10s") + table.format("moved", "10s"), settings)
    old = ScheduleSet(old.source, tuple(s.owed_from(MADE) for s in old.schedules))
    text = table.format("kept", "10s") + table.format("moved", "20s") + table.format("new", "1m")
    new = first_seen(old, parse_schedules(text, settings), later := MADE + 60 * SECOND)
    assert [(s.name, s.since) for s in new.schedules] == [
        ("kept", MADE),
        ("moved", later),
        ("new", later),
    ]
