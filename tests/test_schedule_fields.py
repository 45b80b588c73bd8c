"""The fields ``runs``, ``jitter``, ``exclude`` and ``pause_on_failure``, and status
``completed``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.failed_records import put_failed
from tests.helpers import history
from tests.namespace import TestBroker
from tests.pausing import matching, wait_events
from tests.scheduling import Spawner, fire_times, published, write_schedules
from tests.test_scheduler_cli import scheduler_env
from warren_cron.client import Client
from warren_cron.clock import utc_text, utcnow
from warren_cron.errors import ScheduleError
from warren_cron.faultkit.waits import eventually
from warren_cron.history.status_fold import StatusFold
from warren_cron.runtime.settings import CronSettings
from warren_cron.schedules.control import Pause, read_pauses
from warren_cron.schedules.load import parse_schedules
from warren_cron.schedules.schedule import Schedule, build_schedule
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.schedules.status_rows import status_rows

SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)
DELAY = (
    "from warren_cron.schedules.load import parse_schedules as p;"
    "from warren_cron.runtime.settings import CronSettings as C;"
    "import sys; s = p(sys.argv[1], C()).schedules[0];"
    "print(s.delay(s.run_id(s.next_fire(s.start_at))).total_seconds())"
)


def built(**fields: Any) -> Schedule:
    """A schedule of these fields (task noop)."""
    return build_schedule(ScheduleSpec(name="s", task="noop", **fields), CronSettings())


def test_jitter_is_the_same_in_every_process_for_a_fire_and_the_run_id_is_not_moved() -> None:
    """Two processes with different hash seeds compute the same delay for a fire, within the
    bound; fires differ in delay; the run id stays the un-jittered time."""
    text = '[[schedule]]\nname = "j"\nevery = "1h"\ntask = "noop"\njitter = "10m"\n'
    text += 'start_at = "2026-01-01T00:00:00Z"\n'
    delays = {
        subprocess.run(
            [sys.executable, "-c", DELAY, text],
            env={"PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(delays) == 1 and 0 <= float(delays.pop()) <= 600
    schedule = built(every="1h", jitter="10m")
    fires = schedule.fires(datetime(2026, 1, 1, tzinfo=UTC), 20)
    assert len({schedule.delay(schedule.run_id(fire)) for fire in fires}) > 10
    assert schedule.run_id(fires[0]) == "s@2026-01-01T01:00:00Z"
    assert all(fire <= schedule.due(fire) <= fire + 10 * 60 * SECOND for fire in fires)


def test_exclude_skips_a_dst_day_in_the_schedules_zone() -> None:
    """2026-03-29 (Berlin springs forward) excluded: 02:30 Berlin fires on the 28th, then
    the 30th; the date is read in the zone, not in UTC."""
    schedule = built(cron="30 0 * * *", timezone="Europe/Berlin", exclude=["2026-03-29"])
    fires = schedule.fires(datetime(2026, 3, 27, 12, tzinfo=UTC), 2)
    # 00:30 in Berlin is the previous day in UTC: an exclusion read in UTC would miss it.
    assert [utc_text(f) for f in fires] == ["2026-03-27T23:30:00Z", "2026-03-29T22:30:00Z"]


def test_runs_ends_with_the_nth_fire_from_start_at_then_the_schedule_is_completed() -> None:
    """runs = 3 from start_at: three fires (an excluded date not counted), then none."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    schedule = built(every="1d", start_at=start, runs=3, exclude=[date(2026, 1, 2)])
    fires = schedule.fires(start - SECOND, 10)
    assert [f.day for f in fires] == [1, 3, 4]
    assert not schedule.completed(fires[-1] - SECOND) and schedule.completed(fires[-1])


