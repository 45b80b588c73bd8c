"""A pause outlives the leader that applied it: the standby that takes over keeps it."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.namespace import TestBroker
from tests.pausing import schedules_script, wait_events
from tests.scheduling import Process, Spawner, env_for, every, fire_times, write_schedules
from warren_cron.faultkit.waits import eventually

pytestmark = pytest.mark.faults

FIRED = "fire published"
SECOND = timedelta(seconds=1)


def fired(process: Process, schedule: str) -> list[dict[str, Any]]:
    """The fires of ``schedule`` that ``process`` published."""
    return [e for e in process.named(FIRED) if e["schedule"] == schedule]


def held(process: Process) -> list[dict[str, Any]]:
    """The fires ``process`` skipped because their schedule is paused."""
    return [e for e in process.named("fire skipped") if e["reason"] == "paused"]


async def test_a_paused_schedule_stays_paused_after_the_leader_is_killed(
    broker: TestBroker, spawn: Spawner, tmp_path: Path
) -> None:
    """kill -9 of the leader that paused ``tick``: the new leader skips it, fires ``tock``,
    and applies the resume."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("tick", "1s") + every("tock", "1s"))
    env = env_for(broker, CRON_SCHEDULES_FILE=str(path), CRON_LEADER_RETRY_SECONDS="0.2")
    leader = await spawn(["-m", "warren_cron.scheduler"], env)
    await leader.wait_event("leading")
    standby = await spawn(["-m", "warren_cron.scheduler"], env)
    await standby.wait_event("standing by: another scheduler leads")
    await schedules_script(broker, path, "pause", "tick", "--reason", "failover test")
    [paused] = await wait_events(broker, type="paused")
    await leader.wait_event("schedule paused")
    await leader.kill()
    await standby.wait_event("leading", timeout=30)
    await standby.wait_event(FIRED, count=3)
    assert fired(standby, "tick") == [] and len(fired(standby, "tock")) >= 3
    assert all(t <= paused.at + SECOND for t in await fire_times(broker, "tick"))
    assert await eventually(lambda: held(standby), 10)
    resumed = await schedules_script(broker, path, "resume", "tick")
    assert resumed.returncode == 0, resumed.stderr
    await standby.wait_event("schedule resumed")
    await eventually(lambda: fired(standby, "tick"), 10)
    assert await standby.stop() == 0
