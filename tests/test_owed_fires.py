"""A schedule's first fire is never before it existed (nor before its resume): runtime and
file schedules, with the leader idle, busy, and across a leader change; ``runs`` counted
from the creation."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path

import orjson
import pytest

from tests.failed_records import json_out, run_warren
from tests.helpers import history
from tests.namespace import TestBroker
from tests.pausing import matching, schedules_script
from tests.scheduling import (
    Schedulers,
    every,
    fire_times,
    scheduler_settings,
    store_watermark,
    write_schedules,
)
from warren_cron.client import Client
from warren_cron.clock import utc_text, utcnow
from warren_cron.faultkit.waits import eventually
from warren_cron.scheduler.service import Scheduler
from warren_cron.schedules.load import load_schedules
from warren_cron.store.stored import StoredSchedule

pytestmark = pytest.mark.broker
SECOND = timedelta(seconds=1)
#: An interval whose fire just before the creation is due at once under the old rule.
TEN = "10s"


async def fired(broker: TestBroker, name: str, count: int, timeout: float = 30) -> list[datetime]:
    """The fire times of ``name`` once the main queue holds at least ``count`` of them."""

    async def enough() -> list[datetime] | None:
        times = await fire_times(broker, name)
        return times if len(times) >= count else None

    times = await eventually(enough, timeout, what=f"{count} fire(s) of {name}")
    assert times is not None
    return times


def created(made: StoredSchedule) -> datetime:
    """When the store recorded the schedule's creation (its history's first change)."""
    return datetime.fromisoformat(made.history[0]["at"])


def anchored(ago: float) -> str:
    """A ``start_at`` ``ago`` seconds back: its first fire is before the creation."""
    return utc_text((utcnow() - ago * SECOND).replace(microsecond=0))


async def planned(scheduler: Scheduler, after: datetime) -> datetime:
    """The leader's next fire once it took a change made at ``after`` (progress, no sleep)."""

    def seen() -> datetime | None:
        following = scheduler.next_fire_at
        return following if following is not None and following > after else None

    following = await eventually(seen, 15, what="the leader's heap with the new schedule")
    assert following is not None
    return following


async def idle_leader(broker: TestBroker, schedulers: Schedulers, path: Path) -> Scheduler:
    """A leader whose last watermark is 70 s old: no fire since before the last minute."""
    write_schedules(broker, path, "")
    await store_watermark(broker, utcnow() - 70 * SECOND)
    return await schedulers.start(path)


async def test_a_runtime_schedule_created_while_the_leader_idles_fires_nothing_earlier(
    broker: TestBroker, client: Client, schedulers: Schedulers, tmp_path: Path
) -> None:
    """Neither the minute cron nor the 10 s interval publishes the fire just before its
    creation; the interval's next fire, after it, comes."""
    leader = await idle_leader(broker, schedulers, tmp_path / "schedules.toml")
    made = await client.create_schedule({"name": "m1", "cron": "* * * * *", "task": "noop"})
    minute = created(made).replace(second=0, microsecond=0) + 60 * SECOND
    assert await planned(leader, created(made)) == minute
    start = anchored(3)
    spec = {"name": "m2", "every": TEN, "start_at": start, "task": "noop"}
    second = await client.create_schedule(spec)
    [first] = await fired(broker, "m2", 1)
    assert first == datetime.fromisoformat(start) + 10 * SECOND > created(second)
    assert all(moment > created(made) for moment in await fire_times(broker, "m1"))


