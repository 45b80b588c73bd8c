"""The scheduler in-process against a real broker: what it publishes, catch-up, reload."""

from __future__ import annotations

import asyncio
import itertools
from datetime import timedelta
from pathlib import Path
from typing import Any

import aio_pika
import pytest
from aio_pika.abc import AbstractConnection
from structlog.testing import capture_logs

import warren_cron.broker.batch
import warren_cron.scheduler.leader
import warren_cron.scheduler.leases
import warren_cron.scheduler.publisher
import warren_cron.scheduler.service
import warren_cron.scheduler.watermark
from tests.namespace import TestBroker
from tests.scheduling import (
    Schedulers,
    every,
    fire_times,
    published,
    store_watermark,
    wait_published,
    write_schedules,
)
from warren_cron.clock import utc_text, utcnow
from warren_cron.faultkit.waits import eventually

pytestmark = pytest.mark.broker
SECOND = timedelta(seconds=1)


async def test_each_fire_is_one_persistent_message_with_run_id_plan_and_fields(
    broker: TestBroker, schedulers: Schedulers, tmp_path: Path
) -> None:
    """message_id and cron-run-id are name@time, the routing key is the schedule's own plan."""
    path = tmp_path / "schedules.toml"
    write_schedules(
        broker,
        path,
        every(
            "tick",
            "1s",
            payload="{ n = 1 }",
            timeout_seconds=5,
            concurrency='"Forbid"',
            retry="{ max_retries = 1, delay_ms = 100 }",
        ),
    )
    instance = await schedulers.start(path)
    await wait_published(broker, 2)
    await schedulers.stop(instance)
    (first, env), (_, following) = (await published(broker))[:2]
    assert first.message_id == env.run_id == f"tick@{utc_text(env.scheduled_for)}"
    assert first.headers == {"cron-run-id": env.run_id, "cron-schedule": "tick"}
    assert first.routing_key == "100ms" and first.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
    assert (env.task, env.payload, env.timeout_seconds, env.concurrency) == (
        "noop",
        {"n": 1},
        5,
        "Forbid",
    )
    assert env.scheduled_for.microsecond == 0
    assert following.scheduled_for - env.scheduled_for == SECOND


