"""An overlap lock's holder whose node stops answering while its connection stays open (a
frozen node, or one cut off from its cluster) stops its attempt within its lease
(``CRON_LOCK_LEASE_SECONDS``), not once its heartbeat gives up: in a cluster the other nodes
free the lock after their net tick time, and the next run must not start beside it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from structlog.testing import capture_logs

from tests.conftest import plan
from tests.helpers import envelope, publish
from tests.namespace import TestBroker
from warren_cron.faultkit.private_broker import CONSUMER_TIMEOUT_MS, PrivateBroker
from warren_cron.faultkit.waits import eventually
from warren_cron.worker.context import TaskContext
from warren_cron.worker.registry import Registry

pytestmark = pytest.mark.faults


class Holder:
    """A handler that runs a minute unless cancelled, and says which."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self, payload: Any, ctx: TaskContext) -> None:
        """Hold the lock a minute; note a cancel."""
        self.started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


async def test_a_holder_whose_node_freezes_stops_its_attempt_within_its_lease(
    broker: TestBroker, private_broker: PrivateBroker, run_worker: Any
) -> None:
    """A 1 s lease and a 30 s heartbeat (about 90 s before aiormq gives up): with the node
    frozen mid-attempt, the attempt is cancelled within seconds and retried as ``lock-lost``."""
    private_broker.set_consumer_timeout(300_000)  # the attempt outlives the tests' 4 s
    try:
        holder = Holder()
        registry = Registry()
        registry.register("hold", holder)
        await run_worker(registry, lock_lease_seconds=1, heartbeat_seconds=30)
        fire = envelope("hold", {}, schedule="report", concurrency="Forbid", timeout_seconds=90)
        with capture_logs() as logs:
            await publish(broker, fire, plan(60_000))
            await holder.started.wait()
            private_broker.freeze()
            try:
                await asyncio.wait_for(holder.cancelled.wait(), 20)
            finally:
                private_broker.thaw()
            await eventually(lambda: any(e["event"] == "attempt" for e in logs), 60)
        [attempt] = [e for e in logs if e["event"] == "attempt"]
        assert (attempt["outcome"], attempt["reason"]) == ("retrying", "lock-lost")
        assert "did not answer for 1 s" in attempt["error"]
    finally:
        private_broker.set_consumer_timeout(CONSUMER_TIMEOUT_MS)
