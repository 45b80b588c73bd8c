"""SIGTERM to the leading scheduler process: it releases the leader lock at once and the
standby leads within a second or two, long before its next probe (docs/kubernetes.md)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.namespace import TestBroker
from tests.scheduling import Process, Spawner, env_for, every, write_schedules
from warren_cron.faultkit.waits import eventually

pytestmark = pytest.mark.broker

#: The standby's own probe comes every min(leader retry, lease / 4) = 10 s here: a takeover
#: within HANDOVER_SECONDS can only come from the release.
SLOW_STANDBY = {"CRON_LEADER_RETRY_SECONDS": "10", "CRON_SCHEDULER_HEARTBEAT_SECONDS": "20"}
HANDOVER_SECONDS = 2.0


async def start(broker: TestBroker, spawn: Spawner, path: Path) -> Process:
    """One scheduler process on the test's schedules file, with a slow standby probe."""
    env = env_for(broker, CRON_SCHEDULES_FILE=str(path), **SLOW_STANDBY)
    return await spawn(["-m", "warren_cron.scheduler"], env)


async def test_a_sigterm_to_the_leader_lets_the_standby_lead_within_two_seconds(
    broker: TestBroker, spawn: Spawner, tmp_path: Path
) -> None:
    """The leader stops, logs the release and exits 0; the standby logs leading at once."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("tick", "1s"))
    leader = await start(broker, spawn, path)
    await leader.wait_event("leading", timeout=30)
    standby = await start(broker, spawn, path)
    await standby.wait_event("standing by: another scheduler leads", timeout=30)
    began = time.monotonic()
    assert await leader.stop() == 0
    await eventually(lambda: standby.named("leading"), 15, what="the standby leading")
    took = time.monotonic() - began
    assert leader.named("leadership released"), leader.events[-5:]
    assert took <= HANDOVER_SECONDS, f"the standby led {took:.2f} s after the SIGTERM"
    assert await standby.stop() == 0
