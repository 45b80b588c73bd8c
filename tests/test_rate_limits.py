"""Rate limits by task across workers: starts paced to the limit by a bucket the broker keeps,
waiting tasks spend no attempt."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiormq.exceptions import ChannelLockedResource, ChannelNotFoundEntity

from tests.conftest import plan
from tests.helpers import envelope, publish
from tests.namespace import TestBroker
from tests.test_concurrency_limits import Ledger, limited_workers
from warren_cron.errors import SettingsError
from warren_cron.testing.waits import eventually
from warren_cron.worker.rates import Rate, bucket_queue, parse_rates
from warren_cron.worker.registry import Registry


def test_rates_read_limit_period_and_burst() -> None:
    """``report=10/1s`` has a burst of 10; ``sync=100/5m:5`` a burst of 5 over 300 s."""
    assert parse_rates(["report=10/1s", "sync=100/5m:5", "x=2/h"]) == {
        "report": Rate("report", 10, 1, 10),
        "sync": Rate("sync", 100, 300, 5),
        "x": Rate("x", 2, 3600, 2),
    }


@pytest.mark.parametrize("entry", ["report=10", "report=0/1s", "report=1/1d", "r=1/s:0", "=1/s"])
def test_a_malformed_rate_is_refused_naming_the_entry_and_the_form(entry: str) -> None:
    """Bad input says what is wrong and what it should look like."""
    with pytest.raises(SettingsError, match=r"CRON_RATE_LIMITS entry .* task=N/PERIOD"):
        parse_rates([entry])


@pytest.fixture
async def bucket(broker: TestBroker) -> AsyncIterator[None]:
    """Delete the ``busy`` task's bucket and refill lock after the test."""
    yield
    channel = await broker.channel()
    await channel.queue_delete(bucket_queue(broker.names.namespace, "busy"))


@pytest.mark.broker
@pytest.mark.usefixtures("bucket")
async def test_two_workers_start_tasks_at_the_limit_and_spend_no_attempt(
    broker: TestBroker, run_worker: Any
) -> None:
    """40 tasks at 5 a second: over four seconds in the middle of the run, 20 start (within
    10 %), and every task runs as its attempt 1."""
    ledger = await limited_workers(run_worker, 2, None, rate_limits="busy=5/1s")
    for _ in range(40):
        await publish(broker, envelope("busy", {"seconds": 0}), plan(60_000))
    await eventually(lambda: len(ledger.spans) == 40, timeout=40)
    starts = sorted(span[0] for span in ledger.spans)
    middle = [s for s in starts if starts[0] + 1 <= s < starts[0] + 5]
    assert 18 <= len(middle) <= 22
    assert set(ledger.attempts) == {1}


@pytest.mark.broker
@pytest.mark.usefixtures("bucket")
async def test_when_the_refilling_worker_is_gone_another_refills_the_bucket(
    broker: TestBroker, run_worker: Any
) -> None:
    """The first worker holds the refill lock; once it stops, its connection (and the lock)
    goes, the other worker takes the lock within a second, and limited tasks still run."""
    first_ledger, second_ledger = Ledger(), Ledger()
    workers = []
    for ledger in (first_ledger, second_ledger):
        registry = Registry()
        registry.register("busy", ledger.busy)
        workers.append(await run_worker(registry, rate_limits="busy=5/1s"))
        # The first worker, alone at first, is the one that takes the lock.
        await eventually(lambda: refill_lock_held(broker), timeout=10)
    workers[0].stop()
    await workers[0].stopped.wait()
    for _ in range(10):
        await publish(broker, envelope("busy", {"seconds": 0}), plan(60_000))
    await eventually(lambda: len(second_ledger.spans) == 10, timeout=20)
    assert first_ledger.spans == []


async def refill_lock_held(broker: TestBroker) -> bool:
    """True while a worker's connection holds the ``busy`` task's refill lock."""
    channel = await broker.channel()
    try:
        await channel.declare_queue(f"{broker.names.namespace}_rate-refill.busy", passive=True)
    except ChannelLockedResource:
        return True
    except ChannelNotFoundEntity:
        return False
    return True