def test_status_is_completed_once_stop_at_or_runs_leave_no_fire_even_when_paused() -> None:
    """The rows of warren status and the dashboard: completed wins over paused; a schedule
    with fires left is active or paused."""
    now = utcnow()
    cases: list[tuple[str, dict[str, Any]]] = [
        ("stopped", {"stop_at": now - SECOND}),
        ("done", {"start_at": now - 10 * MINUTE, "runs": 3}),
        ("held", {}),
        ("live", {"stop_at": now + MINUTE}),
    ]
    schedules = [
        build_schedule(ScheduleSpec(name=name, task="noop", every="1m", **fields), CronSettings())
        for name, fields in cases
    ]
    pauses = {n: Pause("x", "ops", now) for n in ("done", "held")}
    rows = status_rows(schedules, StatusFold(), pauses, now)
    assert [(r.name, r.status) for r in rows] == [
        ("stopped", "completed"),
        ("done", "completed"),
        ("held", "paused"),
        ("live", "active"),
    ]


def test_bad_fields_are_named_with_the_fix() -> None:
    """A jitter as long as the interval, an unknown calendar."""
    text = (
        '[[schedule]]\nname = "b"\nevery = "1m"\ntask = "noop"\njitter = "1m"\n'
        '[[schedule]]\nname = "c"\nevery = "1m"\ntask = "noop"\nexclude = ["xmas"]\n'
        '[calendars]\nholidays = ["2026-12-25"]\n'
    )
    with pytest.raises(ScheduleError) as error:
        parse_schedules(text, CronSettings())
    message = str(error.value)
    assert "'b' (#1): jitter: 1m must be shorter than every = 1m" in message
    assert "'c' (#2): exclude.0: neither a date (2026-12-25) nor a name of" in message
    fine = text.split("[[schedule]]")[2].replace('"xmas"', '"holidays"')
    [schedule] = parse_schedules("[[schedule]]" + fine, CronSettings()).schedules
    assert schedule.spec.exclude == (date(2026, 12, 25),)


