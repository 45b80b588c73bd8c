"""An application waiting on warren while the broker goes away: a run's result and the API."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aio_pika
import pytest

from tests.api import SPEC, StartMonitor, served_api
from tests.helpers import registry
from tests.namespace import TestBroker
from warren_cron.client import Client
from warren_cron.clock import utcnow
from warren_cron.faultkit.private_broker import PrivateBroker
from warren_cron.faultkit.waits import eventually
from warren_cron.history import follow
from warren_cron.schedules.heartbeats import Beat
from warren_cron.worker.context import TaskContext

pytestmark = pytest.mark.faults


async def doubled(payload: Any, ctx: TaskContext) -> dict[str, Any]:
    """The handler whose value the waiting application wants."""
    return {"doubled": payload * 2}


async def test_result_waits_through_a_broker_restart_and_returns_the_value(
    broker: TestBroker,
    private_broker: PrivateBroker,
    run_private_worker: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """result() is waiting when the broker restarts; the run happens after the restart, and the
    waiting call returns its value: its follower consumed again from where it was."""
    following = asyncio.Event()
    start = follow.StreamFollower.start

    async def started(self: follow.StreamFollower, connection: Any) -> None:
        await start(self, connection)
        following.set()

    monkeypatch.setattr(follow.StreamFollower, "start", started)
    settings = broker.settings()
    broker.plan_keys.update(step.key for step in settings.default_plan().suffixes())
    async with Client(settings) as client:
        handle = client.run(await client.enqueue("job", 21))
        waiting = asyncio.create_task(handle.result(timeout=120))
        await asyncio.wait_for(following.wait(), 20)
        await asyncio.to_thread(private_broker.restart)
        await run_private_worker(registry(job=doubled))
        assert await waiting == {"doubled": 42}
        assert (await handle.status()).state == "succeeded"


async def test_the_api_answers_503_while_the_broker_is_down_and_serves_again_after(
    broker: TestBroker,
    private_broker: PrivateBroker,
    run_monitor: StartMonitor,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the broker stopped, writes of the API get a JSON 503 that says to try again, within
    the client's patience, not a hang or a 500 (reads are served from what the monitor
    follows); once the broker is back the same calls succeed."""
    async with served_api(broker, run_monitor, tmp_path, monkeypatch) as api:
        assert (await api.call("GET", "/schedules", "viewer"))[0] == 200
        await asyncio.to_thread(private_broker.stop)
        try:
            for method, path, role in [
                ("POST", "/schedules/from-file/trigger", "operator"),
                ("POST", "/schedules", "admin"),
            ]:
                sent = {"spec": SPEC} if role == "admin" else None
                call = api.call(method, path, role, json=sent)
                status, body = await asyncio.wait_for(call, 30)
                assert status == 503, body
                assert body["error"]["code"] == "broker_unavailable", body
                assert "try again" in body["error"]["message"], body
        finally:
            await asyncio.to_thread(private_broker.start)

        async def served() -> tuple[int, Any] | None:
            answer = await api.call("POST", "/schedules", json={"spec": SPEC})
            return answer if answer[0] == 201 else print(answer)

        await eventually(served, 60, what="the API serving again after the restart")
        status, body = await api.call("GET", f"/schedules/{SPEC['name']}", "viewer")
        assert (status, body["version"]) == (200, 1)


async def test_the_monitor_reads_scheduler_beats_again_after_a_broker_restart(
    broker: TestBroker,
    private_broker: PrivateBroker,
    run_monitor: StartMonitor,
) -> None:
    """A beat sent after the restart reaches the monitor: without it the monitor would call a
    live scheduler down, and page someone, after every broker restart."""
    monitor = await run_monitor()
    await asyncio.to_thread(private_broker.restart)
    sent = Beat("after-restart:1", False, utcnow(), 1.0)

    async def beat_seen() -> bool:
        async with await aio_pika.connect(broker.url) as connection:
            channel = await connection.channel()
            await channel.default_exchange.publish(
                aio_pika.Message(sent.encode()), broker.names.beat_stream
            )
        return monitor.schedulers.beats.get(sent.scheduler) == sent

    await eventually(beat_seen, 60, what="a beat sent after the restart read by the monitor")
