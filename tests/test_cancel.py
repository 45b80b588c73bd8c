"""Cancelling runs on a real broker: delayed, pending, running on another worker process,
known to a worker started after the cancel, and racing cancels."""

from __future__ import annotations

import asyncio
from typing import Any

import aio_pika
import pytest

from tests.conftest import plan
from tests.helpers import Recorder, registry
from tests.namespace import TestBroker
from tests.scheduling import Spawner, env_for
from warren_cron.client import CancelError, Client, SyncClient
from warren_cron.client.runs import RunHandle
from warren_cron.faultkit.waits import eventually
from warren_cron.history.lifecycle import RunStatus
from warren_cron.names import DELAY_LEVELS

pytestmark = pytest.mark.broker
#: How long a failed attempt's retry waits in the retry-queue test.
RETRY_WAIT_MS = 8000


async def attempts_end(handle: RunHandle, outcome: str, timeout: float = 20) -> RunStatus:
    """Wait until an attempt of the run ended with ``outcome`` (the worker's own word)."""

    async def seen() -> RunStatus | None:
        status = await handle.status()
        return status if any(a.outcome == outcome for a in status.attempts) else None

    found: RunStatus | None = await eventually(seen, timeout, what=f"an attempt {outcome}")
    assert found is not None
    return found


async def bring_due(broker: TestBroker) -> int:
    """Hand every message waiting in the delay levels on as its due time would: republished
    with its own routing key to the exchange due tasks leave the levels by. Returns how many."""
    channel = await broker.channel()
    moved = 0
    deliver = await channel.get_exchange(broker.names.delay_deliver_exchange)
    for level in range(DELAY_LEVELS):
        try:
            queue = await channel.get_queue(broker.names.delay_level(level), ensure=False)
            while (message := await queue.get(fail=False)) is not None:
                again = aio_pika.Message(
                    message.body, headers=message.headers, message_id=message.message_id
                )
                await deliver.publish(again, message.routing_key or "")
                await message.ack()
                moved += 1
        except aio_pika.exceptions.ChannelClosed:
            channel = await broker.channel()
            deliver = await channel.get_exchange(broker.names.delay_deliver_exchange)
    await channel.close()
    return moved


async def test_a_delayed_run_cancelled_an_hour_ahead_never_runs_and_ends_cancelled(
    broker: TestBroker, client: Client, run_worker: Any
) -> None:
    """Cancelled an hour before it is due: cancelled at once; at its due time the worker acks
    it unrun, with an attempt event saying who cancelled it and why."""
    job = Recorder()
    await run_worker(registry(job=job))
    handle = client.run(await client.enqueue("job", delay=3600))
    answer = await handle.cancel("customer left")
    assert answer.cancelled and answer.state == "delayed"
    assert (await handle.status()).state == "cancelled"
    assert await bring_due(broker) == 1
    status = await attempts_end(handle, "cancelled")
    assert status.state == "cancelled" and job.calls == []
    [attempt] = status.attempts
    assert "customer left" in (attempt.error or "") and attempt.started_at is None
    assert await broker.depth(broker.names.main_queue) == 0


async def test_a_run_waiting_in_a_retry_queue_is_not_retried(
    client: Client, run_worker: Any
) -> None:
    """A run whose first attempt failed and waits 8 s in its retry queue: cancelled, its
    retry never runs."""
    job = Recorder(failures=5)
    await run_worker(registry(job=job))
    # 8 s, not 2: the cancel must be stored and read while the retry waits, and on a loaded
    # machine seeing the first attempt's end in history can alone take seconds.
    handle = client.run(await client.enqueue("job", plan=plan(RETRY_WAIT_MS)))
    await attempts_end(handle, "retrying")
    answer = await handle.cancel("stop retrying")
    assert answer.cancelled and answer.state == "retrying"
    status = await attempts_end(handle, "cancelled", timeout=RETRY_WAIT_MS / 1000 + 20)
    assert len(job.calls) == 1 and status.state == "cancelled"


async def test_a_cancel_stored_before_the_worker_starts_is_known_to_it(
    client: Client, run_worker: Any
) -> None:
    """Cancel, then start a worker (a restart): it reads the tombstone before its first task."""
    first = client.run(await client.enqueue("job"))
    kept = client.run(await client.enqueue("job"))
    await first.cancel()
    job = Recorder()
    await run_worker(registry(job=job))
    await attempts_end(first, "cancelled")
    await attempts_end(kept, "succeeded")
    assert [ctx.run_id for _, ctx in job.calls] == [kept.run_id]


