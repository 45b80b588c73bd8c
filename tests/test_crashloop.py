"""Crash-loop detection against the shared broker, with worker deaths staged by hand.

The fault tests (tests/faults/) kill real worker processes; these check the same rules
quickly: what a redelivered attempt finds in its marker queue decides whether it runs.
"""

from __future__ import annotations

from typing import Any

import aio_pika
import pytest

from tests.conftest import plan
from tests.helpers import Recorder, envelope, publish
from tests.namespace import TestBroker
from warren_cron import codec
from warren_cron.envelope import Envelope
from warren_cron.faultkit.waits import eventually
from warren_cron.worker.crashloop import marker_key
from warren_cron.worker.registry import Registry

pytestmark = pytest.mark.broker


async def redeliver(broker: TestBroker) -> None:
    """Take the task and drop the connection without an ack: the broker redelivers it."""
    connection = await aio_pika.connect(broker.url)
    channel = await connection.channel()
    main = await channel.declare_queue(broker.names.main_queue, passive=True)
    assert await main.get(timeout=5) is not None
    await connection.close()


async def stage_deaths(broker: TestBroker, env: Envelope, deaths: int) -> str:
    """Leave the markers that ``deaths`` dead workers would have left; return the queue."""
    name = broker.names.crash_queue(marker_key(env.run_id, codec.encode(env), 1))
    channel = await broker.channel()
    queue = await channel.declare_queue(
        name, durable=True, arguments={"x-queue-type": "classic", "x-expires": 86_400_000}
    )
    for _ in range(deaths):
        await channel.default_exchange.publish(aio_pika.Message(b""), queue.name)
    await channel.close()
    return name


async def queue_exists(broker: TestBroker, name: str) -> bool:
    """True while the queue ``name`` exists."""
    channel = await broker.channel()
    try:
        await channel.declare_queue(name, passive=True)
    except aio_pika.exceptions.ChannelClosed:
        return False
    await channel.close()
    return True


async def marker_gone(broker: TestBroker, name: str) -> None:
    """Wait (5 s at most) until the worker has deleted the crash marker queue ``name``."""

    async def gone() -> bool:
        return not await queue_exists(broker, name)

    await eventually(gone, 5, what=f"{name} deleted")


def registry(handler: Any) -> Registry:
    """A registry holding ``handler`` as ``job``."""
    reg = Registry()
    reg.register("job", handler)
    return reg


async def test_a_redelivered_task_whose_worker_died_limit_times_is_failed_unrun(
    broker: TestBroker, run_worker: Any
) -> None:
    """Three deaths on record: the fourth redelivery is not run, its record says crash-loop."""
    env = envelope("job")
    await publish(broker, env, plan(1000))
    await redeliver(broker)
    marker = await stage_deaths(broker, env, 3)
    recorder = Recorder()
    await run_worker(registry(recorder), crash_loop_limit=3)
    await broker.wait_depth(broker.names.failed_queue, 1)
    [record] = await broker.get_all(broker.names.failed_queue)
    assert recorder.calls == []
    assert record.headers["cron-reason"] == "crash-loop"
    assert "died 3 times" in record.headers["cron-error"]
    assert "CRON_CRASH_LOOP_LIMIT" in record.headers["cron-error"]
    await marker_gone(broker, marker)


async def test_a_redelivered_task_below_the_limit_runs_and_leaves_no_marker(
    broker: TestBroker, run_worker: Any
) -> None:
    """Two deaths on record with a limit of three: it runs, succeeds, and its markers go."""
    env = envelope("job")
    await publish(broker, env, plan(1000))
    await redeliver(broker)
    marker = await stage_deaths(broker, env, 2)
    recorder = Recorder()
    await run_worker(registry(recorder), crash_loop_limit=3)
    await recorder.wait_calls(1)
    ctx = recorder.calls[0][1]
    assert (ctx.redelivered, ctx.attempt) == (True, 1)
    await marker_gone(broker, marker)
    assert await broker.depth(broker.names.failed_queue) == 0


async def test_a_first_delivery_costs_no_marker_queue(broker: TestBroker, run_worker: Any) -> None:
    """A task delivered for the first time runs without any marker queue being declared."""
    env = envelope("job")
    recorder = Recorder()
    await run_worker(registry(recorder))
    await publish(broker, env, plan(1000))
    await recorder.wait_calls(1)
    name = broker.names.crash_queue(marker_key(env.run_id, codec.encode(env), 1))
    assert not await queue_exists(broker, name)