async def test_interval_fires_stay_on_their_grid_when_publishing_is_slow(
    broker: TestBroker,
    schedulers: Schedulers,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A publish taking 0.6 s of a 1 s interval does not push later fires back."""
    original = warren_cron.broker.batch.publish_batch

    async def slow(*args: Any) -> Any:
        await asyncio.sleep(0.6)
        return await original(*args)

    monkeypatch.setattr(warren_cron.scheduler.publisher, "publish_batch", slow)
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("grid", "1s", catch_up='"all"'))
    instance = await schedulers.start(path)
    await wait_published(broker, 4)
    await schedulers.stop(instance)
    times = await fire_times(broker)
    assert all(t.microsecond == 0 for t in times)
    assert [b - a for a, b in itertools.pairwise(times)] == [SECOND] * (len(times) - 1)


HOUR = timedelta(hours=1)


@pytest.mark.parametrize(
    ("policy", "grace", "published_ago", "skipped_ago"),
    [
        ("all", 7200, [1.5, 0.5], []),
        ("all", 3600, [0.5], [1.5]),
        ("latest", 7200, [0.5], [1.5]),
        ("skip", 7200, [], [1.5, 0.5]),
    ],
)
async def test_a_new_leader_applies_catch_up_to_fires_missed_since_the_watermark(
    broker: TestBroker,
    schedulers: Schedulers,
    tmp_path: Path,
    policy: str,
    grace: int,
    published_ago: list[float],
    skipped_ago: list[float],
) -> None:
    """Hourly fires 1.5 h and 0.5 h ago, after a watermark 2 h old: the policy picks."""
    now = utcnow().replace(microsecond=0)
    path = tmp_path / "schedules.toml"
    fields = {"catch_up": f'"{policy}"', "misfire_grace_seconds": grace}
    write_schedules(
        broker, path, every("hourly", "1h", start_at=utc_text(now - 2.5 * HOUR), **fields)
    )
    await store_watermark(broker, now - 2 * HOUR)
    with capture_logs() as logs:
        instance = await schedulers.start(path)
        await eventually(lambda: (instance.handled_up_to or now - HOUR) >= now)
    skipped = [e["scheduled_for"] for e in logs if e["event"] == "fire skipped"]
    assert await fire_times(broker) == [now - ago * HOUR for ago in published_ago]
    assert skipped == [utc_text(now - ago * HOUR) for ago in skipped_ago]


async def test_a_restart_across_a_fire_time_neither_loses_nor_doubles_it(
    broker: TestBroker, schedulers: Schedulers, tmp_path: Path
) -> None:
    """Down while a fire was due: the next leader publishes it once (catch_up = latest)."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("tick", "3s"))
    instance = await schedulers.start(path)
    await wait_published(broker, 1)
    await schedulers.stop(instance)
    [first] = await fire_times(broker)
    await asyncio.sleep(max((first + 3.5 * SECOND - utcnow()).total_seconds(), 0))
    await schedulers.start(path)
    await wait_published(broker, 3)
    assert await fire_times(broker) == [first, first + 3 * SECOND, first + 6 * SECOND]


async def test_a_broken_file_is_rejected_and_the_old_schedules_keep_running(
    broker: TestBroker, schedulers: Schedulers, tmp_path: Path
) -> None:
    """A changed file that does not validate is logged; a valid one replaces the schedules."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("old", "1s"))
    await schedulers.start(path, schedules_poll_seconds=0.1)
    await wait_published(broker, 1)
    with capture_logs() as logs:
        path.write_text('[[schedule]]\nname = "new"\nevery = "1s"\n')  # no task
        await eventually(lambda: any(e["event"].startswith("schedules not") for e in logs))
        seen = len(await fire_times(broker, "old"))
        await wait_published(broker, seen + 1)
        write_schedules(broker, path, every("new", "1s"))
        await eventually(lambda: fire_times(broker, "new"), 10)
    [rejected] = [e for e in logs if e["event"].startswith("schedules not reloaded")]
    assert rejected["problems"] == ["schedule 'new' (#1): task: Field required"]
    assert rejected["log_level"] == "error"


async def test_a_leader_that_loses_its_connection_stops_and_runs_again(
    broker: TestBroker,
    schedulers: Schedulers,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lost connection ends leadership at once; a new one wins it back, no fire lost."""
    connections: list[AbstractConnection] = []
    original = warren_cron.scheduler.leader.open_connection

    async def recorded(*args: Any) -> AbstractConnection:
        connections.append(await original(*args))
        return connections[-1]

    monkeypatch.setattr(warren_cron.scheduler.service, "open_connection", recorded)
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("tick", "1s", catch_up='"all"'))
    instance = await schedulers.start(path)
    await wait_published(broker, 1)
    # The leader's connection is the last one opened: a loaded broker may have refused one
    # before it (CI once saw the first closed with INTERNAL_ERROR at once).
    opened = len(connections)
    await connections[-1].close()
    await eventually(lambda: not instance.leading.is_set(), timeout=2)
    # A new term reads the lock, the pauses and the store first: seconds on a loaded machine.
    await eventually(lambda: len(connections) > opened and instance.leading.is_set(), timeout=30)
    count = len(await fire_times(broker))
    await wait_published(broker, count + 2)
    times = await fire_times(broker)
    assert sorted(set(times)) == [min(times) + n * SECOND for n in range(len(set(times)))]
    # A loss between a fire's confirm and its watermark repeats that one fire (at least once,
    # never lost); its run id lets handlers drop the repeat.
    assert len(times) - len(set(times)) <= 1


@pytest.mark.parametrize("step", ["watermark", "publish", "stuck"])
async def test_a_connection_closing_under_a_leaders_write_ends_the_term_not_the_scheduler(
    broker: TestBroker,
    schedulers: Schedulers,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    step: str,
) -> None:
    """The connection closing while the leader writes its watermark or opens a channel to
    publish, or while a scheduler opens its locks, the call failing with what aiormq raised
    then (a bare ``Exception``, a ``RuntimeError``, or a ``CancelledError`` when it dropped a
    node frozen past the heartbeat), ends that session; the scheduler leads again on a new
    connection instead of exiting."""
    connections: list[AbstractConnection] = []
    opened = warren_cron.scheduler.leader.open_connection

    async def recorded(*args: Any) -> AbstractConnection:
        connections.append(await opened(*args))
        return connections[-1]

    monkeypatch.setattr(warren_cron.scheduler.service, "open_connection", recorded)
    owner, name = {
        "watermark": (warren_cron.scheduler.watermark.Watermark, "write"),
        "publish": (warren_cron.scheduler.publisher.FirePublisher, "open"),
        "stuck": (warren_cron.scheduler.leases.Leases, "open"),
    }[step]
    raised = {
        "watermark": Exception(),
        "publish": RuntimeError("connection closed"),
        # What a call under way raised when aiormq dropped a node frozen past the heartbeat.
        "stuck": asyncio.CancelledError(),
    }[step]
    original = getattr(owner, name)

    closes: list[asyncio.Task[None]] = []

    async def closing_under(self: Any, *args: Any) -> Any:
        if len(connections) > 1:
            return await original(self, *args)
        closes.append(asyncio.create_task(connections[0].close()))
        await asyncio.sleep(0)  # the close begins; the write fails before it ends
        # What aiormq raised when the broker closed the connection under it (4.3, loaded).
        raise raised

    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("tick", "1s", catch_up='"all"'))
    monkeypatch.setattr(owner, name, closing_under)
    instance = await schedulers.start(path)
    await eventually(lambda: len(connections) == 2 and instance.leading.is_set(), timeout=30)
    task = schedulers.tasks[id(instance)][1]
    assert not task.done(), task
