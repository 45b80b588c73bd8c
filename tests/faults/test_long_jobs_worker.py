"""Long attempts in ``warren worker`` processes on the private node (consumer_timeout 4 s):
a run handed over after kill -9, a hung handler retried with its next attempt number."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from aiohttp import web

from tests.faults.harness import FaultScenario
from tests.faults.test_long_jobs import LEASE, events, long_envelope
from warren_cron.client import Client
from warren_cron.faultkit.waits import eventually
from warren_cron.history.lifecycle import RunStatus

pytestmark = pytest.mark.faults


def worker_env(ledger: Path) -> dict[str, str]:
    """A worker process running the long-job handlers, with the tests' lease."""
    return {
        "CRON_HANDLER_MODULES": "tests.long_handlers",
        "CRON_LONG_LEASE_SECONDS": str(LEASE),
        "LONG_LEDGER": str(ledger),
    }


async def running_on(client: Client, run_id: str, pid: int) -> RunStatus:
    """The run's status once it reads running on worker ``pid`` with a progress."""

    async def seen() -> RunStatus | None:
        status = await client.run(run_id).status()
        [attempt] = status.attempts or [None]
        on = attempt is not None and (attempt.worker or "").endswith(f":{pid}")
        return status if status.state == "running" and on and status.progress else None

    found = await eventually(seen, 30, what=f"the run running on {pid} with a progress")
    assert found is not None
    return found


async def test_a_workers_long_run_is_handed_over_after_kill_9(
    scenario: FaultScenario, tmp_path: Path
) -> None:
    """A 12 s run (three consumer timeouts), seen running with its progress: its worker
    killed mid-attempt, the other worker starts it within 1.5 leases plus a second, the run
    reads running there, and it succeeds."""
    ledger = tmp_path / "long.jsonl"
    await scenario.prepare()
    first = await scenario.worker(**worker_env(ledger))
    envelope = long_envelope("long_sleep", seconds=12, beat=0.5)
    await scenario.publish([(envelope, "long")])
    async with Client(scenario.settings()) as client:
        before = await running_on(client, envelope.run_id, first.pid)
        assert before.progress["done"] >= 1 and before.last_heartbeat is not None
        second = await scenario.worker(**worker_env(ledger))
        first.kill()
        killed = time.time()
        [start] = await eventually(lambda: events(ledger, envelope.run_id, "start")[1:], 20)
        assert start["pid"] == second.pid
        assert killed < start["t"] < killed + 1.5 * LEASE + 1
        after = await running_on(client, envelope.run_id, second.pid)
        assert [a.number for a in after.attempts] == [1]  # a hand-over spends no attempt
        await eventually(lambda: events(ledger, envelope.run_id, "end"), 30)
        await second.wait_log('"outcome":"succeeded"', timeout=10)
        ended = await client.run(envelope.run_id).wait(timeout=30)
        assert ended.state == "succeeded"


async def test_a_hung_handler_is_retried_as_its_next_attempt(
    scenario: FaultScenario, tmp_path: Path
) -> None:
    """A handler silent for three heartbeat intervals fails as hung; attempt 2 succeeds."""
    ledger = tmp_path / "long.jsonl"
    await scenario.prepare()
    worker = await scenario.worker(**worker_env(ledger))
    envelope = long_envelope("hangs_once")
    await scenario.publish([(envelope, "long")])
    await eventually(lambda: events(ledger, envelope.run_id, "end"), 30)
    assert [s["attempt"] for s in events(ledger, envelope.run_id, "start")] == [1, 2]
    assert '"reason":"hung"' in worker.log()


async def test_an_http_job_polled_for_three_consumer_timeouts_succeeds_seen_running(
    scenario: FaultScenario,
) -> None:
    """An http task whose endpoint answers 202 and a status URL, its job running 12 s (three
    consumer timeouts): the worker polls it, the run reads running with the job's progress
    meanwhile, and it succeeds with the job's result."""
    began = time.monotonic()

    async def endpoint(request: web.Request) -> web.Response:
        if request.method == "POST":
            return web.Response(status=202, headers={"Location": "/status"})
        done = int(time.monotonic() - began)
        if done < 12:
            return web.json_response({"state": "running", "progress": {"seconds": done}})
        return web.json_response({"state": "succeeded", "result": {"rows": 12}})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", endpoint)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/start"
        await _polled_job(scenario, url)
    finally:
        await runner.cleanup()


async def _polled_job(scenario: FaultScenario, url: str) -> None:
    """Run the http task for ``url`` on a worker and follow it to its end."""
    await scenario.prepare()
    worker = await scenario.worker()
    envelope = long_envelope("http", url=url, poll=1)
    await scenario.publish([(envelope, "long")])
    async with Client(scenario.settings()) as client:
        seen = await running_on(client, envelope.run_id, worker.pid)
        assert seen.progress["seconds"] < 12
        ended = await client.run(envelope.run_id).wait(timeout=60)
    assert (ended.state, ended.result) == ("succeeded", {"status": 202, "result": {"rows": 12}})
    assert len(ended.attempts) == 1
