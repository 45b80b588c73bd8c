"""Runtime schedules through a broker restart and a scheduler failover."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from tests.namespace import TestBroker
from tests.scheduling import Spawner, env_for, write_schedules
from warren_cron.client import Client
from warren_cron.faultkit.private_broker import PrivateBroker
from warren_cron.faultkit.waits import eventually
from warren_cron.store import book

pytestmark = pytest.mark.faults


async def test_a_created_changed_and_archived_schedule_survives_a_broker_restart(
    broker: TestBroker, private_broker: PrivateBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a restart of the node a new client reads the last state and the whole history,
    from a snapshot and the changes after it."""
    monkeypatch.setattr(book, "SNAPSHOT_EVERY", 2)
    async with Client(broker.settings()) as client:
        made = await client.create_schedule({"name": "rt", "every": "1h", "task": "noop"})
        await client.update_schedule("rt", {"every": "2h"}, version=made.version, by="ops")
        await client.archive_schedule("rt", version=2, by="ops", reason="gone")
    await asyncio.to_thread(private_broker.stop)
    await asyncio.to_thread(private_broker.start)
    async with Client(broker.settings()) as client:
        got = await client.get_schedule("rt")
    assert (got.status, got.version, got.spec.every) == ("archived", 3, "2h")
    assert [(h["kind"], h["by"], h["reason"]) for h in got.history][1:] == [
        ("update", "ops", None),
        ("archive", "ops", "gone"),
    ]

    async def snapshot_kept() -> bool:
        with contextlib.suppress(RuntimeError):  # the test's own connection reconnects
            return await broker.depth(broker.names.store_snapshot) == 1
        return False

    await eventually(snapshot_kept, 20)


def fired(process: Any, schedule: str) -> list[dict[str, Any]]:
    """The fires of ``schedule`` that ``process`` published."""
    return [e for e in process.named("fire published") if e["schedule"] == schedule]


async def test_a_standby_that_takes_over_fires_a_runtime_schedule(
    broker: TestBroker, spawn: Spawner, tmp_path: Path
) -> None:
    """kill -9 of the leader that applied a created schedule: the new leader fires it."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, "")
    env = env_for(broker, CRON_SCHEDULES_FILE=str(path), CRON_LEADER_RETRY_SECONDS="0.2")
    leader = await spawn(["-m", "warren_cron.scheduler"], env)
    await leader.wait_event("leading")
    standby = await spawn(["-m", "warren_cron.scheduler"], env)
    await standby.wait_event("standing by: another scheduler leads")
    settings = broker.settings()
    broker.plan_keys.update(step.key for step in settings.default_plan().suffixes())
    async with Client(settings) as client:
        await client.create_schedule({"name": "rt", "every": "1s", "task": "noop"})
    await leader.wait_event("runtime schedule changed")
    await eventually(lambda: fired(leader, "rt"), 10)
    await leader.kill()
    await standby.wait_event("leading", timeout=30)
    await standby.wait_event("runtime schedules read")
    await eventually(lambda: len(fired(standby, "rt")) >= 2, 15)
    assert await standby.stop() == 0
