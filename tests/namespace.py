"""A test's namespace on the real broker: its name, its queues looked into, and its clean-up."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from tests.broker import delete_all, exchange_exists
from warren_cron.declare import Topology, declare_topology
from warren_cron.delay import delay_objects
from warren_cron.faultkit.namespace import BrokerNamespace
from warren_cron.faultkit.waits import progressing
from warren_cron.names import FINAL_KEY
from warren_cron.worker.settings import WorkerSettings

#: Every namespace of this run starts with this, so one sweep at the end finds leftovers.
SESSION_PREFIX = f"t{uuid.uuid4().hex[:6]}_"


def namespace_for(node: pytest.Item) -> str:
    """A namespace of its own for the test ``node``, named after it."""
    slug = re.sub(r"[^a-z0-9]+", "_", node.name.lower())[:40]
    return f"{SESSION_PREFIX}{slug}_{uuid.uuid4().hex[:4]}"


class TestBroker(BrokerNamespace):
    """A test's namespace on the real broker, and helpers to look inside it."""

    __test__ = False
    #: The scheduler partitions a test set (CRON_SCHEDULER_PARTITIONS): their queues go too.
    partitions = 1

    def settings(self, **overrides: Any) -> WorkerSettings:
        """Worker settings for this namespace, with small timeouts for tests."""
        values: dict[str, Any] = {
            "namespace": self.names.namespace,
            "amqp_url": self.url,
            "queue_type": self.queue_type,
            "shutdown_grace_seconds": 5,
            "log_format": "console",
        }
        values.update(overrides)
        return WorkerSettings(**values)

    async def declare(self) -> Topology:
        """Declare the namespace's topology."""
        return await declare_topology(await self.channel(), self.names, self.settings())

    async def depth(self, queue: str) -> int:
        """Number of ready messages in ``queue``."""
        channel = await self.channel()
        declared = await channel.declare_queue(queue, passive=True)
        await channel.close()
        return declared.declaration_result.message_count or 0

    async def get_all(self, queue: str, *, ack: bool = False) -> list[Any]:
        """Every message now in ``queue``, requeued afterwards unless ``ack``."""
        channel = await self.channel()
        declared = await channel.declare_queue(queue, passive=True)
        messages = []
        while (message := await declared.get(fail=False, no_ack=ack)) is not None:
            messages.append(message)
        await channel.close()
        return messages

    async def reject_head(self, count: int = 1) -> None:
        """Take ``count`` messages from the main queue's head and reject them, as a failed
        attempt does: each moves on to the retry queue its routing key names."""
        channel = await self.channel()
        main = await channel.declare_queue(self.names.main_queue, passive=True)
        for _ in range(count):
            message = await main.get(timeout=5)
            assert message is not None, "the main queue is empty"
            await message.reject(requeue=False)
        await channel.close()

    async def wait_depth(self, queue: str, count: int, timeout: float = 10) -> None:
        """Wait until ``queue`` holds at least ``count`` ready messages; fail once its depth
        stood still for ``timeout`` seconds (a loaded machine fills it slower, not never)."""
        what = f"{count} message(s) in {queue}"
        await progressing(lambda: self.depth(queue), lambda held: held >= count, timeout, what=what)

    async def cleanup(self) -> None:
        """Delete the namespace's queues and exchanges (the session sweep finds any other)."""
        names = self.names
        queues, exchanges = names.queues(self.plan_keys), names.exchanges
        queues += names.partition_queues(self.partitions)
        if await exchange_exists(self.url, names.delay_deliver_exchange):
            delay_queues, delay_exchanges = delay_objects(names, {*self.plan_keys, FINAL_KEY})
            queues += delay_queues
            exchanges += delay_exchanges
        await delete_all(self.url, queues, exchanges)
