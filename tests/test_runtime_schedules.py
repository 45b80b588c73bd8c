"""The leading scheduler fires runtime schedules beside the file's, following each change."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aio_pika.abc import AbstractConnection
from structlog.testing import capture_logs

import warren_cron.scheduler.service
from tests.namespace import TestBroker
from tests.scheduling import Schedulers, every, fire_times, write_schedules
from warren_cron.client import Client
from warren_cron.clock import utcnow
from warren_cron.faultkit.waits import eventually
from warren_cron.scheduler.leader import open_connection

pytestmark = pytest.mark.broker
SECOND = timedelta(seconds=1)


async def fired(broker: TestBroker, name: str, count: int, timeout: float = 15) -> None:
    """Wait until ``name`` has at least ``count`` fires in the main queue."""

    async def enough() -> bool:
        return len(await fire_times(broker, name)) >= count

    await eventually(enough, timeout, what=f"{count} fire(s) of {name}")


async def test_created_updated_and_archived_schedules_fire_as_the_store_says(
    broker: TestBroker, client: Client, schedulers: Schedulers, tmp_path: Path
) -> None:
    """create fires within moments; an update to every 1h stops the fires due after the
    leader applied it, one back to every 1s resumes them; an archive stops them; the file's
    schedule fires throughout."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("from-file", "1s"))
    with capture_logs() as logs:
        await schedulers.start(path)
        made = await client.create_schedule({"name": "rt", "every": "1s", "task": "noop"})
        await fired(broker, "rt", 2)
        slow = await client.update_schedule("rt", {"every": "1h"}, version=made.version)
        changed_at = await applied(logs, "rt", slow.version)
        await file_fires_twice_more(broker)
        assert all(t <= changed_at for t in await fire_times(broker, "rt"))
        await client.update_schedule("rt", {"every": "1s"}, version=slow.version)
        before = len(await fire_times(broker, "rt"))
        await fired(broker, "rt", before + 2)
        archived = await client.archive_schedule("rt", reason="done")
        archived_at = await applied(logs, "rt", archived.version)
        await file_fires_twice_more(broker)
    assert all(t <= archived_at for t in await fire_times(broker, "rt"))
    assert max(await fire_times(broker, "from-file")) > archived_at


async def applied(logs: list[MutableMapping[str, Any]], name: str, version: int) -> datetime:
    """Wait until the leader logged applying ``version`` of ``name``; when that was seen."""

    def seen() -> bool:
        return any(
            e["event"] == "runtime schedule changed"
            and (e["schedule"], e["version"]) == (name, version)
            for e in logs
        )

    await eventually(seen, 30, what=f"{name} v{version} applied")
    return utcnow()


async def file_fires_twice_more(broker: TestBroker) -> None:
    """Wait until the file's every-1s schedule fired twice more: the leader's loop went on
    past a second, a window measured by its own progress rather than by the wall clock."""
    before = len(await fire_times(broker, "from-file"))
    await fired(broker, "from-file", before + 2)


async def test_a_new_leader_reads_the_store_and_writes_a_snapshot(
    broker: TestBroker, client: Client, schedulers: Schedulers, tmp_path: Path
) -> None:
    """Schedules created while no scheduler runs fire once one leads; it snapshots them."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, "")
    for name in ("a", "b"):
        await client.create_schedule({"name": name, "every": "1s", "task": "noop"})
    with capture_logs() as logs:
        await schedulers.start(path)
        await fired(broker, "a", 1)
        await fired(broker, "b", 1)
        # Written just after the first fires, not before them.
        await eventually(lambda: any(e["event"] == "schedules snapshot written" for e in logs))
    [snapshot] = [e for e in logs if e["event"] == "schedules snapshot written"]
    assert snapshot["schedules"] == 2
    assert await broker.depth(broker.names.store_snapshot) == 1


async def test_the_files_schedule_wins_over_a_runtime_one_of_the_same_name(
    broker: TestBroker, client: Client, schedulers: Schedulers, tmp_path: Path
) -> None:
    """A runtime schedule made before the file took its name is not run; the file's is."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, "")
    await client.create_schedule({"name": "clash", "every": "1h", "task": "noop"})
    write_schedules(broker, path, every("clash", "1s"))
    with capture_logs() as logs:
        await schedulers.start(path)
        await fired(broker, "clash", 2)
    assert any(e["event"].startswith("runtime schedule not run") for e in logs)


async def test_a_leader_back_after_a_lost_connection_catches_up_on_the_changes_made_meanwhile(
    broker: TestBroker,
    client: Client,
    schedulers: Schedulers,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A scheduler whose connection dropped reads only the changes made while it was away when
    it leads again (no second read of the store), and runs them: a schedule created then
    fires, one archived then stops."""
    connections: list[AbstractConnection] = []
    cut, away = asyncio.Event(), asyncio.Event()

    async def gated(*args: Any) -> AbstractConnection:
        # Held only after the test's own cut: a connection the broker closed before (RabbitMQ
        # 3.10 once closed one with INTERNAL_ERROR under load) is opened again at once.
        if cut.is_set():
            await away.wait()  # the test changes the store while no connection is open
        connections.append(await open_connection(*args))
        return connections[-1]

    monkeypatch.setattr(warren_cron.scheduler.service, "open_connection", gated)
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, "")
    made = await client.create_schedule({"name": "old", "every": "1s", "task": "noop"})
    with capture_logs() as logs:
        instance = await schedulers.start(path)
        await fired(broker, "old", 1)
        cut.set()
        await connections[-1].close()
        await eventually(lambda: not instance.leading.is_set(), 10, what="the term ended")
        await client.create_schedule({"name": "new", "every": "1s", "task": "noop"})
        await client.archive_schedule("old", reason="done", version=made.version)
        archived_at = utcnow()
        away.set()
        await fired(broker, "new", 1, timeout=30)
    reads = [e["event"] for e in logs if e["event"].startswith("runtime schedules")]
    # Read once; each lead after a lost connection (the test's, and any the broker made)
    # only caught up.
    assert reads[0] == "runtime schedules read", reads
    assert reads[1:] and set(reads[1:]) == {"runtime schedules caught up"}, reads
    assert all(t <= archived_at + SECOND for t in await fire_times(broker, "old"))
