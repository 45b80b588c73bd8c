"""Scheduler liveness: real scheduler processes killed and started again, as the monitor's
``scheduler.down`` alert and ``warren status`` report them."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.namespace import TestBroker
from tests.scheduling import Process, Spawner, write_schedules
from tests.test_scheduler_cli import TICK, scheduler_env
from tests.test_status import status
from tests.webhook import Endpoint, conditions, serve
from warren_cron.clock import utcnow
from warren_cron.faultkit.waits import eventually
from warren_cron.history.status_fold import StatusFold
from warren_cron.monitor import Monitor
from warren_cron.runtime.settings import CronSettings
from warren_cron.schedules.heartbeats import Beat, SchedulerView, decode_beat
from warren_cron.schedules.load import load_schedules
from warren_cron.schedules.status_rows import status_rows

pytestmark = pytest.mark.broker
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=utcnow().tzinfo)
#: The monitor's delay before scheduler.down in the process test.
DOWN_SECONDS = 3.0


def beat(name: str, leading: bool, age: float = 0.0, lag: float = 0.0) -> Beat:
    """A beat of ``name`` sent ``age`` seconds before NOW, every second."""
    at = NOW - timedelta(seconds=age)
    last = at - timedelta(seconds=1) if leading else None
    following = at + timedelta(seconds=1) if leading else None
    return Beat(name, leading, at, 1.0, last, following, lag)


def test_a_held_leader_queue_with_a_current_leader_beat_reads_as_leading() -> None:
    """The line names the leader, counts standbys and says when it last fired."""
    beats = {"a:1": beat("a:1", True), "b:2": beat("b:2", False), "c:3": beat("c:3", False, 60)}
    view = SchedulerView(True, beats, NOW)
    assert view.leading and [b.scheduler for b in view.standbys] == ["b:2"]
    assert view.line() == "scheduler: a:1 leads (1 standby); last fire 1s ago, next in 1s"


def test_no_leader_queue_reads_as_down_naming_the_last_scheduler_seen() -> None:
    """A leader's beats do not count once its queue is gone: the broker fenced it."""
    view = SchedulerView(False, {"a:1": beat("a:1", True, age=120)}, NOW)
    assert not view.leading
    assert view.line() == (
        "scheduler: DOWN: no scheduler leads (no standby; last seen 2m ago); nothing fires"
    )


def test_a_held_queue_without_leader_beats_reads_as_silent() -> None:
    """An older scheduler, or one stuck with its connection alive, is not a live leader."""
    view = SchedulerView(True, {"a:1": beat("a:1", True, age=10)}, NOW)
    assert not view.leading and view.line().startswith("scheduler: SILENT:")


def test_a_leader_behind_its_fires_says_by_how_much() -> None:
    """The lag the leader reports is in the line."""
    view = SchedulerView(True, {"a:1": beat("a:1", True, lag=75)}, NOW)
    assert "a:1 leads (no standby), 75s behind;" in view.line()


@pytest.mark.parametrize("body", [b"[]", b"{}", b"not json", b'{"scheduler": "x"}'])
def test_anything_but_a_beat_in_the_stream_is_skipped(body: bytes) -> None:
    """A reader passes over bodies it cannot read as beats."""
    assert decode_beat(body) is None


def test_a_beat_reads_back_as_sent() -> None:
    """Encoding and decoding keep every field."""
    sent = beat("a:1", True, lag=2.5)
    assert decode_beat(sent.encode()) == sent


def test_next_fire_is_overdue_when_nothing_fired_since_a_fire_was_due(tmp_path: Path) -> None:
    """A minutely schedule last fired ten minutes ago is overdue by nine; paused is not."""
    path = tmp_path / "s.toml"
    path.write_text('[[schedule]]\nname = "m"\nevery = "1m"\ntask = "noop"\n')
    schedules = load_schedules(path, CronSettings())
    fold = StatusFold()
    fold.state("m").fired(NOW - timedelta(minutes=10))
    [row] = status_rows(schedules, fold, {}, NOW)
    assert row.overdue_since == NOW - timedelta(minutes=9)
    assert row.next_fire_text(NOW) == "overdue 9m"
    assert row.to_json()["overdue_since"] == "2026-03-01T11:51:00Z"
    [paused] = status_rows(schedules, fold, {"m": object()}, NOW)  # type: ignore[dict-item]
    assert paused.overdue_since is None


async def first_line(broker: TestBroker, path: Path) -> str:
    """The first line ``warren status`` prints."""
    code, out, err = await status(broker, path)
    assert code == 0, err
    return str(out).splitlines()[0]


async def spawn_scheduler(spawn: Spawner, env: dict[str, str]) -> Process:
    """A scheduler process, started."""
    process = await spawn(["-m", "warren_cron.scheduler"], env)
    await process.wait_event("scheduler started")
    return process


def settled(hook: Endpoint) -> bool:
    """True unless the last ``scheduler.down`` alert sent is still firing."""
    return conditions(hook, "scheduler.down")[-1:] != ["firing"]


def one_leads_one_stands_by(monitor: Monitor) -> bool:
    """True once the monitor's latest look saw a leader and one standby."""
    view = monitor.schedulers.view
    return view is not None and view.leading and len(view.standbys) == 1


async def test_every_scheduler_killed_alerts_scheduler_down_in_time_and_a_new_one_resolves_it(
    broker: TestBroker, spawn: Spawner, run_monitor: Any, tmp_path: Path
) -> None:
    """Two schedulers SIGKILLed: ``scheduler.down`` within the configured delay (plus a
    check), ``warren status`` says DOWN first; a scheduler started again resolves it."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, TICK)
    env = {**scheduler_env(broker, path), "CRON_SCHEDULER_BEAT_SECONDS": "1"}
    with serve(Endpoint()) as hook:
        monitor: Monitor = await run_monitor(
            alert_webhook_url=hook.url, scheduler_down_seconds=DOWN_SECONDS
        )
        first, second = [await spawn_scheduler(spawn, env) for _ in range(2)]
        # A start slower than DOWN_SECONDS (a loaded machine) may alert and resolve first.
        await eventually(lambda: one_leads_one_stands_by(monitor) and settled(hook), 20)
        assert " leads (1 standby); last fire " in await first_line(broker, path)
        before = len(conditions(hook, "scheduler.down"))
        await asyncio.gather(first.kill(), second.kill())
        killed = time.monotonic()
        await eventually(lambda: conditions(hook, "scheduler.down")[before:] == ["firing"], 20)
        assert time.monotonic() - killed < DOWN_SECONDS + 5  # a check, and a loaded machine
        assert (await first_line(broker, path)).startswith("scheduler: DOWN: no scheduler leads")
        await spawn_scheduler(spawn, env)
        resolved = ["firing", "resolved"]
        await eventually(lambda: conditions(hook, "scheduler.down")[before:] == resolved, 20)