async def test_a_running_attempt_is_cancelled_on_another_worker_process(
    broker: TestBroker, client: Client, spawn: Spawner
) -> None:
    """A 60 s attempt in a worker process is stopped within seconds of the cancel, acked
    cancelled (not retried, not failed), and that worker goes on taking tasks."""
    await broker.declare()
    env = env_for(broker, CRON_HANDLER_MODULES="tests.overlap_handlers", CRON_PREFETCH="1")
    worker = await spawn(["-m", "warren_cron.worker"], env)
    await worker.wait_event("worker started")
    handle = client.run(await client.enqueue("hold", {"seconds": 60}, plan=plan(1000)))
    await worker.wait_event("hold started")
    answer = await handle.cancel("wrong input")
    assert answer.cancelled and answer.state == "running"
    status = await attempts_end(handle, "cancelled", timeout=15)
    assert status.state == "cancelled" and len(status.attempts) == 1
    after = client.run(await client.enqueue("hold", {"seconds": 0}))
    await attempts_end(after, "succeeded")


async def test_a_worker_killed_mid_cancel_does_not_run_the_task_again(
    broker: TestBroker, client: Client, spawn: Spawner, run_worker: Any
) -> None:
    """The worker running the attempt is killed as the cancel is stored: the broker hands the
    task to another worker, which acks it cancelled without running it."""
    await broker.declare()
    env = env_for(broker, CRON_HANDLER_MODULES="tests.overlap_handlers", CRON_PREFETCH="1")
    worker = await spawn(["-m", "warren_cron.worker"], env)
    await worker.wait_event("worker started")
    handle = client.run(await client.enqueue("hold", {"seconds": 60}))
    await worker.wait_event("hold started")
    await asyncio.gather(handle.cancel("killed midway"), worker.kill())
    hold = Recorder()
    await run_worker(registry(hold=hold))
    await attempts_end(handle, "cancelled")
    assert hold.calls == [] and (await handle.status()).state == "cancelled"


async def test_two_racing_cancels_both_hold_and_the_run_never_starts(
    client: Client, run_worker: Any
) -> None:
    """Two clients cancel one run at once: both stored, the run ends cancelled once."""
    handle = client.run(await client.enqueue("job"))
    async with Client(client.settings) as other:
        answers = await asyncio.gather(
            handle.cancel("first"), other.run(handle.run_id).cancel("second")
        )
    assert all(answer.cancelled for answer in answers)
    job = Recorder()
    await run_worker(registry(job=job))
    status = await attempts_end(handle, "cancelled")
    assert job.calls == [] and status.state == "cancelled"


async def test_cancel_of_an_ended_run_says_so_and_changes_nothing(
    client: Client, run_worker: Any
) -> None:
    """A run that succeeded: the answer says it ended, and its state stays succeeded."""
    await run_worker(registry(job=Recorder()))
    handle = client.run(await client.enqueue("job"))
    await attempts_end(handle, "succeeded")
    answer = await handle.cancel("too late")
    assert not answer.cancelled and "already ended (succeeded)" in answer.message
    assert (await handle.status()).state == "succeeded"


async def test_garbage_run_ids_and_huge_reasons_are_refused_before_anything_is_stored(
    broker: TestBroker, client: Client
) -> None:
    """An unprintable or 10 kB run id and a 100 kB reason raise CancelError naming the field."""
    for bad in ("a\x00b", "x" * 10_000):
        with pytest.raises(CancelError, match="run id"):
            await client.run(bad).cancel()
    with pytest.raises(CancelError, match="reason"):
        await client.run("job@2026-01-01T00:00:00Z").cancel("x" * 100_000)


async def test_an_unknown_run_id_is_cancelled_ahead_and_the_sync_client_cancels_too(
    broker: TestBroker, run_worker: Any
) -> None:
    """A run with no event yet (as an application's enqueue): cancelled, told so; with
    SyncClient the same."""
    with SyncClient(broker.settings()) as sync:
        done = sync.enqueue("job")
        answer = await asyncio.to_thread(sync.run(done).cancel, "not wanted")
        assert answer.cancelled and "no event of it yet" in answer.message
    job = Recorder()
    await run_worker(registry(job=job))
    async with Client(broker.settings()) as client:
        await attempts_end(client.run(done.run_id), "cancelled")
    assert job.calls == []


async def test_a_cancel_asked_again_after_the_first_landed_also_holds(client: Client) -> None:
    """A second cancel of a cancelled run answers cancelled, as the first did: asking twice
    is no error (an application retrying its cancel, two clients a moment apart)."""
    handle = client.run(await client.enqueue("job"))
    assert (await handle.cancel("first")).cancelled

    async def cancelled() -> bool:
        return (await handle.status()).state == "cancelled"

    await eventually(cancelled, 10, what="the first cancel in the history")
    again = await handle.cancel("second")
    assert (again.cancelled, again.state) == (True, "cancelled")
    assert "cancelled already" in again.message
