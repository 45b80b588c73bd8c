"""Tasks published by hand while workers are killed: adopted, never lost, repeats explained."""

from __future__ import annotations

import asyncio
import random

import aio_pika
import pytest

from tests.faults.harness import FaultScenario
from warren_cron import codec
from warren_cron.faultkit.workload import workload

pytestmark = pytest.mark.faults

#: The default plan adopted tasks get: short, so the test ends quickly.
PLAN_ENV = {"CRON_MAX_RETRIES": "2", "CRON_RETRY_DELAY_MS": "100"}


async def publish_by_hand(scenario: FaultScenario, count: int) -> None:
    """Publish ledger tasks to the main queue through the default exchange, confirmed."""
    connection = await aio_pika.connect(scenario.broker.url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        for envelope, kind in workload(count, 17):
            scenario.ledger.publishing(envelope.run_id, kind)
            message = aio_pika.Message(codec.encode(envelope), delivery_mode=2)
            await channel.default_exchange.publish(message, scenario.names.main_queue)
            scenario.ledger.confirmed(envelope.run_id)


async def test_hand_published_tasks_survive_worker_kills_with_every_repeat_explained(
    scenario: FaultScenario,
) -> None:
    """300 tasks published by hand while a worker is kill -9'd every half second: each is
    adopted and ends completed or failed; a repeat shows as a redelivery in the ledger."""
    await scenario.prepare()
    scenario.broker.plan_keys.update({"100ms-200ms", "200ms"})
    workers = [await scenario.worker(**PLAN_ENV) for _ in range(2)]
    rng = random.Random(5)  # noqa: S311 - which worker dies, reproducibly
    publishing = asyncio.create_task(publish_by_hand(scenario, 300))
    for _ in range(8):
        await asyncio.sleep(0.5)
        victim = workers.pop(rng.randrange(len(workers)))
        victim.kill()
        workers.append(scenario.spawn_worker(**PLAN_ENV))
    await publishing
    report = await scenario.check(timeout=90)
    assert len(report.runs) == 300
