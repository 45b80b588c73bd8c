"""Cancels across a broker restart, on a private node: a tombstone stored before the restart
is known to a worker started after it, and a worker that lived through the restart still
follows the cancels stream."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.helpers import Recorder, registry
from tests.namespace import TestBroker
from tests.test_cancel import attempts_end
from warren_cron.client import Client
from warren_cron.faultkit.private_broker import PrivateBroker

pytestmark = [pytest.mark.broker, pytest.mark.faults]
#: How long the run cancelled after the restart is delayed.
DELAY_SECONDS = 10


@pytest.mark.parametrize("node", ["private"])
async def test_a_cancel_survives_a_broker_restart(
    broker: TestBroker, private_broker: PrivateBroker, run_worker: Any
) -> None:
    """Cancelled, then the node restarts: the worker started after it acks the run cancelled
    and runs the other one."""
    settings = broker.settings()
    broker.plan_keys.update(step.key for step in settings.default_plan().suffixes())
    async with Client(settings) as client:
        cancelled = client.run(await client.enqueue("job"))
        kept = client.run(await client.enqueue("job"))
        await cancelled.cancel("before the restart")
    await asyncio.to_thread(private_broker.sync_metadata)
    await asyncio.to_thread(private_broker.restart)
    job = Recorder()
    await run_worker(registry(job=job))
    async with Client(settings) as client:
        await attempts_end(client.run(cancelled.run_id), "cancelled", timeout=60)
        await attempts_end(client.run(kept.run_id), "succeeded", timeout=60)
    assert [ctx.run_id for _, ctx in job.calls] == [kept.run_id]


@pytest.mark.parametrize("node", ["private"])
async def test_a_worker_that_lived_through_a_restart_still_learns_of_new_cancels(
    broker: TestBroker, private_broker: PrivateBroker, run_worker: Any
) -> None:
    """The worker reconnects after the restart; a run delayed and cancelled then is acked
    cancelled when due, not run: the worker follows the stream again."""
    settings = broker.settings()
    broker.plan_keys.update(step.key for step in settings.default_plan().suffixes())
    job = Recorder()
    worker = await run_worker(registry(job=job))
    await asyncio.to_thread(private_broker.sync_metadata)
    await asyncio.to_thread(private_broker.restart)
    async with Client(settings) as client:
        # Long enough for the cancel to be stored before the run is due on a loaded machine
        # (a cancel reads the run's history first): it took over 3 s there.
        due = time.monotonic() + DELAY_SECONDS  # at the latest
        handle = client.run(await client.enqueue("job", delay=DELAY_SECONDS))
        await handle.cancel("after the restart")
        assert time.monotonic() < due, "cancelled after the run was due: nothing was tested"
        await attempts_end(client.run(handle.run_id), "cancelled", timeout=60)
    assert worker.connected() and job.calls == []
