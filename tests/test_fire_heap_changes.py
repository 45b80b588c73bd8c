"""A runtime schedule created, changed or archived is taken into the leader's fire heap in
place: each fires on its new timing from its next fire on, none fires twice or on the timing
it had, and a compact schedule fires as the spec it holds."""

from __future__ import annotations

from datetime import UTC, datetime

from warren_cron.clock import utc_text
from warren_cron.runtime.settings import CronSettings
from warren_cron.scheduler.firing import FireHeap
from warren_cron.schedules.load import ScheduleSet, parse_schedules
from warren_cron.schedules.schedule import Schedule

START = datetime(2024, 1, 1, tzinfo=UTC)


def at(seconds: int) -> datetime:
    """``seconds`` after midnight, 2024-01-01 UTC."""
    return START.replace(second=seconds % 60, minute=seconds // 60)


def made(name: str, body: str) -> Schedule:
    """One compact schedule from the body of a [[schedule]] table."""
    text = f'[[schedule]]\nname = "{name}"\ntask = "noop"\n{body}'
    return parse_schedules(text, CronSettings()).compact().schedules[0]


def fired(heap: FireHeap, until: int) -> list[tuple[str, str]]:
    """Every fire the heap gives, second by second, up to ``until``: (schedule, time)."""
    out: list[tuple[str, str]] = []
    for second in range(1, until + 1):
        out += [(s.name, utc_text(f)[11:19]) for f, s in heap.pop_due(at(second)).publish]
    return out


def test_a_created_schedule_fires_from_its_next_fire_on() -> None:
    """A schedule put into the heap fires at its first time after the cursor, then on."""
    heap = FireHeap(ScheduleSet("t", (made("a", 'every = "10s"'),)), START)
    heap.put("b", made("b", 'every = "15s"'), at(5), None)
    assert fired(heap, 30) == [
        ("a", "00:00:10"),
        ("b", "00:00:15"),
        ("a", "00:00:20"),
        ("a", "00:00:30"),
        ("b", "00:00:30"),
    ]


def test_a_changed_schedule_fires_on_its_new_timing_only_and_never_twice() -> None:
    """A change of timing drops the fire the old timing queued; a change that keeps the
    next fire (a payload) leaves one fire, not two."""
    heap = FireHeap(ScheduleSet("t", (made("a", 'every = "10s"'),)), START)
    heap.put("a", made("a", 'every = "5s"'), at(1), None)
    assert fired(heap, 10) == [("a", "00:00:05"), ("a", "00:00:10")]
    heap.put("a", made("a", 'every = "5s"\npayload = { n = 2 }'), at(10), None)
    heap.put("a", made("a", 'every = "5s"\npayload = { n = 3 }'), at(10), None)
    [(fire, schedule)] = heap.pop_due(at(15)).publish
    assert (utc_text(fire), schedule.spec.payload) == ("2024-01-01T00:00:15Z", {"n": 3})


def test_an_archived_schedule_fires_no_more_and_has_no_next_fire() -> None:
    """A schedule removed from the heap publishes nothing after, and the heap's next time
    is the others'."""
    heap = FireHeap(
        ScheduleSet("t", (made("a", 'every = "10s"'), made("b", 'every = "1h"'))), START
    )
    heap.put("a", None, at(1), None)
    assert fired(heap, 30) == [] and heap.get("a") is None
    assert heap.next_time() == START.replace(hour=1)


def test_a_changed_jitter_fires_once_at_its_new_delay() -> None:
    """A change of jitter alone keeps the fire time and moves its delay: the fire is
    published once, at the new delay, not also at the old."""
    heap = FireHeap(ScheduleSet("t", (made("a", 'every = "1m"'),)), START)
    jittered = made("a", 'every = "1m"\njitter = "20s"')
    heap.put("a", jittered, at(30), None)
    due = jittered.due(START.replace(minute=1))
    assert heap.next_time() == due
    got = [heap.pop_due(at(second)).publish for second in range(60, 61 + 20)]
    assert sum(len(publish) for publish in got) == 1
