"""The startup, liveness and readiness answers every long-running process serves."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.namespace import TestBroker
from tests.scheduling import Spawner, env_for, every, write_schedules
from warren_cron.faultkit.private_broker import free_port
from warren_cron.faultkit.waits import eventually
from warren_cron.runtime.probes import PROBE_PATHS, Pulse, ever
from warren_cron.runtime.process import start_metrics


class Switch:
    """A check the test turns on and off."""

    def __init__(self, on: bool) -> None:
        self.on = on

    def __call__(self) -> bool:
        """The check's answer."""
        return self.on


@pytest.fixture
def served() -> Iterator[tuple[str, Switch, Switch]]:
    """A probe server with a switchable readiness check and a switchable liveness check."""
    ready, live = Switch(False), Switch(True)
    port = free_port()
    server = start_metrics(port, {"broker-connection": ready}, {"event-loop": live})
    assert server is not None
    yield f"http://127.0.0.1:{port}", ready, live
    server.shutdown()
    server.server_close()


def codes(url: str) -> dict[str, int]:
    """The status of each probe path."""
    return {path: httpx.get(url + path).status_code for path in PROBE_PATHS}


def test_liveness_holds_while_readiness_fails_and_startup_waits_for_the_first_ready(
    served: tuple[str, Switch, Switch],
) -> None:
    """No broker yet: alive, not ready, not started; once ready, started stays 200 even when
    readiness fails again (a broker outage after the start)."""
    url, ready, _ = served
    assert codes(url) == {"/livez": 200, "/readyz": 503, "/startupz": 503, "/healthz": 503}
    ready.on = True
    assert codes(url) == dict.fromkeys(PROBE_PATHS, 200)
    ready.on = False
    assert codes(url) == {"/livez": 200, "/readyz": 503, "/startupz": 200, "/healthz": 503}
    assert httpx.get(url + "/readyz").json() == {
        "healthy": False,
        "failing": ["broker-connection"],
    }


def test_a_stuck_event_loop_fails_liveness_naming_it(served: tuple[str, Switch, Switch]) -> None:
    """Liveness answers 503 naming the event loop once its pulse stops."""
    url, ready, live = served
    ready.on, live.on = True, False
    response = httpx.get(url + "/livez")
    assert response.status_code == 503 and response.json()["failing"] == ["event-loop"]


async def test_the_pulse_goes_stale_once_the_loop_stops_ticking() -> None:
    """Alive while the loop ticks; stale after ``stale_after`` seconds without a tick."""
    now = [100.0]
    pulse = Pulse(stale_after=5, tick=0.01, clock=lambda: now[0])
    ticking = asyncio.create_task(pulse.run())
    await asyncio.sleep(0.05)
    assert pulse.alive()
    ticking.cancel()
    now[0] += 4.9
    assert pulse.alive()
    now[0] += 0.2
    assert not pulse.alive()


def test_started_latches_only_once_every_check_passed_together() -> None:
    """One check passing while another fails is not a start; once all passed, it stays."""
    a, b = Switch(True), Switch(False)
    started = ever({"a": a, "b": b})
    assert not started()
    a.on, b.on = False, True
    assert not started()
    a.on = True
    assert started()
    a.on = b.on = False
    assert started()


@pytest.mark.parametrize("process", ["scheduler", "monitor"])
async def test_the_scheduler_and_the_monitor_answer_every_probe_once_connected(
    broker: TestBroker, spawn: Spawner, tmp_path: Path, process: str
) -> None:
    """The worker's probes are tested through a broker restart; these two serve all four."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("tick", "1s"))
    await broker.declare()
    port = free_port()
    env = env_for(broker, CRON_METRICS_PORT=str(port), CRON_SCHEDULES_FILE=str(path))
    started = await spawn(["-m", f"warren_cron.{process}"], env)
    url = f"http://127.0.0.1:{port}"

    async def all_ok() -> bool:
        try:
            return await asyncio.to_thread(codes, url) == dict.fromkeys(PROBE_PATHS, 200)
        except httpx.TransportError:
            return False  # not listening yet

    await eventually(all_ok, 30, what=f"the {process}'s probes all answering 200")
    assert await started.stop() == 0
