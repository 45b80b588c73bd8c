"""The client when its broker dies under a call: ``BrokerUnavailable`` (never the client
library's own errors), and a bulk create cut short says which schedules were stored."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.namespace import TestBroker
from warren_cron.client import BrokerUnavailable, Client, CreatesCut, StoredSchedule, Unconfirmed
from warren_cron.faultkit.private_broker import PrivateBroker
from warren_cron.faultkit.waits import eventually

pytestmark = pytest.mark.faults


def spec(name: str) -> dict[str, Any]:
    """A runtime schedule running ``noop`` hourly."""
    return {"name": name, "every": "1h", "task": "noop"}


#: What a call says with the node down: failed under it, or refused before it began (a
#: client whose channel went with the node opens a new one first).
DOWN = "the broker failed under the call|the broker connection is down"


async def test_calls_while_the_broker_is_down_raise_broker_unavailable(
    broker: TestBroker, private_broker: PrivateBroker
) -> None:
    """With the node killed under a connected client, an enqueue, a schedule write and a
    run's status raise BrokerUnavailable saying so; once it is back the same client works."""
    async with Client(broker.settings()) as client:
        done = await client.enqueue("noop")
        await client.create_schedule(spec("before"))
        await asyncio.to_thread(private_broker.kill)
        calls = [
            client.enqueue("noop"),
            client.create_schedule(spec("during")),
            client.run(done).status(),
        ]
        for call in calls:
            with pytest.raises(BrokerUnavailable, match=DOWN):
                await asyncio.wait_for(call, 60)
        await asyncio.to_thread(private_broker.start)
        again = await eventually(lambda: _enqueued(client), 60, what="an enqueue after")
        assert again.created


async def _enqueued(client: Client) -> Any:
    try:
        return await client.enqueue("noop")
    except BrokerUnavailable:
        return None


async def test_a_bulk_create_cut_by_a_broker_kill_says_which_were_stored(
    broker: TestBroker, private_broker: PrivateBroker
) -> None:
    """2,000 creates, the node killed once some were stored: CreatesCut with one result per
    spec in order; every one it reports created is in the store after the restart, and
    each Unconfirmed one names its schedule."""
    names = [f"bulk-{n:04d}" for n in range(2000)]
    async with Client(broker.settings()) as client:
        creating = asyncio.create_task(client.create_schedules([spec(n) for n in names]))
        admin = await client._schedules()
        await eventually(lambda: len(admin.book.state.entries) >= 50, 60, what="50 stored")
        await asyncio.to_thread(private_broker.kill)
        with pytest.raises(CreatesCut) as cut:
            await asyncio.wait_for(creating, 120)
    results = cut.value.results
    assert len(results) == len(names)
    stored = [r.name for r in results if isinstance(r, StoredSchedule)]
    unsure = [r.name for r in results if isinstance(r, Unconfirmed)]
    assert stored and unsure and len(stored) + len(unsure) == len(names)
    assert [getattr(result, "name", None) for result in results] == names  # in order
    await asyncio.to_thread(private_broker.start)
    async with Client(broker.settings()) as client:
        kept = {s.name for s in await client.list_schedules()}
    assert set(stored) <= kept