async def test_a_schedule_created_while_the_leader_is_busy_fires_nothing_earlier(
    broker: TestBroker, client: Client, schedulers: Schedulers, tmp_path: Path
) -> None:
    """Another schedule fires every second at half past: a schedule created 0.1 s after a
    whole second does not get that second's fire, only the ones after it."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("busy", "1s", start_at="2026-01-01T00:00:00.5Z"))
    await schedulers.start(path)
    await fired(broker, "busy", 2)

    def just_after_a_second() -> bool:
        return 0.05 <= utcnow().microsecond / 1e6 <= 0.15

    await eventually(just_after_a_second, 5, interval=0.005)
    made = await client.create_schedule({"name": "new", "every": "1s", "task": "noop"})
    times = await fired(broker, "new", 2)
    assert min(times) > created(made), (utc_text(min(times)), utc_text(created(made)))


async def test_a_new_leader_owes_nothing_from_before_a_schedules_creation(
    broker: TestBroker, client: Client, schedulers: Schedulers, tmp_path: Path
) -> None:
    """A runtime schedule and one the file gained on a reload, taken over by a second
    scheduler when the leader stops before their first fire: their first fires are the
    ones after their creation (the store's moment, the same for both leaders)."""
    path = tmp_path / "schedules.toml"
    leader = await idle_leader(broker, schedulers, path)
    standby = standing_by(schedulers, path)
    start = anchored(3)
    write_schedules(broker, path, every("filed", TEN, start_at=start))
    reloaded = utcnow()
    assert leader.reload() and standby.reload()
    made = await client.create_schedule(
        {"name": "rt", "every": TEN, "start_at": start, "task": "noop"}
    )
    await planned(leader, created(made))
    stored = await eventually(lambda: _copy_made(client), 15, what="the file's store copy")
    await schedulers.stop(leader)
    await eventually(standby.leading.is_set, 15, what="the standby leading")
    due = datetime.fromisoformat(start) + 10 * SECOND
    assert (await fired(broker, "rt", 1))[0] == due
    assert (await fired(broker, "filed", 1))[0] == due
    assert stored is not None and reloaded <= stored < due


async def test_a_leader_away_through_a_pause_and_a_resume_owes_nothing_from_before_it(
    broker: TestBroker, schedulers: Schedulers, tmp_path: Path
) -> None:
    """Paused and resumed (plainly) while no scheduler led: the next leader does not catch
    up the fire from before the resume; its first fire is the one after it."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("held", TEN))
    await store_watermark(broker, utcnow() - 70 * SECOND)
    for command in (["pause", "--reason", "upgrade"], ["resume"]):
        done = await schedules_script(broker, path, *command, "held")
        assert done.returncode == 0, done.stderr
    [resumed] = matching(await history(broker), type="resumed")
    start = anchored(8)
    write_schedules(broker, path, every("held", TEN, start_at=start))
    await schedulers.start(path)
    [first] = await fired(broker, "held", 1)
    assert first == datetime.fromisoformat(start) + 10 * SECOND > resumed.at


def standing_by(schedulers: Schedulers, path: Path) -> Scheduler:
    """A second scheduler on ``path``, started without waiting for it to lead."""
    settings = scheduler_settings(schedulers.broker, path)
    instance = Scheduler(settings, load_schedules(path, settings))
    schedulers.tasks[id(instance)] = (instance, asyncio.create_task(instance.run()))
    return instance


async def _copy_made(client: Client) -> datetime | None:
    # The leader's apply of the reloaded file: the moment it records as the creation.
    try:
        return created(await client.get_schedule("filed"))
    except LookupError:
        return None


async def test_runs_without_start_at_counts_from_the_creation_in_the_store_and_the_file(
    broker: TestBroker, client: Client, schedulers: Schedulers, tmp_path: Path
) -> None:
    """runs = 2 alone: two fires after the creation (the store's) or the load (the file's),
    then the schedule is completed (``schedules list``, ``status`` and ``get`` say so, each
    with its source) and nothing more is planned."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("twice", "1s", runs=2))
    leader = await schedulers.start(path)
    made = await client.create_schedule(
        {"name": "thrice", "every": "1s", "runs": 3, "task": "noop"}
    )
    await fired(broker, "twice", 2)
    assert all(t > created(made) for t in await fired(broker, "thrice", 3))
    completed = await eventually(
        lambda: _status_completed(client), 15, what="thrice completed in the store"
    )
    assert completed
    await eventually(lambda: leader.next_fire_at is None, 15, what="no fire left planned")
    assert len(await fire_times(broker, "twice")) == 2
    assert len(await fire_times(broker, "thrice")) == 3
    listed = orjson.loads((await schedules_script(broker, path, "list", "--json")).stdout)
    assert [(r["name"], r["status"]) for r in listed] == [
        ("twice", "completed"),
        ("thrice", "completed"),
    ]
    shown = await asyncio.to_thread(
        run_warren, broker, "status", "--json", CRON_SCHEDULES_FILE=str(path)
    )
    assert [(r["name"], r["source"], r["status"]) for r in json_out(shown)] == [
        ("twice", "file", "completed"),
        ("thrice", "runtime", "completed"),
    ]
    got = json_out(await schedules_script(broker, path, "get", "twice", "--json"))
    assert (got["source"], got["status"], got["manager"]) == (
        "file",
        "completed",
        "CRON_SCHEDULES_FILE",
    )
    assert [change["kind"] for change in got["history"]] == ["create"]


async def _status_completed(client: Client) -> bool:
    return (await client.get_schedule("thrice")).status == "completed"
