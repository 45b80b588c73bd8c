"""The probes of a worker process while its broker restarts: liveness stays 200 throughout
(an orchestrator must not restart workers for a broker outage), readiness goes 503 and back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from tests.namespace import TestBroker
from tests.scheduling import Spawner, env_for
from warren_cron.faultkit.private_broker import PrivateBroker, free_port
from warren_cron.faultkit.waits import eventually

pytestmark = pytest.mark.faults

Status = Callable[[str], Awaitable[int | None]]


@pytest.fixture
async def status() -> AsyncIterator[Callable[[int], Status]]:
    """``status(port)(path)``: a probe's status code, None while nothing listens."""
    async with httpx.AsyncClient(timeout=5) as client:  # closed after the test's samplers

        def on(port: int) -> Status:
            async def get(path: str) -> int | None:
                try:
                    return (await client.get(f"http://127.0.0.1:{port}{path}")).status_code
                except httpx.TransportError:
                    return None

            return get

        yield on


async def sample(get: Status, path: str, seen: list[int | None], stop: asyncio.Event) -> None:
    """Record ``path``'s status every tenth of a second until ``stop``."""
    while not stop.is_set():
        seen.append(await get(path))
        await asyncio.sleep(0.1)


async def answers(get: Status, path: str, code: int, timeout: float = 60) -> None:
    """Wait until ``path`` answers ``code``."""

    async def answered() -> bool:
        return await get(path) == code

    await eventually(answered, timeout, what=f"{path} answering {code}")


async def test_a_broker_restart_leaves_the_worker_alive_and_makes_it_unready_until_back(
    private_broker: PrivateBroker,
    broker: TestBroker,
    spawn: Spawner,
    status: Callable[[int], Status],
) -> None:
    """Every /livez sample is 200 through a clean stop and start of the node; /readyz is 503
    while it is down and 200 again once the worker consumes; /startupz stays 200."""
    await broker.declare()
    port = free_port()
    env = env_for(broker, CRON_METRICS_PORT=str(port), CRON_HEARTBEAT_SECONDS="2")
    process = await spawn(["-m", "warren_cron.worker"], env)
    get = status(port)
    # As an orchestrator does: liveness and readiness count once the start is seen.
    await answers(get, "/startupz", 200)
    assert await get("/readyz") == 200
    live: list[int | None] = []
    done = asyncio.Event()
    sampler = asyncio.create_task(sample(get, "/livez", live, done))
    await asyncio.to_thread(private_broker.stop)
    await answers(get, "/readyz", 503)
    assert await get("/startupz") == 200
    await asyncio.to_thread(private_broker.start)
    await answers(get, "/readyz", 200, timeout=90)
    done.set()
    await sampler
    assert live and set(live) == {200}, live
    assert process.proc.returncode is None
    assert await process.stop() == 0
