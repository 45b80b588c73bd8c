"""The worker against a real broker: every outcome, the retry timing, and safe shutdown."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from tests.conftest import plan
from tests.helpers import Recorder, envelope, publish, publish_raw, registry
from tests.namespace import TestBroker
from warren_cron import codec
from warren_cron.errors import PermanentError
from warren_cron.faultkit.waits import eventually
from warren_cron.headers import rejections
from warren_cron.worker import subscription
from warren_cron.worker.context import TaskContext

pytestmark = pytest.mark.broker


async def failed_records(broker: TestBroker, count: int, timeout: float = 10) -> list[Any]:
    """Wait for ``count`` records in the failed queue and return them (left in place)."""
    await broker.wait_depth(broker.names.failed_queue, count, timeout)
    return await broker.get_all(broker.names.failed_queue)


async def test_a_successful_task_is_acked_once(broker: TestBroker, run_worker: Any) -> None:
    """A handler that returns acks the message: it runs once and nothing is left."""
    recorder = Recorder()
    worker = await run_worker(registry(job=recorder))
    env = envelope("job", {"n": 1}, schedule="every-minute")
    await publish(broker, env, plan(200))
    await recorder.wait_calls(1)
    await worker.join()
    ctx = recorder.calls[0][1]
    assert (len(recorder.calls), ctx.run_id, ctx.attempt, ctx.schedule) == (
        1,
        env.run_id,
        1,
        "every-minute",
    )
    assert await broker.depth(broker.names.main_queue) == 0
    assert await broker.depth(broker.names.failed_queue) == 0


# Also on the fault tests' private node: what they prove holds only if it retries alike.
@pytest.mark.parametrize("node", ["shared", pytest.param("private", marks=pytest.mark.faults)])
async def test_always_failing_task_runs_retries_plus_one_with_exponential_spacing(
    broker: TestBroker, run_worker: Any
) -> None:
    """200 ms doubling, three retries: attempts near 0, 0.2, 0.6, 1.4 s, then the failed queue."""
    recorder = Recorder(failures=100)
    await run_worker(registry(job=recorder))
    await publish(broker, envelope("job"), plan(200, 400, 800))
    [record] = await failed_records(broker, 1)
    assert [ctx.attempt for _, ctx in recorder.calls] == [1, 2, 3, 4]
    for gap, delay in zip(recorder.gaps(), (0.2, 0.4, 0.8), strict=True):
        # Never early; late by at most half the delay and a loaded machine's half second.
        assert delay - 0.02 <= gap <= delay * 1.5 + 0.5, recorder.gaps()
    assert record.headers["cron-attempts"] == 4
    assert record.headers["cron-reason"] == "retries-exhausted"
    assert record.headers["cron-error"] == "RuntimeError: failure 4"
    assert record.routing_key == "failed" and record.headers["cron-routing-key"] == "final"


async def test_failed_record_keeps_the_whole_broker_history(
    broker: TestBroker, run_worker: Any
) -> None:
    """cron-x-death holds three rejections from the main queue and one expiry per retry queue."""
    await run_worker(registry(job=Recorder(failures=100)))
    await publish(broker, envelope("job"), plan(50, 100, 150))
    [record] = await failed_records(broker, 1)
    history = {(d["queue"], d["reason"]): d["count"] for d in record.headers["cron-x-death"]}
    names = broker.names
    assert history == {
        (names.main_queue, "rejected"): 3,
        (names.retry_queue("50ms-100ms-150ms"), "expired"): 1,
        (names.retry_queue("100ms-150ms"), "expired"): 1,
        (names.retry_queue("150ms"), "expired"): 1,
    }
    assert rejections({"x-death": record.headers["cron-x-death"]}, names.main_queue) == 3


async def test_join_returns_once_every_task_of_the_main_queue_has_run_and_been_acked(
    broker: TestBroker, run_worker: Any
) -> None:
    """``Worker.join`` waits out the queue, one slow task at a time, then its acks."""
    recorder = Recorder(sleep=0.02)
    for _ in range(20):
        await publish(broker, envelope("job"), plan(200))
    worker = await run_worker(registry(job=recorder), prefetch=1)
    await worker.join()
    assert recorder.finished == 20
    worker.stop()
    await asyncio.wait_for(worker.stopped.wait(), 10)
    assert await broker.depth(broker.names.main_queue) == 0


async def test_a_task_that_recovers_stops_retrying(broker: TestBroker, run_worker: Any) -> None:
    """Two failures then success: three attempts, nothing in the failed queue."""
    recorder = Recorder(failures=2)
    worker = await run_worker(registry(job=recorder))
    await publish(broker, envelope("job"), plan(50, 50, 50))
    await recorder.wait_calls(3)
    await worker.join()
    assert len(recorder.calls) == 3
    assert await broker.depth(broker.names.failed_queue) == 0


async def test_permanent_error_fails_after_one_attempt(broker: TestBroker, run_worker: Any) -> None:
    """PermanentError skips the remaining retries and records why."""
    recorder = Recorder(failures=1, error=PermanentError)
    await run_worker(registry(job=recorder))
    env = envelope("job", {"id": 7})
    await publish(broker, env, plan(50, 50))
    [record] = await failed_records(broker, 1)
    assert len(recorder.calls) == 1
    assert record.headers["cron-reason"] == "permanent-error"
    assert record.headers["cron-attempts"] == 1
    assert record.message_id == env.run_id and record.body == codec.encode(env)


async def test_unknown_task_fails_at_once_naming_the_fix(
    broker: TestBroker, run_worker: Any
) -> None:
    """A task name with no handler is terminal; the error says how to register it."""
    await run_worker(registry())
    await publish(broker, envelope("nobody"), plan(50))
    [record] = await failed_records(broker, 1)
    assert record.headers["cron-reason"] == "unknown-task"
    assert "CRON_HANDLER_MODULES" in record.headers["cron-error"]


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"{oops", "not valid UTF-8 JSON"),
        (b"\xc3\x28 latin", "not valid UTF-8 JSON"),
        (b'{"task": "noop"}', "run_id: Field required"),
        (b'"just a string"', "JSON object"),
        (b'{"task": ["noop"], "run_id": "r", "scheduled_for": "2026-01-01T00:00:00Z"}', "task"),
    ],
)
async def test_invalid_bodies_fail_once_with_a_clear_reason(
    broker: TestBroker, run_worker: Any, body: bytes, error: str
) -> None:
    """Undecodable or invalid envelopes go to the failed queue, body intact, no retry, no crash."""
    await run_worker(registry())
    broker.plan_keys.add("1s")
    await publish(broker, envelope("noop"), plan(1000))  # declares topology and plan
    await publish_raw(broker, body, "1s", message_id="bad-1")
    [record] = await failed_records(broker, 1)
    assert record.headers["cron-reason"] == "decode-error"
    assert error in record.headers["cron-error"]
    assert record.body == body and record.message_id == "bad-1"


async def test_expired_deadline_is_terminal(broker: TestBroker, run_worker: Any) -> None:
    """A task whose deadline passed before it ran is not run and not retried."""
    recorder = Recorder()
    await run_worker(registry(job=recorder))
    past = envelope("job").scheduled_for.replace(year=2020)
    await publish(broker, envelope("job", deadline=past), plan(50))
    [record] = await failed_records(broker, 1)
    assert record.headers["cron-reason"] == "expired" and recorder.calls == []


async def test_async_and_sync_handlers_are_stopped_by_the_timeout(
    broker: TestBroker, run_worker: Any
) -> None:
    """A handler past its timeout counts as a retryable failure, for sync and async alike."""
    release = threading.Event()

    async def slow_async(payload: Any, ctx: TaskContext) -> None:
        await asyncio.sleep(30)

    def slow_sync(payload: Any, ctx: TaskContext) -> None:
        release.wait(30)

    await run_worker(registry(slow_async=slow_async, slow_sync=slow_sync))
    for task in ("slow_async", "slow_sync"):
        await publish(broker, envelope(task, timeout_seconds=0.3), plan())
    records = await failed_records(broker, 2, timeout=10)
    release.set()
    assert {r.headers["cron-reason"] for r in records} == {"retries-exhausted"}
    assert all("0.3s" in r.headers["cron-error"] for r in records)


async def test_sync_handlers_run_in_a_thread(broker: TestBroker, run_worker: Any) -> None:
    """A blocking handler does not block the event loop: two run at the same time."""
    both_running = threading.Barrier(2, timeout=3)
    passed: list[str] = []

    def blocking(payload: Any, ctx: TaskContext) -> None:
        both_running.wait()  # raises BrokenBarrierError unless both calls run at once
        passed.append(ctx.run_id)

    await run_worker(registry(blocking=blocking))
    await publish(broker, envelope("blocking"), plan())
    await publish(broker, envelope("blocking"), plan())
    await eventually(lambda: len(passed) >= 2, 5)
    assert await broker.depth(broker.names.failed_queue) == 0


async def test_shutdown_mid_task_spends_no_retry(broker: TestBroker, run_worker: Any) -> None:
    """A task cut off by shutdown is redelivered to the next worker as the same attempt."""
    first = Recorder(sleep=30)
    worker = await run_worker(registry(job=first), shutdown_grace_seconds=0.2)
    await publish(broker, envelope("job"), plan(5000))
    await first.wait_calls(1)
    worker.stop()
    await asyncio.wait_for(worker.stopped.wait(), 10)
    assert await broker.depth(broker.names.main_queue) == 1
    second = Recorder()
    await run_worker(registry(job=second))
    await second.wait_calls(1)
    ctx = second.calls[0][1]
    assert (ctx.attempt, ctx.redelivered) == (1, True)
    assert await broker.depth(broker.names.retry_queue("5s")) == 0


async def test_shutdown_lets_running_attempts_finish_within_the_grace(
    broker: TestBroker, run_worker: Any
) -> None:
    """Attempts that end within the grace period are acked before the worker exits."""
    recorder = Recorder(sleep=0.5)
    worker = await run_worker(registry(job=recorder), shutdown_grace_seconds=5)
    await publish(broker, envelope("job"), plan(5000))
    await recorder.wait_calls(1)
    worker.stop()
    await asyncio.wait_for(worker.stopped.wait(), 10)
    assert recorder.finished == 1
    assert await broker.depth(broker.names.main_queue) == 0
    assert await broker.depth(broker.names.failed_queue) == 0


async def test_messages_in_retry_queues_survive_a_plan_change(
    broker: TestBroker, run_worker: Any
) -> None:
    """Tasks waiting on the old plan still come back once each after the plan changed."""
    old = [envelope("job") for _ in range(5)]
    for env in old:
        await publish(broker, env, plan(1500, 1500))
    await broker.reject_head(len(old))  # now waiting in the 1500 ms retry queue
    recorder = Recorder()
    worker = await run_worker(registry(job=recorder), retry_delay_ms=100, max_retries=1)
    new = envelope("job")
    await publish(broker, new, plan(100))
    await recorder.wait_calls(6, timeout=10)
    await worker.join()
    seen = sorted(ctx.run_id for _, ctx in recorder.calls)
    assert seen == sorted([e.run_id for e in old] + [new.run_id])
    assert {ctx.attempt for _, ctx in recorder.calls if ctx.run_id != new.run_id} == {2}


async def test_a_restore_cut_by_a_stuck_connection_does_not_end_the_consumers_keeper(
    broker: TestBroker, run_worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consume again that fails with the CancelledError aiormq gives the calls under way
    on a connection it dropped as stuck (no cancel of the keeper's task) is tried again,
    where it ended the keeper and left the worker taking no task for good."""
    monkeypatch.setattr(subscription, "RETRY_SECONDS", 0.01)
    recorder = Recorder()
    worker = await run_worker(registry(job=recorder))
    original, tries = subscription.Subscription._consume, [0]

    async def cut_once(self: subscription.Subscription, raw: Any) -> None:
        tries[0] += 1
        if tries[0] == 1:
            raise asyncio.CancelledError  # what aiormq raised; the keeper is not cancelled
        await original(self, raw)

    monkeypatch.setattr(subscription.Subscription, "_consume", cut_once)
    channel = await broker.channel()
    await channel.queue_delete(broker.names.main_queue)  # the broker cancels the consumer
    # the old consumer reads as active until the broker's cancel arrives: wait on the retry
    await eventually(lambda: tries[0] >= 2 and worker.consuming(), 10, what="consuming again")
    assert tries[0] == 2
    await publish(broker, envelope("job"), plan(50))
    await recorder.wait_calls(1, timeout=10)
