"""Waits bounded by progress: a count that keeps moving is waited for however long it takes,
one that stands still fails after its stall bound."""

from __future__ import annotations

import asyncio
import itertools

import aio_pika
import pytest

from tests.namespace import TestBroker
from warren_cron.faultkit.waits import NeverHappened, progressing


async def test_a_count_that_keeps_moving_is_waited_for_past_its_stall_bound() -> None:
    """40 steps of 25 ms (a second in all) against a 0.2 s stall bound: the wait succeeds."""
    steps = itertools.count()

    async def slow() -> int:
        await asyncio.sleep(0.025)
        return next(steps)

    assert await progressing(slow, lambda n: n >= 40, 0.2, interval=0) == 40


async def test_a_count_that_stands_still_fails_naming_what_and_where() -> None:
    """A count stuck at 3 fails after its stall bound, saying what was awaited and the value."""
    with pytest.raises(NeverHappened, match=r"5 things: stood still at 3 for 0.1 s"):
        await progressing(lambda: 3, lambda n: n >= 5, 0.1, what="5 things")


@pytest.mark.broker
async def test_a_queue_filling_slower_than_the_timeout_is_waited_for(broker: TestBroker) -> None:
    """A loaded machine: 30 messages arrive over about 1.5 s, the depth wait's bound is 0.5 s;
    the wait ends when all 30 are there, and a depth that stops short fails."""
    topology = await broker.declare()
    channel = await broker.channel()

    async def trickle(count: int) -> None:
        for number in range(count):
            message = aio_pika.Message(str(number).encode())
            await channel.default_exchange.publish(message, topology.main.name)
            await asyncio.sleep(0.05)

    filling = asyncio.create_task(trickle(30))
    await broker.wait_depth(topology.main.name, 30, timeout=0.5)
    await filling
    with pytest.raises(NeverHappened, match="stood still at 30"):
        await broker.wait_depth(topology.main.name, 31, timeout=0.3)
    await channel.close()