@pytest.mark.broker
async def test_runs_3_fires_three_times_then_completed_and_a_new_leader_fires_no_fourth(
    broker: TestBroker, client: Client, spawn: Spawner, tmp_path: Path
) -> None:
    """A runtime schedule with runs = 3 every second: three fires, the leader kill -9'd, the
    new leader publishes no fourth, and list shows completed."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, "")
    env = scheduler_env(broker, path)
    leader = await spawn(["-m", "warren_cron.scheduler"], env)
    await leader.wait_event("runtime schedules read")
    start = (utcnow() + 2 * SECOND).replace(microsecond=0)
    spec = {"name": "thrice", "every": "1s", "task": "noop", "start_at": start, "runs": 3}
    await client.create_schedule(spec)
    await leader.wait_event("fire published", 3)
    standby = await spawn(["-m", "warren_cron.scheduler"], env)
    await standby.wait_event("standing by: another scheduler leads")
    await leader.kill()
    await standby.wait_event("leading", timeout=10)
    await asyncio.sleep(2.5)  # a fourth fire would be due within a second
    assert await fire_times(broker, "thrice") == [start + n * SECOND for n in range(3)]
    [stored] = await client.list_schedules()
    assert stored.status == "completed"
    assert await standby.stop() == 0


@pytest.mark.broker
async def test_a_jittered_fire_waits_its_delay_and_keeps_its_run_id(
    broker: TestBroker, spawn: Spawner, tmp_path: Path
) -> None:
    """Every 2s with jitter 1s: each fire is published at or after its time plus its delay,
    with the un-jittered run id and scheduled time."""
    path = tmp_path / "schedules.toml"
    [schedule] = write_schedules(
        broker, path, '[[schedule]]\nname = "j"\nevery = "2s"\ntask = "noop"\njitter = "1s"\n'
    ).schedules
    process = await spawn(["-m", "warren_cron.scheduler"], scheduler_env(broker, path))
    await process.wait_event("fire published", 3)
    assert await process.stop() == 0
    for message, envelope in await published(broker):
        fire = envelope.scheduled_for
        assert envelope.run_id == schedule.run_id(fire) and fire.second % 2 == 0
        assert message.timestamp is None or message.timestamp >= schedule.due(fire) - SECOND


@pytest.mark.broker
async def test_a_run_failing_for_good_pauses_a_schedule_with_pause_on_failure(
    broker: TestBroker, run_monitor: Any, tmp_path: Path
) -> None:
    """The monitor reads the failure record and pauses the schedule through the control
    stream, the run and the reason in the pause; a schedule without the field stays."""
    text = (
        '[[schedule]]\nname = "fragile"\nevery = "1h"\ntask = "noop"\npause_on_failure = true\n'
        '[[schedule]]\nname = "sturdy"\nevery = "1h"\ntask = "noop"\n'
    )
    schedules = write_schedules(broker, tmp_path / "schedules.toml", text).schedules
    await run_monitor(schedules=schedules)
    [envelope] = await put_failed(broker, schedule="fragile")
    await put_failed(broker, schedule="sturdy")

    async def paused() -> bool:
        return "fragile" in await read_pauses(broker.connection, broker.names)

    await eventually(paused, 15, what="fragile paused")
    pauses = await read_pauses(broker.connection, broker.names)
    assert set(pauses) == {"fragile"}
    assert pauses["fragile"].reason == (
        f"pause_on_failure: run {envelope.run_id} failed for good (retries-exhausted)"
    )


@pytest.mark.broker
async def test_a_runtime_schedule_with_pause_on_failure_is_paused_once(
    broker: TestBroker, client: Client, run_monitor: Any
) -> None:
    """The monitor follows the store: a runtime schedule created after it started, with
    pause_on_failure, is paused by its first failure; two more failures add no pause."""
    await run_monitor()
    spec = {"name": "rt", "every": "1h", "task": "noop", "pause_on_failure": True}
    await client.create_schedule(spec)
    [first] = await put_failed(broker, schedule="rt")

    async def paused() -> bool:
        return "rt" in await read_pauses(broker.connection, broker.names)

    await eventually(paused, 15, what="rt paused")
    await put_failed(broker, 2, schedule="rt")

    async def drained() -> bool:
        return await broker.depth(broker.names.monitor_queue) == 0

    await eventually(drained, 15, what="the monitor read every failure")
    await asyncio.sleep(1.0)  # a second pause would be sent within moments of the ack
    [pause] = await wait_events(broker, 1, type="paused", schedule="rt")
    assert first.run_id in pause.get("reason") and pause.get("by") == "monitor (pause_on_failure)"
    assert len(matching(await history(broker), type="paused")) == 1


@pytest.mark.broker
async def test_a_fire_waiting_for_its_jitter_when_the_leader_dies_is_published_once(
    broker: TestBroker, spawn: Spawner, tmp_path: Path
) -> None:
    """The leader is kill -9'd after a jittered fire's time, before its delay ran out, its
    watermark already past the fire (another schedule fires every second): the new leader
    publishes that fire, once."""
    path = tmp_path / "schedules.toml"
    text = '[[schedule]]\nname = "tick"\nevery = "1s"\ntask = "noop"\n'
    text += '[[schedule]]\nname = "j"\nevery = "5s"\ntask = "noop"\njitter = "4s"\n'
    jittered = write_schedules(broker, path, text).schedules[1]
    env = scheduler_env(broker, path)
    leader = await spawn(["-m", "warren_cron.scheduler"], env)
    await leader.wait_event("fire published")
    standby = await spawn(["-m", "warren_cron.scheduler"], env)
    await standby.wait_event("standing by: another scheduler leads")
    fires = jittered.fires(utcnow() + 2 * SECOND, 20)
    fire = next(f for f in fires if jittered.delay(jittered.run_id(f)) >= 2.5 * SECOND)
    await asyncio.sleep((fire + 1.2 * SECOND - utcnow()).total_seconds())
    await leader.kill()
    await standby.wait_event("leading", timeout=10)
    await asyncio.sleep(max(0.0, (jittered.due(fire) + SECOND - utcnow()).total_seconds()))
    await eventually(lambda: _has(broker, fire), 10, what="the jittered fire published")
    assert await standby.stop() == 0
    times = await fire_times(broker, "j")
    assert times.count(fire) == 1 and len(set(times)) == len(times)


async def _has(broker: TestBroker, fire: datetime) -> bool:
    return fire in await fire_times(broker, "j")
