"""Metrics and /healthz of the running processes, against the real broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aio_pika
import httpx
import pytest

from tests.conftest import plan
from tests.helpers import Recorder, envelope, publish, registry
from tests.namespace import TestBroker
from tests.scheduling import Process, Spawner, env_for, wait_published, write_schedules
from warren_cron.faultkit.private_broker import free_port
from warren_cron.faultkit.waits import eventually
from warren_cron.runtime.process import start_metrics
from warren_cron.worker.__main__ import health_checks

pytestmark = pytest.mark.broker


async def scrape(port: int, path: str, timeout: float = 15) -> httpx.Response:
    """GET a process's endpoint, waiting for the server to come up."""
    async with httpx.AsyncClient() as client:

        async def answer() -> httpx.Response | None:
            try:
                return await client.get(f"http://127.0.0.1:{port}{path}")
            except httpx.TransportError:
                return None  # not listening yet

        response = await eventually(answer, timeout, what=f"an answer on {path}")
        assert response is not None
        return response


async def wait_metric(port: int, line: str, timeout: float = 15) -> str:
    """Wait until /metrics contains ``line``; return the whole page."""

    async def page() -> str:
        text = (await scrape(port, "/metrics")).text
        return text if line in text else ""

    return await eventually(page, timeout, what=f"{line!r} in /metrics")


async def test_scheduler_reports_leadership_fires_and_health(
    broker: TestBroker, spawn: Spawner, tmp_path: Path
) -> None:
    """A leading scheduler is healthy, shows leader 1 and counts each confirmed fire."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, '[[schedule]]\nname = "tick"\nevery = "1s"\ntask = "noop"\n')
    await broker.declare()
    port = free_port()
    env = env_for(broker, CRON_SCHEDULES_FILE=str(path), CRON_METRICS_PORT=str(port))
    process: Process = await spawn(["-m", "warren_cron.scheduler"], env)
    await wait_published(broker, 2)
    text = await wait_metric(port, "cron_scheduler_leading 1.0")
    assert 'cron_fires_total{schedule="tick"}' in text
    assert 'cron_fire_lag_seconds_count{stage="publish"}' in text
    health = await scrape(port, "/healthz")
    assert health.status_code == 200 and health.json()["healthy"] is True
    assert await process.stop() == 0


async def test_monitor_reports_failed_queue_depth_and_health(
    broker: TestBroker, spawn: Spawner
) -> None:
    """The monitor publishes the failed queue's depth as a gauge and is healthy while connected."""
    topology = await broker.declare()
    for _ in range(3):
        await topology.dlx.publish(aio_pika.Message(b"{}"), "failed", mandatory=True)
    port = free_port()
    env = env_for(broker, CRON_METRICS_PORT=str(port), CRON_MONITOR_INTERVAL_SECONDS="0.2")
    process: Process = await spawn(["-m", "warren_cron.monitor"], env)
    await wait_metric(port, f'cron_queue_depth{{queue="{broker.names.failed_queue}"}} 3.0')
    health = await scrape(port, "/healthz")
    assert health.status_code == 200
    assert await process.stop() == 0


async def wait_health(port: int, status: int, timeout: float = 15) -> dict[str, object]:
    """Wait until /healthz answers ``status``; return its body."""

    async def answered() -> httpx.Response | None:
        response = await scrape(port, "/healthz")
        return response if response.status_code == status else None

    response = await eventually(answered, timeout, what=f"/healthz answering {status}")
    assert response is not None
    body: dict[str, object] = response.json()
    return body


async def test_worker_health_turns_red_while_the_broker_has_cancelled_its_consumer(
    broker: TestBroker, run_worker: Any
) -> None:
    """A consumer the broker cancelled, and could not restore, makes /healthz 503 'consumer'."""
    port = free_port()
    worker = await run_worker(metrics_port=port)
    server = start_metrics(port, health_checks(worker))
    try:
        await wait_health(port, 200)
        channel = await broker.channel()
        await channel.queue_delete(broker.names.main_queue)  # the broker cancels the consumer
        # Redeclared with other arguments, the worker cannot restore its consumer on it.
        await channel.declare_queue(
            broker.names.main_queue, durable=True, arguments={"x-max-length": 1}
        )
        body = await wait_health(port, 503)
        assert "consumer" in body["failing"]  # type: ignore[operator]
        await channel.queue_delete(broker.names.main_queue)
        await wait_health(port, 200)  # it consumes again once the queue can be restored
    finally:
        assert server is not None
        server.shutdown()
        server.server_close()


async def test_worker_metrics_count_attempts_by_task_and_outcome(
    broker: TestBroker, run_worker: Any
) -> None:
    """Attempts, retries and failures show up per task once a port is set."""
    port = free_port()
    worker = await run_worker(registry(boom=Recorder(failures=9)), metrics_port=port)
    server = start_metrics(port, health_checks(worker))
    try:
        await publish(broker, envelope("boom"), plan(50))
        await broker.wait_depth(broker.names.failed_queue, 1)
        text = await wait_metric(port, 'cron_failed_total{reason="retries-exhausted",task="boom"}')
        assert 'cron_attempts_total{outcome="retrying",task="boom"}' in text
        assert 'cron_retries_total{task="boom"}' in text
        assert 'cron_fire_lag_seconds_count{stage="start"}' in text
    finally:
        assert server is not None
        server.shutdown()
        server.server_close()
