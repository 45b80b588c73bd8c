"""The history publisher's channel: a write the broker fails by closing its channel leaves no
channel behind (a robust channel reopened itself beside the publisher's new one)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.faults.harness import FaultScenario
from tests.faults.test_soak import level_again, published_again, publishing_history
from warren_cron.broker.batch import publish_batch as real_publish_batch
from warren_cron.faultkit.waits import eventually
from warren_cron.history import publisher as publisher_module
from warren_cron.history.events import event

pytestmark = pytest.mark.faults


def failing_once(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make the publisher's next write fail as the broker fails one: it closes the channel
    with a channel error under the write. Returns a list that gets an item once it did."""
    failed: list[int] = []

    async def publish_batch(channel: Any, messages: Any) -> Any:
        if not failed:
            failed.append(1)
            # A passive declare of a queue that is not there: the broker closes the channel.
            await channel.declare_queue("warren-test-no-such-queue", passive=True)
        return await real_publish_batch(channel, messages)

    monkeypatch.setattr(publisher_module, "publish_batch", publish_batch)
    return failed


async def test_a_history_write_failed_by_a_channel_error_leaves_no_channel_behind(
    scenario: FaultScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker closes the publisher's channel under a write: that batch is dropped, the
    next goes out on a new channel, and the connection holds one channel, not two."""
    async with publishing_history(scenario) as (publisher, held):
        failed = failing_once(monkeypatch)
        publisher.emit(event("fired", schedule="refused"))
        await eventually(lambda: failed and publisher.dropped == 1, 30, what="a write failed")
        await published_again(publisher)
        await level_again(scenario, held)
